package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The consume-transform-produce processor of {@link TransactionalConsumerCrashTest}, run in a child JVM: polls batches
 * of up to 50 records through a bound {@link TransactionalConsumer}, writes "out-" + value to the same partition of
 * the output topic, commits. With {@code haltAfterSends >= 0} it dies ({@code Runtime.halt}) right after that many
 * sends, in the middle of a transaction. With {@code pauseAfterCommits >= 0}, the first transaction after that many
 * committed records flushes its sends, prints "mid-transaction" and waits for a line on its standard input before
 * committing (so that a test can freeze it there). A session error ends the process with a "failed ExceptionClass" line and exit
 * code 2. Prints "ready", "committed N", "halting" and "done" lines.
 *
 * <p>Arguments: bootstrap input output group transactionalId haltAfterSends [pauseAfterCommits]
 */
public final class CtpProcess {

    private CtpProcess() {
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String transactionalId = args[4];
        int haltAfterSends = Integer.parseInt(args[5]);
        int pauseAfterCommits = args.length > 6 ? Integer.parseInt(args[6]) : -1;

        Map<String, Object> sessionConfigs = new HashMap<>();
        sessionConfigs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sessionConfigs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        sessionConfigs.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        Map<String, Object> consumerConfigs = new HashMap<>();
        consumerConfigs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        // static membership: a restarted processor takes over its partitions at once, no session timeout to wait
        consumerConfigs.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "processor-1");
        consumerConfigs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        consumerConfigs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        consumerConfigs.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);

        try {
            run(sessionConfigs, consumerConfigs, input, output, haltAfterSends, pauseAfterCommits);
        }
        catch (TransactionSessionException ex) {
            System.out.println("failed " + ex.getClass().getSimpleName() + ": " + ex.getMessage());
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
    }

    private static void run(Map<String, Object> sessionConfigs, Map<String, Object> consumerConfigs, String input,
            String output, int haltAfterSends, int pauseAfterCommits) {
        try (TransactionSession session = TransactionSession.open(sessionConfigs);
                TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(
                        new KafkaConsumer<>(consumerConfigs, new StringDeserializer(), new StringDeserializer()))) {
            session.initialize();
            SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            consumer.subscribe(List.of(input));
            consumer.bindTransactionSession(session);
            System.out.println("ready");
            int sends = 0;
            int committed = 0;
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    if (caughtUp(consumer, input)) {
                        System.out.println("done " + committed);
                        System.out.flush();
                        return;
                    }
                    continue;
                }
                session.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    out.send(new ProducerRecord<>(output, r.partition(), r.key(), "out-" + r.value()));
                    if (++sends == haltAfterSends) {
                        out.flush();
                        System.out.println("halting after " + sends + " sends, mid-transaction");
                        System.out.flush();
                        Runtime.getRuntime().halt(3);
                    }
                }
                if (pauseAfterCommits >= 0 && committed >= pauseAfterCommits) {
                    pauseAfterCommits = -1;
                    out.flush();
                    System.out.println("mid-transaction");
                    System.out.flush();
                    awaitGoAhead();
                }
                session.commitTransaction();
                committed += records.count();
                System.out.println("committed " + committed);
                System.out.flush();
            }
        }
    }

    private static void awaitGoAhead() {
        try {
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in,
                    java.nio.charset.StandardCharsets.UTF_8)).readLine();
        }
        catch (java.io.IOException ex) {
            throw new java.io.UncheckedIOException(ex);
        }
    }

    private static boolean caughtUp(TransactionalConsumer<String, String> consumer, String input) {
        Set<TopicPartition> assigned = consumer.assignment();
        int partitions = consumer.partitionsFor(input).size();
        if (assigned.size() < partitions) {
            return false;
        }
        Map<TopicPartition, Long> end = consumer.endOffsets(assigned);
        for (TopicPartition tp : assigned) {
            if (consumer.position(tp) < end.get(tp)) {
                return false;
            }
        }
        return true;
    }
}
