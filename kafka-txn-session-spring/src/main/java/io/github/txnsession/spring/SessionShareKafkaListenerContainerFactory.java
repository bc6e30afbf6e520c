package io.github.txnsession.spring;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.consumer.AcknowledgeType;
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
 *         PlatformTransactionManager transactionManager) {
 *     return new SessionShareKafkaListenerContainerFactory<>(consumers, transactionManager);
 * }
 *
 * @KafkaListener(topics = "tasks", groupId = "workers", containerFactory = "shareFactory")
 * void onTask(String task) { template.send("results", done(task)); }
 * }</pre>
 *
 * <h2>How it works, and why it is enough</h2>
 * spring-kafka's share container (4.1) has no transaction-manager hook, but in {@code EXPLICIT} acknowledgement mode
 * (the default) it calls the listener and then, on the same thread, ACCEPTs the record when the listener returned,
 * or acknowledges it with its {@link ShareConsumerRecordRecoverer}'s answer when the listener threw; the
 * acknowledgements go to the broker when the poll's records are done. This factory wraps each endpoint's listener so
 * that the listener runs inside a transaction: a listener that returns has committed, so the container's ACCEPT
 * follows the commit; one whose transaction rolled back throws, and the recoverer this factory sets by default
 * RELEASEs the record for redelivery (spring-kafka's default REJECTs it, which would archive a record whose work
 * never committed).
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>A record is ACCEPTed only after its transaction committed; a record whose transaction rolled back is RELEASEd
 * (or what a recoverer you set decides), never ACCEPTed.</li>
 * <li>A transaction whose work failed on a transient failure (Kafka or the database as a service, classified as
 * {@link SessionAfterRollbackProcessor} does) is run again on the same delivery after a back-off, as long as two
 * thirds of the poll's acquisition lock have not passed (counted from the earliest time the records may have been
 * acquired: the consumers this factory makes time their polls) and at most {@link #setTransientRetryTime}
 * (1 min). Later records of a poll whose lock time was used up fail at once and are released, rather than be worked
 * on when another consumer may have them. A transaction whose commit failed is never run again on the same delivery
 * (the commit may have happened): the record is released.</li>
 * <li>A transient failure always RELEASEs the record, whatever recoverer is set.</li>
 * <li>Only {@code ShareAckMode.EXPLICIT} is accepted: in {@code IMPLICIT} mode the broker accepts every record at
 * the next poll and in {@code MANUAL} mode the listener's acknowledgement is applied whatever the transaction does,
 * so either would acknowledge records whose work rolled back. Creating a container in those modes fails.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>One transaction per record (the container calls the listener per record; batch listeners are refused by
 * spring-kafka). For a poll's records in one transaction, failure isolation, dead-lettering in the transaction and
 * lock renewal, use {@link SessionShareListenerContainer}.</li>
 * <li>The acknowledgement is sent after the commit, when the container finishes the poll's records: a crash in
 * between redelivers records whose work committed (at most one duplicate each). This path has no outcome ledger;
 * a listener can look a redelivered record ({@code deliveryCount() > 1}) up in its own database, as the task-worker
 * sample does.</li>
 * <li>The lock of a record is not renewed while its transaction runs: work longer than
 * {@code share.record.lock.duration.ms} lets another consumer take the record.</li>
 * <li><b>Long outages lose records:</b> each delivery of a record can wait out about two thirds of its lock (20 s of
 * the default 30 s); a record released on each of {@code group.share.delivery.count.limit} (5) deliveries is archived
 * by the broker, its work never done, so an outage longer than about that many lock periods loses records.
 * spring-kafka's container offers no way to renew locks or hold records back; {@link SessionShareListenerContainer}
 * retries outages without limit, renewing the locks. A commit that takes longer than the rest of the lock can
 * still land after another consumer got the record (a duplicate).</li>
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
    /** the part of a poll's acquisition lock transient retries may use */
    private static final double LOCK_SHARE = 2.0 / 3;

    private final TransactionTemplate transactions;
    private Duration transientRetryTime = Duration.ofMinutes(1);

    /**
     * @param shareConsumerFactory makes the share consumers (spring-kafka's {@code DefaultShareConsumerFactory})
     * @param transactionManager runs each record's transaction: a {@link SessionTransactionManager}, or the
     *        application's own manager when the starter enlists sessions in it
     */
    public SessionShareKafkaListenerContainerFactory(ShareConsumerFactory<K, V> shareConsumerFactory,
            PlatformTransactionManager transactionManager) {
        super(new PollTimingConsumerFactory<>(Objects.requireNonNull(shareConsumerFactory, "shareConsumerFactory")));
        this.transactions = new TransactionTemplate(Objects.requireNonNull(transactionManager, "transactionManager"));
        setShareConsumerRecordRecoverer(ShareConsumerRecordRecoverer.RELEASING);
    }

    /**
     * @param retryTime at most how long a record's transaction that fails transiently is run again on the same
     *        delivery before the record is released (default 1 min). The records' acquisition lock bounds it too:
     *        retries stop once two thirds of the lock of the poll's records have passed, counted from the earliest
     *        time they may have been acquired; zero to release at once
     */
    public void setTransientRetryTime(Duration retryTime) {
        Objects.requireNonNull(retryTime, "transientRetryTime");
        if (retryTime.isNegative()) {
            throw new IllegalArgumentException("transientRetryTime must not be negative, was " + retryTime);
        }
        this.transientRetryTime = retryTime;
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
        instance.setupMessageListener(new TransactionalListener<K, V>(listener, this.transactions,
                this.transientRetryTime, endpoint.getId()));
    }

    /** The application's share consumer factory, whose consumers are wrapped to time their polls. */
    private static final class PollTimingConsumerFactory<K, V> implements ShareConsumerFactory<K, V> {

        private final ShareConsumerFactory<K, V> delegate;

        PollTimingConsumerFactory(ShareConsumerFactory<K, V> delegate) {
            this.delegate = delegate;
        }

        @Override
        public ShareConsumer<K, V> createShareConsumer(@Nullable String groupId, @Nullable String clientId) {
            return new PollTimedShareConsumer<>(this.delegate.createShareConsumer(groupId, clientId));
        }

        @Override
        public ShareConsumer<K, V> createShareConsumer(@Nullable String groupId, @Nullable String clientId,
                @Nullable Map<String, Object> overrides) {
            return new PollTimedShareConsumer<>(this.delegate.createShareConsumer(groupId, clientId, overrides));
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
        private final Duration transientRetryTime;
        private final @Nullable String id;

        TransactionalListener(Object delegate, TransactionTemplate transactions, Duration transientRetryTime,
                @Nullable String id) {
            this.delegate = delegate;
            this.transactions = transactions;
            this.transientRetryTime = transientRetryTime;
            this.id = id;
        }

        @Override
        @SuppressWarnings("unchecked")
        public void onShareRecord(ConsumerRecord<K, V> record, @Nullable ShareAcknowledgment acknowledgment,
                ShareConsumer<?, ?> consumer) {
            long deadline = System.nanoTime() + this.transientRetryTime.toNanos();
            if (consumer instanceof PollTimedShareConsumer<?, ?> timed) {
                // never work on past two thirds of the poll's lock: another consumer could get the record after it
                deadline = Math.min(deadline, timed.lockSafeUntil(LOCK_SHARE));
            }
            long backOff = 200;
            while (true) {
                boolean[] workDone = { false };
                try {
                    this.transactions.executeWithoutResult(status -> {
                        if (this.delegate instanceof AcknowledgingShareConsumerAwareMessageListener<?, ?> aware) {
                            ((AcknowledgingShareConsumerAwareMessageListener<K, V>) aware).onShareRecord(record,
                                    acknowledgment, consumer);
                        }
                        else {
                            ((GenericMessageListener<ConsumerRecord<K, V>>) this.delegate).onMessage(record);
                        }
                        workDone[0] = true; // a failure from here on is the commit's
                    });
                    return;
                }
                catch (RuntimeException ex) {
                    // a commit that failed may have happened (the database's COMMIT, a timed-out Kafka commit):
                    // never run the work again on this delivery; the record is released and looked up when it
                    // comes back
                    if (workDone[0] || !SessionAfterRollbackProcessor.isTransient(ex)
                            || deadline - System.nanoTime() <= TimeUnit.MILLISECONDS.toNanos(backOff)) {
                        throw ex;
                    }
                    log.warn("Share listener '{}': the transaction of {}-{}@{} rolled back on a transient failure "
                            + "({}); running it again in {} ms", this.id, record.topic(), record.partition(),
                            record.offset(), ex.toString(), backOff);
                    try {
                        Thread.sleep(backOff); // back-off between attempts, on the container's own thread
                    }
                    catch (InterruptedException interrupted) {
                        Thread.currentThread().interrupt();
                        throw ex;
                    }
                    backOff = Math.min(backOff * 2, 2000);
                }
            }
        }
    }
}
