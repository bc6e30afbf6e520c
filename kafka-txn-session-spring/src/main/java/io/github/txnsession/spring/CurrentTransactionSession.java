package io.github.txnsession.spring;

import java.util.Collection;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.ShareAcknowledgement;
import io.github.txnsession.kafka.TransactionSession;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The session of the current {@link SessionTransactionManager} transaction, as one shared bean: inject it once and
 * call it from any {@code @Transactional} method; each call goes to the session bound to the calling thread, like
 * Spring's shared {@code EntityManager} proxy.
 *
 * <p>To inject the session as a {@link TransactionSession} instead, use {@link TransactionSessionProxy} (Boot's
 * auto-configuration registers one as the {@code TransactionSession} bean): it offers every method of the session
 * and refuses the ones the transaction manager drives. This accessor stays for code written against it, and for what
 * the proxy cannot give: {@link #get()} returns the session itself, the object to bind producers and consumers to
 * (they refuse the proxy), and {@link #find()} and {@link #isActive()} ask without failing. It offers the calls that
 * make sense inside a managed transaction (identity, {@link #prepareTransaction()}, {@link #heartbeat()},
 * {@link #sendOffsetsToTransaction}, {@link #addShareAcksToTransaction}); it does not offer begin, commit, abort or
 * close: the transaction manager drives those.
 *
 * <p>Outside a session transaction every call but {@link #find()} and {@link #isActive()} throws
 * {@link IllegalStateException} saying so.
 */
public final class CurrentTransactionSession {

    private final TransactionSessionPool pool;

    /** @param pool the pool of the transaction manager whose transactions are meant */
    public CurrentTransactionSession(TransactionSessionPool pool) {
        this.pool = Objects.requireNonNull(pool, "pool");
    }

    /**
     * @return the session of the calling thread's transaction: the session itself (never a proxy), so it can be bound
     *         to a {@link io.github.txnsession.kafka.SessionProducer} or a transactional consumer
     * @throws IllegalStateException outside a session transaction
     */
    public TransactionSession get() {
        SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
        if (holder == null) {
            throw new IllegalStateException(noSessionMessage(this.pool));
        }
        // consumers may be bound to it, and unbound when the transaction completes: it must be complete by then
        holder.markConsumersBound();
        return holder.session();
    }

    /** What a call outside a session transaction is told; shared with {@link TransactionSessionProxy}. */
    static String noSessionMessage(TransactionSessionPool pool) {
        String message = "No transaction session is bound to thread '" + Thread.currentThread().getName() + "': call "
                + "this from a method that runs in a transaction of the SessionTransactionManager over pool " + pool
                + " (@Transactional with propagation REQUIRED or REQUIRES_NEW, or a TransactionTemplate); with "
                + "SUPPORTS or NOT_SUPPORTED there may be no session";
        if (TransactionSynchronizationManager.isActualTransactionActive()) {
            message += ". A transaction of another transaction manager is active on this thread: when sessions are "
                    + "enlisted in the application's own (JDBC, JPA) transactions, a session joins at the "
                    + "transaction's first Kafka send, so there is none before it";
        }
        return message;
    }

    /** @return the session of the calling thread's transaction, if there is one */
    public Optional<TransactionSession> find() {
        SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
        return holder == null ? Optional.empty() : Optional.of(holder.session());
    }

    /** @return whether the calling thread runs in a session transaction */
    public boolean isActive() {
        return SessionResourceHolder.current(this.pool) != null;
    }

    /** @return the transactional id of the current transaction's session */
    public String transactionalId() {
        return get().transactionalId();
    }

    /** @return the producer id of the current transaction (read from the coordinator) */
    public long producerId() {
        return get().producerId();
    }

    /** @return the producer epoch of the current transaction (read from the coordinator) */
    public short producerEpoch() {
        return get().producerEpoch();
    }

    /** @return the state of the current transaction's session */
    public SessionState state() {
        return get().state();
    }

    /**
     * Prepares the current transaction for an external decision (see {@link TransactionSession#prepareTransaction()});
     * the transaction manager still commits or aborts it when the Spring transaction ends.
     *
     * @return the transaction's identity ({@code producerId:epoch:startTimeMs}, or {@code producerId:epoch:empty}
     *         for a transaction that wrote nothing)
     */
    public PreparedTransaction prepareTransaction() {
        return get().prepareTransaction();
    }

    /** Checks that the current transaction is still open at the coordinator; see {@link TransactionSession#heartbeat()}. */
    public void heartbeat() {
        get().heartbeat();
    }

    /**
     * Adds offsets managed by hand to the current transaction; see
     * {@link TransactionSession#sendOffsetsToTransaction}.
     *
     * @param offsets per partition, the offset of the next record to consume (the last processed one + 1); an empty
     *        map adds nothing
     * @param groupMetadata the metadata of the consumer group that owns the offsets, from
     *        {@code Consumer.groupMetadata()}
     * @throws IllegalStateException outside a session transaction
     */
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        get().sendOffsetsToTransaction(offsets, groupMetadata);
    }

    /**
     * Adds share-group acknowledgements to the current transaction (see
     * {@link TransactionSession#addShareAcksToTransaction}): they are applied after it commits and dropped (the
     * records released) if it aborts. A {@link io.github.txnsession.kafka.TransactionalShareConsumer} bound to the
     * session does this by itself; this is for acknowledgements managed by hand.
     *
     * @param groupId the share group of the records
     * @param acks what to acknowledge: records that a share consumer of {@code groupId} bound to the session delivered
     *        and has not acknowledged yet
     * @throws IllegalStateException outside a session transaction, or if no bound share consumer of {@code groupId}
     *         holds a record
     */
    public void addShareAcksToTransaction(String groupId, Collection<ShareAcknowledgement> acks) {
        get().addShareAcksToTransaction(groupId, acks);
    }

    @Override
    public String toString() {
        return "CurrentTransactionSession[" + this.pool + "]";
    }
}
