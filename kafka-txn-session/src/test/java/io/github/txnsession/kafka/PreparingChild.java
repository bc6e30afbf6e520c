package io.github.txnsession.kafka;

import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Child-JVM programs for crash tests.
 * <ul>
 * <li>{@code prepare BOOTSTRAP TXN_ID TOPIC COUNT TIMEOUT_MS}: sends COUNT records, prepares, prints
 * {@code PREPARED pid:epoch} and dies with {@code Runtime.halt} (no close, no abort).</li>
 * <li>{@code complete BOOTSTRAP TXN_ID PID:EPOCH ACTION [STATE]}: resumes and runs ACTION (commit, abort, or
 * complete with STATE), prints {@code OUTCOME X} or {@code ERROR ExceptionClass message}.</li>
 * </ul>
 */
public final class PreparingChild {

    private PreparingChild() {
    }

    public static void main(String[] args) {
        if (args[0].equals("prepare")) {
            prepare(args[1], args[2], args[3], Integer.parseInt(args[4]), args[5]);
        }
        else {
            complete(args[1], args[2], args[3], args[4], args.length > 5 ? args[5] : null);
        }
    }

    private static void prepare(String bootstrap, String txnId, String topic, int count, String timeoutMs) {
        Map<String, Object> configs = new HashMap<>();
        configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, Integer.parseInt(timeoutMs));
        TransactionSession session = TransactionSession.open(configs);
        session.initialize();
        SessionProducer<String, String> producer = new SessionProducer<>(session, new StringSerializer(),
                new StringSerializer());
        session.beginTransaction();
        for (int i = 0; i < count; i++) {
            producer.send(new ProducerRecord<>(topic, "k" + i, txnId + "-" + i));
        }
        PreparedTransaction state = session.prepareTransaction();
        System.out.println("PREPARED " + state);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }

    private static void complete(String bootstrap, String txnId, String identity, String action,
            String stateText) {
        PreparedTransaction prepared = PreparedTransaction.parse(identity);
        try (TransactionSession session = TransactionSession.resume(txnId, prepared,
                Map.of(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            String outcome = switch (action) {
                case "commit" -> {
                    session.commitTransaction();
                    yield "COMMITTED";
                }
                case "abort" -> {
                    session.abortTransaction();
                    yield "ABORTED";
                }
                default -> session.completeTransaction(PreparedTransaction.parse(stateText)).name();
            };
            System.out.println("OUTCOME " + outcome);
        }
        catch (RuntimeException ex) {
            System.out.println("ERROR " + ex.getClass().getSimpleName() + " " + ex.getMessage());
        }
        System.out.flush();
    }
}
