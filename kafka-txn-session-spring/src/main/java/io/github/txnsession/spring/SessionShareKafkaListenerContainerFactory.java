package io.github.txnsession.spring;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import io.github.txnsession.kafka.ShareOutcomeLedger;
import io.github.txnsession.kafka.TransactionalShareConsumer;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ShareConsumer;
import org.apache.kafka.common.serialization.Deserializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.kafka.config.KafkaListenerEndpoint;
import org.springframework.kafka.config.ShareKafkaListenerContainerFactory;
import org.springframework.kafka.core.ShareConsumerFactory;
import org.springframework.kafka.listener.AcknowledgingShareConsumerAwareMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.GenericMessageListener;
import org.springframework.kafka.listener.ShareConsumerRecordRecoverer;
import org.springframework.kafka.listener.ShareKafkaMessageListenerContainer;
import org.springframework.kafka.support.ShareAcknowledgment;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * A spring-kafka share listener container factory whose {@code @KafkaListener} methods run in transactions of a
 * transaction manager a Kafka session takes part in (a {@link SessionTransactionManager}, or the application's own
 * manager with the starter's enlistment): what the listener sends with the session-backed {@code KafkaTemplate} or
 * writes to the database commits in the record's transaction, and the record is ACCEPTed only after that commit.
 *
 * <pre>{@code
 * @Bean
 * SessionShareKafkaListenerContainerFactory<String, String> shareFactory(ShareConsumerFactory<String, String> consumers,
 *         PlatformTransactionManager transactionManager, TransactionalConsumerFactory transactionalConsumers) {
 *     return new SessionShareKafkaListenerContainerFactory<>(consumers, transactionManager, transactionalConsumers);
 * }
 *
 * @KafkaListener(topics = "tasks", groupId = "workers", containerFactory = "shareFactory")
 * void onTask(String task) { template.send("results", done(task)); }
 * }</pre>
 *
 * <h2>How it works, and why it is enough</h2>
 * spring-kafka's share container (4.1) has no transaction-manager hook, but in {@code EXPLICIT} acknowledgement mode
 * (the default) it calls the listener and then, on the same thread, ACCEPTs the record when the listener returned,
 * or acknowledges it with its {@link ShareConsumerRecordRecoverer}'s answer when the listener threw. This factory
 * makes the container's consumers {@link TransactionalShareConsumer}s over the application's ones (explicit mode), and
 * wraps each endpoint's listener so that it runs inside a transaction that the consumer is bound to: the listener's
 * work, and the record's ACCEPT, join that transaction; the ACCEPT is sent after the commit (not when the
 * poll's records are done; a record whose lock renewal is still under way is acknowledged once the consumer has it
 * back), and the container's own acknowledgement of a record whose transaction acknowledged it is ignored. A
 * transaction that rolled back throws, and the recoverer this factory sets by default RELEASEs the record
 * (spring-kafka's default REJECTs it, which would archive a record whose work never committed).
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>A record is ACCEPTed only after its transaction committed; a record whose transaction rolled back is RELEASEd
 * (or what a recoverer you set decides), never ACCEPTed.</li>
 * <li><b>An outage does not use up deliveries.</b> A transaction whose work failed on a transient failure (Kafka or
 * the database as a service, classified as {@link SessionAfterRollbackProcessor} does) runs again on the same
 * delivery after a back-off (0.2 s doubling to 2 s), with the locks of the poll's records renewed, for as long as the
 * container runs (or {@link #setTransientRetryTime}, if set). A transaction whose commit failed is never run again
 * on the same delivery (the commit may have happened): the record is released.</li>
 * <li><b>Locks are renewed</b> before and after each record's work once a third of the lock has passed, so later
 * records of a poll and retries keep theirs. A record whose lock was lost by then (its renewal did not come back: a
 * listener call longer than the lock, a share leader that failed over) is not committed: its transaction rolls back,
 * since another consumer may be processing it. A record the consumer no longer holds when its turn comes is not
 * processed (the group delivers it again).</li>
 * <li>With an {@link #setOutcomeLedger outcome ledger}, the window between commit and acknowledgement is closed: see
 * {@link ShareOutcomeLedger}.</li>
 * <li>A transient failure always RELEASEs the record, whatever recoverer is set.</li>
 * <li>Only {@code ShareAckMode.EXPLICIT} is accepted: in {@code IMPLICIT} mode the broker accepts every record at
 * the next poll and in {@code MANUAL} mode the listener's acknowledgement is applied whatever the transaction does,
 * so either would acknowledge records whose work rolled back. Creating a container in those modes fails.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>One transaction per record (the container calls the listener per record; batch listeners are refused by
 * spring-kafka). For a poll's records in one transaction, failure isolation and dead-lettering in the transaction,
 * use {@link SessionShareListenerContainer}.</li>
 * <li>Without a ledger, the acknowledgement is sent after the commit (with the next poll): a crash in between redelivers a record
 * whose work committed (at most one duplicate each). A listener can also look a redelivered record
 * ({@code deliveryCount() > 1}) up in its own database, as the task-worker sample does.</li>
 * <li>A lock cannot be renewed while the listener runs (the consumer is the container's thread's): a listener call
 * longer than {@code share.record.lock.duration.ms} loses the record's lock, so its work is rolled back and the
 * record delivered again; one that always takes that long never commits (raise the lock duration). A commit that
 * takes longer than a whole lock after the last renewal can still land after another consumer got the record.</li>
 * <li>A transient failure that never ends blocks the container's thread (logged at WARN on every attempt) and keeps
 * the rest of its poll's records from other consumers (their locks are renewed); a failure misread as transient does
 * the same. Bound it with {@link #setTransientRetryTime} if that matters more than the deliveries. An outage of Kafka
 * itself also stops the renewals: records whose lock expires during it are delivered again later, using up a
 * delivery. A container stopped during retries runs the poll's remaining records once each.</li>
 * <li>The listener must not acknowledge the record itself (the container does, in EXPLICIT mode): its transaction
 * is then rolled back and the record released.</li>
 * <li>A recoverer set on a container directly (a {@code ContainerCustomizer}) bypasses this factory's rule that a
 * transient failure is RELEASEd.</li>
 * <li>A {@code KafkaListenerErrorHandler} that swallows the listener's exception runs inside the transaction: what
 * the failed call wrote then commits and the record is ACCEPTed. Such handlers should rethrow.</li>
 * </ul>
 *
 * @param <K> key type
 * @param <V> value type
 */
public class SessionShareKafkaListenerContainerFactory<K, V> extends ShareKafkaListenerContainerFactory<K, V> {

    private static final Logger log = LoggerFactory.getLogger(SessionShareKafkaListenerContainerFactory.class);
    /** renew the held records' locks once this part of the lock may have passed */
    private static final double RENEW_AFTER = 1.0 / 3;
    private static final long MAX_BACK_OFF_MS = 2000;

    private final TransactionTemplate transactions;
    private final TransactionalConsumerFactory binder;
    private final TransactionalShareConsumers<K, V> consumerFactory;
    private @Nullable Duration transientRetryTime;

    /**
     * For a {@link SessionTransactionManager}: consumers are bound to the session each transaction has.
     *
     * @param shareConsumerFactory makes the share consumers (spring-kafka's {@code DefaultShareConsumerFactory})
     * @param transactionManager runs each record's transaction
     * @throws IllegalArgumentException if {@code transactionManager} is not a {@link SessionTransactionManager}: use
     *         the constructor that takes the {@link TransactionalConsumerFactory} that enlists sessions in it
     */
    public SessionShareKafkaListenerContainerFactory(ShareConsumerFactory<K, V> shareConsumerFactory,
            PlatformTransactionManager transactionManager) {
        this(shareConsumerFactory, transactionManager, binderFor(transactionManager));
    }

    /**
     * @param shareConsumerFactory makes the share consumers (spring-kafka's {@code DefaultShareConsumerFactory})
     * @param transactionManager runs each record's transaction: a {@link SessionTransactionManager}, or the
     *        application's own manager when the starter enlists sessions in it
     * @param transactionalConsumers binds the container's consumers to each transaction's session (the starter's
     *        bean enlists a session in the application's own manager); only its binding is used
     */
    public SessionShareKafkaListenerContainerFactory(ShareConsumerFactory<K, V> shareConsumerFactory,
            PlatformTransactionManager transactionManager, TransactionalConsumerFactory transactionalConsumers) {
        this(new TransactionalShareConsumers<>(Objects.requireNonNull(shareConsumerFactory, "shareConsumerFactory")),
                transactionManager, transactionalConsumers);
    }

    private SessionShareKafkaListenerContainerFactory(TransactionalShareConsumers<K, V> consumers,
            PlatformTransactionManager transactionManager, TransactionalConsumerFactory transactionalConsumers) {
        super(consumers);
        this.consumerFactory = consumers;
        this.transactions = new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
        this.binder = Objects.requireNonNull(transactionalConsumers, "transactionalConsumers");
        setShareConsumerRecordRecoverer(ShareConsumerRecordRecoverer.RELEASING);
    }

    private static TransactionalConsumerFactory binderFor(PlatformTransactionManager transactionManager) {
        if (transactionManager instanceof SessionTransactionManager sessions) {
            return new TransactionalConsumerFactory(sessions.getPool(), Map.of());
        }
        throw new IllegalArgumentException("A SessionShareKafkaListenerContainerFactory over "
                + Objects.requireNonNull(transactionManager, "transactionManager").getClass().getName()
                + " needs the TransactionalConsumerFactory that enlists Kafka sessions in it, to bind the records' "
                + "acknowledgements to each transaction: use new SessionShareKafkaListenerContainerFactory<>("
                + "consumers, transactionManager, transactionalConsumers) with the starter's "
                + "TransactionalConsumerFactory bean");
    }

    /**
     * @param retryTime at most how long a record's transaction that fails transiently is run again on the same
     *        delivery before the record is released; by default there is no limit (the locks are renewed meanwhile,
     *        and every release uses up one of the record's deliveries); zero to release at once
     */
    public void setTransientRetryTime(Duration retryTime) {
        Objects.requireNonNull(retryTime, "transientRetryTime");
        if (retryTime.isNegative()) {
            throw new IllegalArgumentException("transientRetryTime must not be negative, was " + retryTime);
        }
        this.transientRetryTime = retryTime;
    }

    /**
     * Makes the consumers this factory's containers start from now on use {@code ledger}, which closes the window
     * between a record's commit and its acknowledgement (see {@link ShareOutcomeLedger}); they are created with
     * {@code share.acquire.mode=record_limit}, which its lock check needs. Each commit then also writes an entry and
     * waits for the broker to confirm the record's lock, so a transaction costs more. The caller closes the ledger
     * after the containers.
     *
     * @param ledger the ledger
     */
    public void setOutcomeLedger(ShareOutcomeLedger ledger) {
        this.consumerFactory.ledger = Objects.requireNonNull(ledger, "ledger");
    }

    /**
     * Refused: a container made here gets its listener later, through {@code setupMessageListener}, which this factory
     * cannot wrap, so its records would be acknowledged outside any transaction. Use {@code @KafkaListener} endpoints
     * with this factory, or a {@link SessionShareListenerContainer} for a container built in code.
     *
     * @throws UnsupportedOperationException always
     */
    @Override
    public ShareKafkaMessageListenerContainer<K, V> createContainer(String... topics) {
        throw new UnsupportedOperationException("A SessionShareKafkaListenerContainerFactory makes containers for "
                + "@KafkaListener endpoints only: a container created with createContainer(topics) gets its listener "
                + "later, unwrapped, and would acknowledge records outside any transaction. Use a "
                + "SessionShareListenerContainer for a share container built in code.");
    }

    /**
     * Sets what the container does with a record whose transaction failed, as spring-kafka's factory does, except that
     * a transient failure (an outage, a commit that may have happened) always RELEASEs the record: rejecting it would
     * archive a record whose work did not commit, or whose commit must be looked up when it comes back.
     *
     * @param recoverer decides for the other failures (a record the listener cannot process)
     */
    @Override
    public final void setShareConsumerRecordRecoverer(ShareConsumerRecordRecoverer recoverer) {
        Objects.requireNonNull(recoverer, "recoverer");
        super.setShareConsumerRecordRecoverer((record, failure) -> SessionAfterRollbackProcessor.isTransient(failure)
                ? AcknowledgeType.RELEASE : recoverer.recover(record, failure));
    }

    @Override
    protected void initializeContainer(ShareKafkaMessageListenerContainer<K, V> instance,
            KafkaListenerEndpoint endpoint) {
        super.initializeContainer(instance, endpoint);
        ContainerProperties properties = instance.getContainerProperties();
        if (properties.getShareAckMode() != ContainerProperties.ShareAckMode.EXPLICIT) {
            throw new IllegalStateException("Share listener '" + endpoint.getId() + "' uses ShareAckMode."
                    + properties.getShareAckMode() + ", but a SessionShareKafkaListenerContainerFactory needs EXPLICIT "
                    + "(the default): in IMPLICIT mode the broker accepts records at the next poll and in MANUAL mode "
                    + "the listener's acknowledgement applies whatever the transaction does, so records whose work "
                    + "rolled back would be acknowledged. Remove the ack mode setting, or use a plain "
                    + "ShareKafkaListenerContainerFactory for this listener.");
        }
        Object listener = properties.getMessageListener();
        if (listener == null || listener instanceof TransactionalListener<?, ?>) {
            return;
        }
        instance.setupMessageListener(new TransactionalListener<K, V>(listener, this.transactions, this.binder,
                this.transientRetryTime, endpoint.getId(), instance::isRunning));
    }

    /**
     * The application's share consumer factory, whose consumers (always in explicit mode) are wrapped in
     * {@link TransactionalShareConsumer}s that keep the records an aborted transaction held, and in
     * {@link ContainerShareConsumer}s for the container.
     */
    private static final class TransactionalShareConsumers<K, V> implements ShareConsumerFactory<K, V> {

        private final ShareConsumerFactory<K, V> delegate;
        volatile @Nullable ShareOutcomeLedger ledger;

        TransactionalShareConsumers(ShareConsumerFactory<K, V> delegate) {
            this.delegate = delegate;
        }

        @Override
        public ShareConsumer<K, V> createShareConsumer(@Nullable String groupId, @Nullable String clientId) {
            return createShareConsumer(groupId, clientId, Map.of());
        }

        @Override
        public ShareConsumer<K, V> createShareConsumer(@Nullable String groupId, @Nullable String clientId,
                @Nullable Map<String, Object> overrides) {
            ShareOutcomeLedger l = this.ledger;
            Map<String, Object> mine = new HashMap<>(overrides == null ? Map.of() : overrides);
            mine.put(TransactionalShareConsumer.ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
            if (l != null) {
                mine.put(ConsumerConfig.SHARE_ACQUIRE_MODE_CONFIG, "record_limit");
            }
            Map<String, Object> configs = new HashMap<>(this.delegate.getConfigurationProperties());
            configs.putAll(mine);
            if (groupId != null) {
                configs.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
            }
            ShareConsumer<K, V> created = this.delegate.createShareConsumer(groupId, clientId, mine);
            TransactionalShareConsumer<K, V> consumer;
            try {
                consumer = new TransactionalShareConsumer<>(created, configs);
                consumer.setRetainRecordsOnAbort(true); // the poll's other records wait for their turn
                if (l != null) {
                    consumer.useOutcomeLedger(l);
                }
            }
            catch (RuntimeException ex) {
                created.close(Duration.ZERO);
                throw ex;
            }
            return new ContainerShareConsumer<>(consumer);
        }

        @Override
        public Map<String, Object> getConfigurationProperties() {
            return this.delegate.getConfigurationProperties();
        }

        @Override
        public @Nullable Deserializer<K> getKeyDeserializer() {
            return this.delegate.getKeyDeserializer();
        }

        @Override
        public @Nullable Deserializer<V> getValueDeserializer() {
            return this.delegate.getValueDeserializer();
        }

        @Override
        public boolean removeListener(ShareConsumerFactory.Listener<K, V> listener) {
            return this.delegate.removeListener(listener);
        }

        @Override
        public void addListener(int index, ShareConsumerFactory.Listener<K, V> listener) {
            this.delegate.addListener(index, listener);
        }

        @Override
        public void addListener(ShareConsumerFactory.Listener<K, V> listener) {
            this.delegate.addListener(listener);
        }

        @Override
        public List<ShareConsumerFactory.Listener<K, V>> getListeners() {
            return this.delegate.getListeners();
        }
    }

    /** Runs the endpoint's listener inside a transaction; see the factory. */
    private static final class TransactionalListener<K, V> implements AcknowledgingShareConsumerAwareMessageListener<K, V> {

        private final Object delegate;
        private final TransactionTemplate transactions;
        private final TransactionalConsumerFactory binder;
        private final @Nullable Duration transientRetryTime;
        private final @Nullable String id;
        private final BooleanSupplier running;

        TransactionalListener(Object delegate, TransactionTemplate transactions, TransactionalConsumerFactory binder,
                @Nullable Duration transientRetryTime, @Nullable String id, BooleanSupplier running) {
            this.delegate = delegate;
            this.transactions = transactions;
            this.binder = binder;
            this.transientRetryTime = transientRetryTime;
            this.id = id;
            this.running = running;
        }

        @Override
        @SuppressWarnings("unchecked")
        public void onShareRecord(ConsumerRecord<K, V> record, @Nullable ShareAcknowledgment acknowledgment,
                ShareConsumer<?, ?> consumer) {
            if (!(consumer instanceof ContainerShareConsumer<?, ?> container)) {
                throw new IllegalStateException("Share listener '" + this.id + "' got a record from " + consumer
                        + ", a consumer not made by its SessionShareKafkaListenerContainerFactory: its acknowledgement "
                        + "could not join the record's transaction. Let the factory create the container's consumers.");
            }
            ContainerShareConsumer<K, V> shared = (ContainerShareConsumer<K, V>) container;
            Duration limit = this.transientRetryTime;
            long deadline = limit == null ? Long.MAX_VALUE : System.nanoTime() + limit.toNanos();
            long backOff = 200;
            while (true) {
                if (!shared.holds(record)) {
                    log.info("Share listener '{}': {}-{}@{} is no longer held by its consumer (its lock was lost, or "
                            + "it was released after a commit with an unknown outcome); not processed here, the group "
                            + "delivers it again", this.id, record.topic(), record.partition(), record.offset());
                    return; // the container's ACCEPT of a record not held is ignored
                }
                boolean[] workDone = { false };
                try {
                    this.transactions.executeWithoutResult(status -> {
                        shared.renewIfDue(RENEW_AFTER);
                        this.binder.bindToCurrentTransaction(shared.transactional());
                        if (!shared.holds(record)) {
                            // lost while renewing or binding: not processed here; the container's ACCEPT is ignored
                            return;
                        }
                        if (this.delegate instanceof AcknowledgingShareConsumerAwareMessageListener<?, ?> aware) {
                            ((AcknowledgingShareConsumerAwareMessageListener<K, V>) aware).onShareRecord(record,
                                    acknowledgment, shared);
                        }
                        else {
                            ((GenericMessageListener<ConsumerRecord<K, V>>) this.delegate).onMessage(record);
                        }
                        if (!shared.holds(record)) {
                            // its lock was lost during the call (or the listener acknowledged it, which EXPLICIT mode
                            // leaves to the container): another consumer may be processing it, never commit
                            throw new IllegalStateException("Share listener '" + this.id + "': " + record.topic()
                                    + "-" + record.partition() + "@" + record.offset() + " is no longer held by its "
                                    + "consumer after the listener returned (its lock was lost, or the listener "
                                    + "acknowledged it, which the container does in EXPLICIT mode): rolled back");
                        }
                        shared.transactional().acknowledge(record, AcknowledgeType.ACCEPT);
                        // a long call: renew before committing; a lock found lost makes the commit refuse
                        shared.renewIfDue(RENEW_AFTER);
                        workDone[0] = true; // a failure from here on is the commit's
                    });
                    return;
                }
                catch (RuntimeException ex) {
                    // a commit that failed may have happened (the database's COMMIT, a timed-out Kafka commit):
                    // never run the work again on this delivery; the record is released and looked up when it
                    // comes back
                    if (workDone[0] || !SessionAfterRollbackProcessor.isTransient(ex) || !this.running.getAsBoolean()
                            || deadline - System.nanoTime() <= TimeUnit.MILLISECONDS.toNanos(backOff)) {
                        throw ex;
                    }
                    log.warn("Share listener '{}': the transaction of {}-{}@{} rolled back on a transient failure "
                            + "({}); running it again in {} ms", this.id, record.topic(), record.partition(),
                            record.offset(), ex.toString(), backOff);
                    try {
                        // back-off between attempts, on the container's own thread, keeping the locks
                        shared.pauseRenewing(backOff, RENEW_AFTER);
                    }
                    catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                        throw ex;
                    }
                    catch (RuntimeException renewal) {
                        ex.addSuppressed(renewal);
                        throw ex;
                    }
                    backOff = Math.min(backOff * 2, MAX_BACK_OFF_MS);
                }
            }
        }
    }
}
