package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A share-group worker of the randomized run in {@link TransactionalShareConsumerTest}, run in a child JVM, with a
 * {@link ShareOutcomeLedger}: per poll one transaction that writes one output per record (key = the input value,
 * value = the record's delivery count) and ACCEPTs it. At random it aborts the transaction instead of committing,
 * halts in the middle of a transaction, or halts after the Kafka commit and before the acknowledgements (the window
 * the ledger closes); the test also kills it from outside. Prints "ready".
 *
 * <p>Arguments: bootstrap input output group transactionalId ledgerTopic seed abortPercent haltPermille paceMs (a
 * pause after each transaction, so that the test's kills land while work is in progress).
 */
public final class ShareChaosWorker {

    private ShareChaosWorker() {
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String transactionalId = args[4];
        String ledgerTopic = args[5];
        Random random = new Random(Long.parseLong(args[6]));
        int abortPercent = Integer.parseInt(args[7]);
        int haltPermille = Integer.parseInt(args[8]);
        long paceMs = Long.parseLong(args[9]);

        Map<String, Object> sessionConfigs = new HashMap<>();
        sessionConfigs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sessionConfigs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        Map<String, Object> consumerConfigs = new HashMap<>();
        consumerConfigs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 50);
        consumerConfigs.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");

        boolean[] haltAfterCommit = { false };
        try (TransactionSession session = TransactionSession.open(sessionConfigs);
                TransactionalShareConsumer<String, String> consumer = new TransactionalShareConsumer<>(consumerConfigs,
                        new StringDeserializer(), new StringDeserializer());
                ShareOutcomeLedger ledger = new ShareOutcomeLedger(sessionConfigs, ledgerTopic, Duration.ofSeconds(60))) {
            consumer.useOutcomeLedger(ledger);
            session.initialize();
            // registered before the consumer binds: runs after the Kafka commit, before the acknowledgements
            KafkaTransactionSession.of(session).addParticipant(new SessionParticipant() {
                @Override
                public void afterCommit(TransactionSession s) {
                    if (haltAfterCommit[0]) {
                        Runtime.getRuntime().halt(3);
                    }
                }
            });
            SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            consumer.subscribe(List.of(input));
            consumer.bindTransactionSession(session);
            System.out.println("ready");
            System.out.flush();
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                boolean haltInside = random.nextInt(1000) < haltPermille / 2;
                haltAfterCommit[0] = random.nextInt(1000) < haltPermille / 2;
                boolean abort = random.nextInt(100) < abortPercent;
                session.beginTransaction();
                int i = 0;
                for (ConsumerRecord<String, String> r : records) {
                    out.send(new ProducerRecord<>(output, r.value(),
                            String.valueOf(r.deliveryCount().orElse((short) 0))));
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    if (haltInside && ++i == records.count() / 2 + 1) {
                        out.flush();
                        Runtime.getRuntime().halt(3);
                    }
                }
                try {
                    if (abort) {
                        session.abortTransaction();
                    }
                    else {
                        session.commitTransaction();
                    }
                }
                catch (SessionAbortableException ex) {
                    // a batch older than its lock is refused (the ledger's lock check): its records come back
                    session.abortTransaction();
                }
                pace(paceMs);
            }
        }
    }

    /** Paces the load (the test's faults need work in progress to land in); not a synchronisation. */
    private static void pace(long millis) {
        try {
            Thread.sleep(millis);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }
}
