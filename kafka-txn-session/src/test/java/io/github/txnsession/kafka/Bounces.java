package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.jspecify.annotations.Nullable;

/** What the broker-bounce tests share: finding a coordinator to stop, and waiting until a stop loses nothing. */
final class Bounces {

    private Bounces() {
    }

    /**
     * @param role 0 for the transaction coordinator of {@code transactionalId}, 1 for the group coordinator of
     *        {@code group}, anything else for "any broker"
     * @return the broker to stop; null for "any broker", or when the coordinator is not known yet
     */
    static @Nullable Integer coordinator(EmbeddedKafkaCluster cluster, int role, String transactionalId,
            String group) {
        try {
            return switch (role) {
                case 0 -> cluster.admin().describeTransactions(List.of(transactionalId))
                    .description(transactionalId).get(10, TimeUnit.SECONDS).coordinatorId();
                case 1 -> cluster.admin().describeConsumerGroups(List.of(group)).describedGroups().get(group)
                    .get(10, TimeUnit.SECONDS).coordinator().id();
                default -> null;
            };
        }
        catch (Exception notYetKnown) {
            return null;
        }
    }

    /**
     * Waits until every replica of {@code topics} and of the transaction and offsets logs is back in sync, so that the
     * next stop never leaves a partition below {@code min.insync.replicas} (two brokers down at once is not what these
     * tests are about).
     */
    static void awaitFullyReplicated(EmbeddedKafkaCluster cluster, String... topics) {
        List<String> all = new ArrayList<>(List.of(topics));
        all.add("__transaction_state");
        all.add("__consumer_offsets");
        org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(60)).pollInterval(Duration.ofMillis(200))
            .until(() -> {
                try {
                    return cluster.admin().describeTopics(all).allTopicNames().get(10, TimeUnit.SECONDS)
                        .values().stream().flatMap(d -> d.partitions().stream())
                        .allMatch(p -> p.isr().size() == p.replicas().size());
                }
                catch (Exception notNow) {
                    return false;
                }
            });
    }
}
