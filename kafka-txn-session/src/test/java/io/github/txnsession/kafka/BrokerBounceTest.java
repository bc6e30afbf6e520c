package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.HangingTransactions;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.NewTopic;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Consume-transform-produce through a bound {@link TransactionalConsumer} and a session while brokers bounce (issue
 * R2, path a): 3 brokers, every topic and the transaction and offsets logs replicated 3 times with
 * {@code min.insync.replicas=2}; one broker at a time is stopped and restarted every few seconds, in turn the
 * transaction coordinator of the processor's id, the group coordinator, and the others. The processor is written as the
 * core usage guide says: abort on {@link SessionAbortableException} or {@link TransactionLostException}, retry a commit
 * that timed out, start over with a new session after fencing or a fatal error.
 *
 * <p>Checked: every input exactly once in the output read with {@code read_committed} (nothing lost, nothing
 * duplicated), in input order per partition; a concurrent {@code read_committed} reader saw exactly the same; no gap
 * between commits longer than 30 s; at the end no hanging transaction ({@link HangingTransactions}).
 *
 * <p>Brokers stop without a controlled shutdown ({@code controlled.shutdown.enable=false}): their partition
 * leaderships and coordinators vanish without being handed over, and move only once the controller stops hearing from
 * the broker, as after a crash (unlike {@code kill -9}, the embedded broker still flushes its log on the way down; the
 * test kit has no harder stop in-process). The input is
 * produced while the brokers bounce, so the processor works through all of them. Records:
 * {@code -Dtxnsession.bounce.records=N} at {@code -Dtxnsession.bounce.rate=R} a second (default 1,200 at 40, about 30 s;
 * the {@code bounce-full} Maven profile runs 10,000 at 40, about 4 minutes).
 */
class BrokerBounceTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(b -> b.brokers(3)
        .brokerProperty("min.insync.replicas", 2)
        .brokerProperty("controlled.shutdown.enable", false)); // a stopped broker hands nothing over, as in a crash

    private static final int PARTITIONS = 4;
    private static final Duration MAX_STALL = Duration.ofSeconds(30);

    @Test
    void everyInputExactlyOnceWhileBrokersBounce() throws Exception {
        int total = Integer.getInteger("txnsession.bounce.records", 1_200);
        int rate = Integer.getInteger("txnsession.bounce.rate", 40);
        long seed = Long.getLong("txnsession.bounce.seed", System.nanoTime());
        Random random = new Random(seed);
        String input = EmbeddedKafkaCluster.uniqueName("bounce-in");
        String output = EmbeddedKafkaCluster.uniqueName("bounce-out");
        String group = EmbeddedKafkaCluster.uniqueName("bounce-group");
        String transactionalId = EmbeddedKafkaCluster.uniqueName("bounce-processor");
        kafka.cluster().admin().createTopics(List.of(new NewTopic(input, PARTITIONS, (short) 3),
                new NewTopic(output, PARTITIONS, (short) 3))).all().get();

        CtpLoad load = new CtpLoad(kafka.cluster(), input, output, PARTITIONS, total / PARTITIONS);
        List<String> bounces = new ArrayList<>();
        CtpLoad.Processor processor;
        try {
            Future<?> feeding = load.feed(rate);
            processor = load.startProcessor(group, transactionalId, Map.of());
            CtpLoad.Reader reader = load.startReader();
            // the first bounce stops the transaction coordinator: let the processor register its id first
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(60)).until(() -> load.committed.get() > 0);
            int turn = 0;
            while (!processor.future().isDone()) {
                load.assertNoneFailed(feeding);
                assertThat(load.sinceLastProgress()).as("no progress for too long; bounces so far %s (seed %d)",
                        bounces, seed).isLessThan(MAX_STALL);
                Bounces.awaitFullyReplicated(kafka.cluster(), input, output);
                String role = switch (turn % 3) {
                    case 0 -> "txn";
                    case 1 -> "group";
                    default -> "any";
                };
                Integer broker = Bounces.coordinator(kafka.cluster(), turn++ % 3, transactionalId, group);
                if (broker == null) {
                    role = "any";
                    broker = kafka.cluster().brokerIds().stream().skip(random.nextInt(3)).findFirst().orElseThrow();
                }
                kafka.cluster().stopBroker(broker);
                bounces.add(role + ":" + broker + "@" + load.committed.get());
                sleepUnlessDone(processor.future(), 500 + random.nextInt(1500));
                kafka.cluster().restartBroker(broker);
                sleepUnlessDone(processor.future(), 1000 + random.nextInt(2000));
            }
            processor.future().get(5, TimeUnit.MINUTES);
            feeding.get(1, TimeUnit.MINUTES);
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
            load.assertExactlyOnce(reader, transactionalId, "seed " + seed + ", bounces " + bounces);
        }
        finally {
            load.shutdown();
            if (!kafka.cluster().stoppedBrokers().isEmpty()) {
                kafka.cluster().restartBrokers(kafka.cluster().stoppedBrokers());
            }
        }
        System.out.printf("broker bounces: %d records exactly once through %d bounces %s, %d transactions, %d aborted, "
                + "%d sessions, longest gap between commits %d ms (seed %d)%n", load.total(), bounces.size(), bounces,
                processor.transactions.get(), processor.aborts.get(), processor.sessions.get(),
                load.longestGapMs.get(), seed);
        assertThat(bounces).as("brokers bounced during the run").hasSizeGreaterThanOrEqualTo(2)
            .anyMatch(b -> b.startsWith("txn:"));
        assertThat(load.longestGapMs.get()).as("longest gap between commits, ms").isLessThan(MAX_STALL.toMillis());
    }

    private static void sleepUnlessDone(Future<?> done, long millis) throws Exception {
        try {
            done.get(millis, TimeUnit.MILLISECONDS);
        }
        catch (java.util.concurrent.TimeoutException stillRunning) {
            // the pause between bounces
        }
    }
}
