package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A share-group worker of {@link TransactionalShareConsumerTest}, run in a child JVM: for every record it writes one
 * output (key = the input value) and acknowledges ACCEPT in the same transaction. On its {@code haltOnCommit}-th
 * commit it dies with {@code Runtime.halt} after the Kafka commit and before the acknowledgements are sent: the
 * window a {@link TransactionalShareConsumer} documents. Prints "ready" and "halting after commit of N records: ids".
 *
 * <p>Arguments: bootstrap input output group transactionalId haltOnCommit [ledgerTopic]; with a ledger topic the
 * consumer uses a {@link ShareOutcomeLedger} on it.
 */
public final class ShareWorkerProcess {

    private ShareWorkerProcess() {
    }

    public static void main(String[] args) {
        String bootstrap = args[0];
        String input = args[1];
        String output = args[2];
        String group = args[3];
        String transactionalId = args[4];
        int haltOnCommit = Integer.parseInt(args[5]);
        String ledgerTopic = args.length > 6 ? args[6] : null;

        Map<String, Object> sessionConfigs = new HashMap<>();
        sessionConfigs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        sessionConfigs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        Map<String, Object> consumerConfigs = new HashMap<>();
        consumerConfigs.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        consumerConfigs.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        consumerConfigs.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 10);
        consumerConfigs.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");

        List<String> batch = new ArrayList<>();
        AtomicInteger commits = new AtomicInteger();
        try (TransactionSession session = TransactionSession.open(sessionConfigs);
                TransactionalShareConsumer<String, String> consumer = new TransactionalShareConsumer<>(consumerConfigs,
                        new StringDeserializer(), new StringDeserializer());
                ShareOutcomeLedger ledger = ledgerTopic == null ? null
                        : new ShareOutcomeLedger(sessionConfigs, ledgerTopic, Duration.ofSeconds(60))) {
            if (ledger != null) {
                consumer.useOutcomeLedger(ledger);
            }
            session.initialize();
            // registered before the consumer binds, so it runs after the Kafka commit and before the acknowledgements
            KafkaTransactionSession.of(session).addParticipant(new SessionParticipant() {
                @Override
                public void afterCommit(TransactionSession s) {
                    if (commits.incrementAndGet() == haltOnCommit) {
                        System.out.println("halting after commit of " + batch.size() + " records: "
                                + String.join(",", batch));
                        System.out.flush();
                        Runtime.getRuntime().halt(3);
                    }
                }
            });
            SessionProducer<String, String> out = new SessionProducer<>(session, new StringSerializer(),
                    new StringSerializer());
            consumer.subscribe(List.of(input));
            consumer.bindTransactionSession(session);
            System.out.println("ready");
            while (true) {
                ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
                if (records.isEmpty()) {
                    continue;
                }
                batch.clear();
                session.beginTransaction();
                for (ConsumerRecord<String, String> r : records) {
                    out.send(new ProducerRecord<>(output, r.value(), r.value()));
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    batch.add(r.value());
                }
                try {
                    session.commitTransaction();
                }
                catch (SessionAbortableException ex) {
                    // with the ledger: a batch older than the lock (the first poll joins the group) is refused
                    session.abortTransaction();
                }
            }
        }
    }
}
