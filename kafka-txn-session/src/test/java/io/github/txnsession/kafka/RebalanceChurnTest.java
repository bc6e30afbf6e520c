package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Consume-transform-produce while processors join and leave the group every few seconds (issue R6): each processor
 * has its own transactional id and a bound {@link TransactionalConsumer} in one consumer group; a churn loop starts a
 * new one or stops a running one (it leaves the group after its transaction) at random, between 1 and 4 running. Run
 * with the classic group protocol (eager range assignment first, so every rebalance revokes everything) and with the
 * consumer group protocol (KIP-848). A transaction that read from a partition its consumer lost must never commit:
 * checked as every input exactly once and in order per partition in the output read with {@code read_committed}, the
 * same seen by a concurrent reader, and no hanging transaction at the end.
 *
 * <p>Records: {@code -Dtxnsession.churn.records=N} (default 1,200 at 60 a second; the {@code bounce-full} profile
 * runs 6,000).
 */
class RebalanceChurnTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final int PARTITIONS = 6;

    @ParameterizedTest(name = "group.protocol={0}")
    @ValueSource(strings = { "classic", "consumer" })
    void everyInputExactlyOnceWhileProcessorsComeAndGo(String protocol) throws Exception {
        int total = Integer.getInteger("txnsession.churn.records", 1_200);
        long seed = Long.getLong("txnsession.churn.seed", System.nanoTime());
        Random random = new Random(seed);
        String input = EmbeddedKafkaCluster.uniqueName("churn-in");
        String output = EmbeddedKafkaCluster.uniqueName("churn-out");
        String group = EmbeddedKafkaCluster.uniqueName("churn-group");
        String idPrefix = EmbeddedKafkaCluster.uniqueName("churn-processor");
        kafka.cluster().createTopics(PARTITIONS, input, output);
        Map<String, Object> consumer = Map.of(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol,
                ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);

        CtpLoad load = new CtpLoad(kafka.cluster(), input, output, PARTITIONS, total / PARTITIONS);
        List<CtpLoad.Processor> running = new ArrayList<>();
        List<String> churn = new ArrayList<>();
        int started = 0;
        int transactions = 0;
        int aborts = 0;
        try {
            Future<?> feeding = load.feed(60);
            CtpLoad.Reader reader = load.startReader();
            for (int i = 0; i < 2; i++) {
                running.add(load.startProcessor(group, idPrefix + "-" + started++, consumer));
            }
            while (!load.done()) {
                load.assertNoneFailed(feeding);
                assertThat(load.sinceLastProgress()).as("no progress for too long; churn so far %s (seed %d)", churn,
                        seed).isLessThan(Duration.ofSeconds(60));
                boolean join = running.size() == 1 || (running.size() < 4 && random.nextBoolean());
                if (join) {
                    running.add(load.startProcessor(group, idPrefix + "-" + started++, consumer));
                    churn.add("+" + running.size() + "@" + load.committed.get());
                }
                else {
                    CtpLoad.Processor leaving = running.remove(random.nextInt(running.size()));
                    leaving.stop();
                    transactions += leaving.transactions.get();
                    aborts += leaving.aborts.get();
                    churn.add("-" + running.size() + "@" + load.committed.get());
                }
                long pause = 1500 + random.nextInt(2000);
                long until = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(pause);
                while (!load.done() && System.nanoTime() < until) {
                    Thread.sleep(50); // the pause between membership changes (load-driven, not a synchronisation)
                }
            }
            for (CtpLoad.Processor p : running) {
                p.stop();
                transactions += p.transactions.get();
                aborts += p.aborts.get();
            }
            feeding.get(1, TimeUnit.MINUTES);
            load.assertExactlyOnce(reader, idPrefix, "seed " + seed + ", churn " + churn);
        }
        finally {
            load.shutdown();
        }
        System.out.printf("rebalance churn (%s): %d records exactly once through %d membership changes %s, %d "
                + "processors, %d transactions, %d aborted (seed %d)%n", protocol, load.total(), churn.size(), churn,
                started, transactions, aborts, seed);
        assertThat(churn).as("membership changes during the run").hasSizeGreaterThanOrEqualTo(3);
    }
}
