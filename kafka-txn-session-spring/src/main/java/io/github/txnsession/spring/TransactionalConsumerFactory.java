package io.github.txnsession.spring;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionalConsumer;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;

import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Makes {@link TransactionalConsumer}s and {@link TransactionalShareConsumer}s for programmatic loops, and binds
 * them to the session of the current {@link SessionTransactionManager} transaction:
 *
 * <pre>{@code
 * TransactionalConsumer<String, String> consumer = consumers.createConsumer("billing", keys, values);
 * consumer.subscribe(List.of("orders"));
 * while (running) {
 *     transactionTemplate.executeWithoutResult(status -> {
 *         consumers.bindToCurrentTransaction(consumer);      // unbound again when the transaction ends
 *         for (var record : consumer.poll(Duration.ofMillis(500))) {
 *             template.send("invoices", record.key(), invoice(record.value()));
 *         }
 *     });                                                   // offsets commit with the invoices, or both abort
 * }
 * }</pre>
 *
 * <p>Guarantees: a bound consumer's positions (or share acknowledgements) join the transaction it was bound in and
 * no other; it is unbound after that transaction completes, so the next transaction (possibly on another session of
 * the pool) binds it afresh. Consumers are created with {@code isolation.level=read_committed} and auto-commit off.
 * Not guaranteed: a consumer is for one thread, like any Kafka consumer; the caller closes it.
 */
public class TransactionalConsumerFactory {

    private final TransactionSessionPool pool;
    private final Map<String, Object> consumerConfigs;
    private volatile @Nullable SessionEnlistment enlistment;

