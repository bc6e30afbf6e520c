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

/**
 * The session of the current {@link SessionTransactionManager} transaction, as one shared bean: inject it once and
 * call it from any {@code @Transactional} method; each call goes to the session bound to the calling thread, like
 * Spring's shared {@code EntityManager} proxy.
 *
 * <p>Why an accessor and not a {@code TransactionSession} proxy: {@link TransactionSession} is a final class (its
 * thread-safety and state machine must not be overridden), so it cannot be proxied by subclassing, and it implements
 * no interface to proxy instead. This type offers the calls that make sense inside a managed transaction (identity,
 * {@link #prepareTransaction()}, {@link #heartbeat()}, {@link #sendOffsetsToTransaction},
 * {@link #addShareAcksToTransaction}), and {@link #get()} for
 * everything else the session offers. It does not offer begin, commit, abort or close: the transaction manager
 * drives those.
 *
 * <p>Outside a session transaction every call throws {@link IllegalStateException} saying so; {@link #find()} and
 * {@link #isActive()} ask without failing.
 */
public final class CurrentTransactionSession {

    private final TransactionSessionPool pool;

    /** @param pool the pool of the transaction manager whose transactions are meant */
    public CurrentTransactionSession(TransactionSessionPool pool) {
        this.pool = Objects.requireNonNull(pool, "pool");
    }

    /**
     * @return the session of the calling thread's transaction
     * @throws IllegalStateException outside a session transaction
     */
    public TransactionSession get() {
        SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
        if (holder == null) {
            throw new IllegalStateException("No transaction session is bound to thread '"
                    + Thread.currentThread().getName() + "': call this from a method that runs in a transaction of "
                    + "the SessionTransactionManager over pool " + this.pool + " (@Transactional with propagation "
                    + "REQUIRED or REQUIRES_NEW, or a TransactionTemplate); with SUPPORTS or NOT_SUPPORTED there may "
                    + "be no session");
        }
        return holder.session();
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
     * @return the transaction's {@code producerId:epoch}
     */
    public PreparedTransaction prepareTransaction() {
        return get().prepareTransaction();
    }

    /** Checks that the current transaction is still open at the coordinator; see {@link TransactionSession#heartbeat()}. */
    public void heartbeat() {
        get().heartbeat();
    }

    /** Adds offsets managed by hand to the current transaction. */
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        get().sendOffsetsToTransaction(offsets, groupMetadata);
    }

    /**
     * Adds share-group acknowledgements to the current transaction (see
     * {@link TransactionSession#addShareAcksToTransaction}): they are applied after it commits and dropped (the
     * records released) if it aborts. A {@link io.github.txnsession.kafka.TransactionalShareConsumer} bound to the
     * session does this by itself; this is for acknowledgements managed by hand.
     */
    public void addShareAcksToTransaction(String groupId, Collection<ShareAcknowledgement> acks) {
        get().addShareAcksToTransaction(groupId, acks);
    }

    @Override
    public String toString() {
        return "CurrentTransactionSession[" + this.pool + "]";
    }
}
