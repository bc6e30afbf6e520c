package io.github.txnsession.kafka.test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;

/**
 * What {@code kafka-transactions.sh find-hanging} checks, as a test assertion: after a test's clients have stopped,
 * none of its transactional ids has an open transaction at its coordinator, no producer holds an open transaction on
 * the test's partitions, and no partition's last stable offset is pinned below its high watermark.
 *
 * <p>Coordinators finish a commit or abort asynchronously (markers), so each check is retried until it holds or the
 * wait runs out; the assertion error then lists everything still open.
 */
public final class HangingTransactions {

    private HangingTransactions() {
    }

    /**
     * @param admin an admin client of the cluster
     * @param transactionalIdPrefix the transactional id the test used, or the start of its ids: an id counts when it
     *        equals this or starts with this followed by {@code -}
     * @param partitions the partitions the test wrote to or consumed from with transactions
     * @param wait how long open transactions may take to finish before they count as hanging
     * @throws AssertionError naming every open transaction, producer and pinned partition found at the end of the wait
     */
    public static void assertNone(Admin admin, String transactionalIdPrefix, Collection<TopicPartition> partitions,
            Duration wait) {
        long deadline = System.nanoTime() + wait.toNanos();
        List<String> found;
        while (true) {
            found = find(admin, transactionalIdPrefix, partitions);
            if (found.isEmpty()) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError("Hanging transactions after " + wait.toSeconds() + " s:\n  "
                        + String.join("\n  ", found));
            }
            try {
                TimeUnit.MILLISECONDS.sleep(200); // polling a broker-side condition; no event to wait on
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new AssertionError("Interrupted while checking for hanging transactions", ex);
            }
        }
    }

    /**
     * @param admin an admin client of the cluster
     * @return every partition of {@code __consumer_offsets}, where transactional offset commits are written
     */
    public static List<TopicPartition> offsetsTopicPartitions(Admin admin) {
        try {
            return admin.describeTopics(List.of("__consumer_offsets")).allTopicNames().get().get("__consumer_offsets")
                .partitions().stream().map(p -> new TopicPartition("__consumer_offsets", p.partition()))
                .collect(Collectors.toList());
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new AssertionError("Interrupted while listing __consumer_offsets", ex);
        }
        catch (ExecutionException ex) {
            throw new AssertionError("Could not list __consumer_offsets: " + ex.getCause(), ex);
        }
    }

    /**
     * @param admin an admin client of the cluster
     * @param transactionalIdPrefix the transactional id, or the start of the ids, as for {@link #assertNone}
     * @param partitions the partitions to check for open transactions and a pinned last stable offset
     * @return a line for each open transaction of an id with the prefix, each producer with an open transaction on one
     *         of the partitions, and each partition whose last stable offset is below its high watermark
     */
    public static List<String> find(Admin admin, String transactionalIdPrefix, Collection<TopicPartition> partitions) {
        List<String> found = new ArrayList<>();
        try {
            List<String> ids = admin.listTransactions().all().get().stream()
                .map(TransactionListing::transactionalId)
                .filter(id -> id.equals(transactionalIdPrefix) || id.startsWith(transactionalIdPrefix + "-"))
                .collect(Collectors.toList());
            if (!ids.isEmpty()) {
                for (Map.Entry<String, TransactionDescription> e : admin.describeTransactions(ids).all().get()
                    .entrySet()) {
                    TransactionState state = e.getValue().state();
                    if (state != TransactionState.EMPTY && state != TransactionState.COMPLETE_COMMIT
                            && state != TransactionState.COMPLETE_ABORT) {
                        found.add("transactional id '" + e.getKey() + "' is " + state + " (producer "
                                + e.getValue().producerId() + ", epoch " + e.getValue().producerEpoch()
                                + ", partitions " + e.getValue().topicPartitions() + ")");
                    }
                }
            }
            if (!partitions.isEmpty()) {
                admin.describeProducers(partitions).all().get().forEach((tp, producers) -> {
                    for (ProducerState p : producers.activeProducers()) {
                        if (p.currentTransactionStartOffset().isPresent()) {
                            found.add(tp + ": producer " + p.producerId() + " (epoch " + p.producerEpoch()
                                    + ") has a transaction open since offset "
                                    + p.currentTransactionStartOffset().getAsLong());
                        }
                    }
                });
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                partitions.forEach(tp -> latest.put(tp, OffsetSpec.latest()));
                var stable = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_COMMITTED)).all()
                    .get();
                var high = admin.listOffsets(latest, new ListOffsetsOptions(IsolationLevel.READ_UNCOMMITTED)).all()
                    .get();
                for (TopicPartition tp : partitions) {
                    long lso = stable.get(tp).offset();
                    long hw = high.get(tp).offset();
                    if (lso < hw) {
                        found.add(tp + ": last stable offset " + lso + " is pinned below the high watermark " + hw);
                    }
                }
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new AssertionError("Interrupted while checking for hanging transactions", ex);
        }
        catch (ExecutionException ex) {
            found.add("could not check: " + ex.getCause());
        }
        return found;
    }
}