    /**
     * @param pool the pool of the transaction manager whose transactions consumers are bound to
     * @param consumerConfigs consumer configs ({@code bootstrap.servers}, security, tuning); share consumers take only
     *        the connection settings from them ({@code bootstrap.*}, {@code security.*}, {@code ssl.*},
     *        {@code sasl.*}, {@code client.*})
     */
    public TransactionalConsumerFactory(TransactionSessionPool pool, Map<String, ?> consumerConfigs) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.consumerConfigs = Map.copyOf(new HashMap<>(Objects.requireNonNull(consumerConfigs, "consumerConfigs")));
    }

    /**
     * Lets consumers be bound in transactions of the application's own transaction manager: when the current
     * transaction has no session yet, {@code enlistment} enlists one (as a first send would), and the consumer is
     * bound to it. The starter sets it whenever it enlists sessions in the application's manager.
     *
     * @param enlistment enlists a session of this factory's pool in the current transaction; null to bind only in
     *        transactions that have a session already (a {@link SessionTransactionManager}'s)
     * @throws IllegalArgumentException if {@code enlistment} enlists sessions of another pool
     */
    public void setEnlistment(@Nullable SessionEnlistment enlistment) {
        if (enlistment != null && enlistment.getPool() != this.pool) {
            throw new IllegalArgumentException("The enlistment enlists sessions of pool " + enlistment.getPool()
                    + ", but this factory binds consumers to sessions of pool " + this.pool + "; use one pool");
        }
        this.enlistment = enlistment;
    }

    /**
     * @param <K> the type of record keys
     * @param <V> the type of record values
     * @param groupId the consumer group the offsets are committed for; not null
     * @param keyDeserializer the deserializer of record keys (any deserializer classes in the configs are ignored)
     * @param valueDeserializer the deserializer of record values (any deserializer classes in the configs are ignored)
     * @return a new consumer of group {@code groupId} (read_committed, no auto-commit); subscribe or assign it, then
     *         bind it in each transaction with {@link #bindToCurrentTransaction(TransactionalConsumer)}
     */
    public <K, V> TransactionalConsumer<K, V> createConsumer(String groupId, Deserializer<K> keyDeserializer,
            Deserializer<V> valueDeserializer) {
        Map<String, Object> configs = new HashMap<>(this.consumerConfigs);
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, Objects.requireNonNull(groupId, "groupId"));
        configs.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        configs.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        configs.remove(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG);
        configs.remove(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG);
        return new TransactionalConsumer<>(new KafkaConsumer<>(configs, keyDeserializer, valueDeserializer));
    }

    /**
     * @param <K> the type of record keys
     * @param <V> the type of record values
     * @param groupId the share group to join; not null
     * @param keyDeserializer the deserializer of record keys
     * @param valueDeserializer the deserializer of record values
     * @return a new share consumer of share group {@code groupId}, in explicit acknowledgement mode
     */
    public <K, V> TransactionalShareConsumer<K, V> createShareConsumer(String groupId,
            Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
        return createShareConsumer(groupId, keyDeserializer, valueDeserializer, Map.of());
    }

    /**
     * @param <K> the type of record keys
     * @param <V> the type of record values
     * @param groupId the share group to join; not null
     * @param keyDeserializer the deserializer of record keys
     * @param valueDeserializer the deserializer of record values
     * @param overrides share consumer configs set on top of the connection settings (for example
     *        {@code share.acquire.mode}, {@code max.poll.records})
     * @return a new share consumer of share group {@code groupId}, in explicit acknowledgement mode
     */
    public <K, V> TransactionalShareConsumer<K, V> createShareConsumer(String groupId,
            Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer, Map<String, ?> overrides) {
        Map<String, Object> configs = shareConsumerConfigs();
        configs.putAll(Objects.requireNonNull(overrides, "overrides"));
        configs.put(ConsumerConfig.GROUP_ID_CONFIG, Objects.requireNonNull(groupId, "groupId"));
        return new TransactionalShareConsumer<>(configs, keyDeserializer, valueDeserializer);
    }

    /** @return the connection settings of the consumer configs, which share consumers accept */
    Map<String, Object> shareConsumerConfigs() {
        Map<String, Object> configs = new HashMap<>();
        this.consumerConfigs.forEach((key, value) -> {
            if (key.startsWith("bootstrap.") || key.startsWith("security.") || key.startsWith("ssl.")
                    || key.startsWith("sasl.") || key.startsWith("client.")
                    || key.equals("org.springframework.boot.ssl.SslBundle")) {
                configs.put(key, value);
            }
        });
        return configs;
    }

    /**
     * Binds {@code consumer} to the session of the current transaction until that transaction completes.
     *
     * @param <K> the type of record keys
     * @param <V> the type of record values
     * @param consumer a consumer made by {@link #createConsumer}; binding it again in the same transaction does nothing
     * @return the consumer
     * @throws IllegalStateException outside a session transaction (a consumer still bound to the session of an
     *         earlier transaction, whose end could not unbind it, is unbound and bound to this one)
     */
    public <K, V> TransactionalConsumer<K, V> bindToCurrentTransaction(TransactionalConsumer<K, V> consumer) {
        TransactionSession session = currentSession();
        TransactionSession previous = consumer.transactionSession();
        if (previous == session) {
            return consumer;
        }
        if (previous != null) {
            consumer.unbindTransactionSession(); // left bound by a transaction whose end could not unbind it
        }
        consumer.bindTransactionSession(session);
        unbindAfterCompletion(consumer::unbindTransactionSession);
        return consumer;
    }

    /**
     * Binds {@code consumer} to the session of the current transaction until that transaction completes: its
     * acknowledgements are applied after the commit, and an abort releases its records.
     *
     * @param <K> the type of record keys
     * @param <V> the type of record values
     * @param consumer a share consumer made by {@link #createShareConsumer}; binding it again in the same transaction
     *        does nothing
     * @return the consumer
     * @throws IllegalStateException outside a session transaction (a consumer still bound to the session of an
     *         earlier transaction, whose end could not unbind it, is unbound and bound to this one)
     */
    public <K, V> TransactionalShareConsumer<K, V> bindToCurrentTransaction(
            TransactionalShareConsumer<K, V> consumer) {
        TransactionSession session = currentSession();
        TransactionSession previous = consumer.transactionSession();
        if (previous == session) {
            return consumer;
        }
        if (previous != null) {
            consumer.unbindTransactionSession(); // left bound by a transaction whose end could not unbind it
        }
        consumer.bindTransactionSession(session);
        unbindAfterCompletion(consumer::unbindTransactionSession);
        return consumer;
    }

    private TransactionSession currentSession() {
        SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
        SessionEnlistment enlist = this.enlistment;
        if (holder == null && enlist != null && SessionEnlistment.canEnlist()) {
            holder = enlist.enlist();
        }
        if (holder == null) {
            throw new IllegalStateException("No transaction session is bound to thread '"
                    + Thread.currentThread().getName() + "': bind consumers inside a transaction of the "
                    + "SessionTransactionManager over pool " + this.pool + ", or of the application's transaction "
                    + "manager when an enlistment is set (@Transactional or TransactionTemplate)");
        }
        holder.markConsumersBound();
        return holder.session();
    }

    private static void unbindAfterCompletion(Runnable unbind) {
        if (!TransactionSynchronizationManager.isSynchronizationActive()) {
            throw new IllegalStateException("Transaction synchronization is not active, so the consumer could not be "
                    + "unbound when the transaction ends; keep the transaction manager's synchronization on");
        }
        TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
            @Override
            public void afterCompletion(int status) {
                unbind.run();
            }
        });
    }
}
