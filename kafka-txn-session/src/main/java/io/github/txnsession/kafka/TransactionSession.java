package io.github.txnsession.kafka;

import java.time.Duration;
import java.util.Collection;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.PreparedTxnState;
import org.apache.kafka.common.TopicPartition;

/**
 * A Kafka transaction as a first-class, thread-safe object: one {@code transactional.id}, its producer id and
 * epoch, and the lifecycle begin / commit / abort / prepare / complete. Producers ({@link SessionProducer}) and
 * consumers bind to it; all their records and offsets go into the session's one transaction.
 *
 * <h2>Two kinds of session</h2>
 * <ul>
 * <li><b>Live</b>: {@link #open(Map) TransactionSession.open(configs)} then {@link #initialize()}. It owns one
 * transactional {@code KafkaProducer} as its data path; bound producers serialize with their own serializers and send
 * through it, so Kafka's batching, idempotence, retries and compression apply unchanged.</li>
 * <li><b>Resumed</b>: {@link #resume(String, long, short, Map)} takes over a transaction that another process left
 * open (typically after {@link #prepareTransaction()} and a crash) and finishes it: commit, abort or
 * {@link #completeTransaction(PreparedTxnState)}. It creates no producer, no thread and no buffer pool.</li>
 * </ul>
 *
 * <h2>Guarantees</h2>
 * <ul>
 * <li>Every record sent through a bound producer between {@link #beginTransaction()} and the end of the transaction
 * becomes visible to {@code read_committed} readers if and only if the transaction commits.</li>
 * <li>{@link #prepareTransaction()} names exactly one transaction ({@link PreparedTransaction}: producer id, epoch and
 * the coordinator's start time; or "empty" when nothing was written). Completing an identity never commits another
 * transaction; the outcome of every situation the coordinator can be in is one row of {@code TransactionStanding}.</li>
 * <li>Whenever a transaction ends without a commit (abort, fencing, a coordinator timeout, a failed abort, close),
 * every participant (bound consumers, bound share consumers) is told so: consumers rewind, share consumers release.
 * </li>
 * <li>Thread safety: any number of threads may send through bound producers during a transaction; lifecycle calls
 * are serialized and wait for sends in progress, and sends wait while a commit or abort runs. A lifecycle call from
 * inside a send (a callback kafka-clients runs on the sending thread, or on its I/O thread) throws
 * {@link IllegalStateException} at once instead of deadlocking.</li>
 * <li>One explicit state machine ({@link SessionState}, table in {@code SessionStateMachine}); an illegal call
 * throws {@link IllegalStateException} naming the state and the calls allowed in it, except in ABORTABLE_ERROR: there a
 * send, offsets, prepare, commit, complete or heartbeat throws {@link SessionAbortableException} whose cause is the
 * failure that made the transaction abort-only, so a caller that caught and ignored that failure still learns it at
 * commit. No call leaves the session in COMMITTING or ABORTING.</li>
 * <li>Errors are classified ({@code KafkaErrors}): {@link SessionFencedException} (another session took over; state
 * FATAL_ERROR), {@link SessionAbortableException} (abort, then go on), {@link SessionTimeoutException} (the call may
 * be retried; a commit that timed out leaves the session PREPARED), {@link TransactionLostException} (certainly
 * aborted), {@link TransactionSupersededException} (outcome unknown).</li>
 * <li>{@link #close()} aborts an open transaction, waits for a lifecycle call running on another thread, and closes
 * the producer and the coordinator connection exactly once; {@link #abandon()} closes without ending a prepared
 * transaction whose outcome is in doubt.</li>
 * </ul>
 *
 * <h2>Not guaranteed</h2>
 * <ul>
 * <li>A heartbeat cannot extend a transaction's timeout: brokers have no TxnHeartbeat API yet (KIP-1309 is a
 * draft). {@link #heartbeat()} only checks that the transaction is still open and fails fast if it is not; it reports
 * only what is certain, so a session that does not know its producer's epoch (after an epoch overflow, until the next
 * transaction begins) reports nothing.</li>
 * <li>Kafka-native two-phase commit (KIP-939) is not available on released brokers, so a prepared transaction is
 * still aborted by the coordinator after {@code transaction.timeout.ms}; {@link #completeTransaction} reports that
 * as {@link TransactionLostException}, never as a commit.</li>
 * <li>With transaction version 1, a transaction the coordinator timed out also fences the producer (Kafka's
 * behaviour before KIP-890): its abort reports {@link SessionFencedException}.</li>
 * <li>Kafka's {@link PreparedTxnState} ({@code producerId:epoch}), accepted for compatibility, cannot tell a
 * transaction from a later one with the same epoch (version 1, or after an empty transaction).</li>
 * <li>A live session tells its own transaction from another producer's by the producer id and epoch it read from the
 * coordinator when it initialized (and again after a failed transaction); if that read failed, a prepare of a
 * transaction that wrote refuses ({@link SessionAbortableException}: abort and retry) rather than guess.</li>
 * </ul>
 *
 * <h2>Implementations</h2>
 * The sessions that carry transactions are the ones {@link #open(Map)} and {@link #resume} create; the guarantees
 * above are theirs. {@link SessionProducer}, {@link TransactionalConsumer} and {@link TransactionalShareConsumer}
 * join the transaction of such a session directly, so they accept only those sessions and refuse any other
 * implementation of this interface with {@link IllegalArgumentException}. Other implementations delegate to such a
 * session: the Spring integration's transaction-scoped proxy, for example, sends each call to the session of the
 * calling thread's transaction.
 */
public interface TransactionSession extends AutoCloseable {

    /**
     * Creates a live session. Nothing connects until {@link #initialize()}.
     *
     * @param configs Kafka producer configs ({@code bootstrap.servers} and {@code transactional.id} required) plus
     *        the session keys of {@link TransactionSessionConfig}
     * @return a live session in state {@link SessionState#UNINITIALIZED}
     * @throws InvalidSessionConfigException naming the key, when a config is missing or invalid
     */
    static TransactionSession open(Map<String, ?> configs) {
        return new KafkaTransactionSession(configs);
    }

    /**
     * Resumes a transaction that another session (usually in another process) prepared, in order to finish it.
     * Creates no producer and no thread: it talks to the transaction coordinator directly.
     *
     * <p>The identity is checked with the coordinator first: an unknown transactional id, a producer id the
     * coordinator does not hold (unless the epoch overflowed into a new producer id), or an epoch it never reached
     * throw {@link TransactionIdentityMismatchException} and touch nothing. A transaction that has already ended is
     * accepted: completing it reports how it ended. An {@linkplain PreparedTransaction#isEmpty() empty} transaction
     * needs no coordinator: completing it reports {@link CompletionOutcome#EMPTY}.
     *
     * @param transactionalId the transactional id of the prepared transaction
     * @param prepared what {@link #prepareTransaction()} returned
     * @param configs client configs: {@code bootstrap.servers} and security settings; session keys allowed
     * @return a session in state {@link SessionState#PREPARED}
     */
    static TransactionSession resume(String transactionalId, PreparedTransaction prepared, Map<String, ?> configs) {
        return KafkaTransactionSession.resume(transactionalId, prepared, configs);
    }

    /**
     * Resumes from Kafka's {@code producerId:epoch} form, without the start time: see {@link PreparedTransaction}
     * for what that cannot tell apart. Prefer {@link #resume(String, PreparedTransaction, Map)}.
     *
     * @param transactionalId the transactional id of the prepared transaction
     * @param state Kafka's {@code producerId:epoch} of the prepared transaction; it must name a transaction
     * @param configs client configs, as for {@link #resume(String, PreparedTransaction, Map)}
     * @return a session in state {@link SessionState#PREPARED}
     * @throws IllegalArgumentException if {@code state} names no transaction (Kafka's empty state)
     */
    static TransactionSession resume(String transactionalId, PreparedTxnState state, Map<String, ?> configs) {
        return KafkaTransactionSession.resume(transactionalId, state, configs);
    }

    /**
     * Resumes from a producer id and epoch, without the start time: see {@link PreparedTransaction} for what that
     * cannot tell apart. Prefer {@link #resume(String, PreparedTransaction, Map)}.
     *
     * @param transactionalId the transactional id of the prepared transaction
     * @param producerId the producer id of the prepared transaction; at least 0
     * @param producerEpoch the producer epoch of the prepared transaction; at least 0
     * @param configs client configs, as for {@link #resume(String, PreparedTransaction, Map)}
     * @return a session in state {@link SessionState#PREPARED}
     * @throws IllegalArgumentException for a negative producer id or epoch
     */
    static TransactionSession resume(String transactionalId, long producerId, short producerEpoch,
            Map<String, ?> configs) {
        return KafkaTransactionSession.resume(transactionalId, producerId, producerEpoch, configs);
    }

    /**
     * Resumes whatever transaction is open for {@code transactionalId} right now, without knowing its identity:
     * for recovery tools that must abort leftovers of a crashed process. Creates no producer.
     *
     * @param transactionalId the transactional id whose open transaction is to be resumed
     * @param configs client configs: {@code bootstrap.servers} and security settings; session keys allowed
     * @return a resumed session in state {@link SessionState#PREPARED} for the open transaction (with its start
     *         time), or empty when the id is unknown or has no open transaction
     */
    static Optional<TransactionSession> resumeOpen(String transactionalId, Map<String, ?> configs) {
        return KafkaTransactionSession.resumeOpen(transactionalId, configs);
    }

    /**
     * Fences every producer of {@code transactionalId} and ends what it left open, as a new producer's
     * initialization does: an open transaction is aborted, one whose commit the coordinator had decided is finished.
     * For recovery tools, after {@link #resumeOpen} found a leftover: with transaction version 1 an abort alone keeps
     * the producer's epoch, so a predecessor that is only paused could go on and start a new transaction. Creates and
     * closes one producer.
     *
     * @param transactionalId the transactional id to fence; never one a live session of this process uses (it would
     *        be fenced too)
     * @param configs client configs: {@code bootstrap.servers} and security settings; session keys allowed; a
     *        {@code transactional.id} is replaced
     * @throws TransactionSessionException if the id cannot be initialized (e.g. the coordinator is unreachable)
     */
    static void fence(String transactionalId, Map<String, ?> configs) {
        java.util.Map<String, Object> withId = new java.util.HashMap<>(configs);
        withId.put(org.apache.kafka.clients.producer.ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        try (TransactionSession fresh = open(withId)) {
            fresh.initialize();
        }
    }

    /**
     * Registers the session's transactional id with the coordinator, fencing any older producer with the same id
     * and aborting whatever transaction it left open. Must be called once before {@link #beginTransaction()}.
     */
    void initialize();

    /** Opens a transaction. Bound producers may send and bound consumers' progress joins it. */
    void beginTransaction();

    /**
     * Registers partitions with the open transaction before anything is sent to them, so that a transaction fails
     * at once when a partition does not exist or cannot be reached, instead of at its first send.
     *
     * <p>What it means depends on the cluster's transaction version. With version 2 (the default since Kafka 4.0)
     * clients do not register partitions at all: the partition leader adds its partition to the transaction when
     * the first record arrives. This call then checks that every partition exists (waiting for metadata up to
     * {@code max.block.ms}) and registers nothing; the transaction stays empty until something is sent. With
     * version 1 it does the same checks; kafka-clients registers the partitions with its first send to each.
     * Write authorization is checked by the first send in both cases.
     *
     * @param partitions the partitions the transaction will write to
     * @throws IllegalArgumentException naming the partition, when a topic has no such partition
     * @throws IllegalStateException when no transaction is open
     */
    void addPartitionsToTransaction(Collection<TopicPartition> partitions);

    /**
     * Adds consumed offsets to the open transaction: they are committed for the consumer group if and only if the
     * transaction commits. Bound consumers add theirs automatically; this is for offsets managed by hand.
     *
     * @param offsets per partition, the offset of the next record to consume (the last processed one + 1), as for
     *        {@code KafkaProducer.sendOffsetsToTransaction}; an empty map adds nothing
     * @param groupMetadata the metadata of the consumer group that owns the offsets, from
     *        {@code Consumer.groupMetadata()}
     */
    void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata);

    /**
     * Makes the open transaction ready for an external decision: flushes every bound producer, adds the bound
     * consumers' offsets, checks that every send succeeded, and returns the transaction's identity. Store the
     * returned identity with the decision; then call {@link #completeTransaction(PreparedTransaction)} here, or
     * resume and complete from another process.
     *
     * <p>A transaction that wrote nothing prepares to an {@linkplain PreparedTransaction#isEmpty() empty} identity
     * without a coordinator call: completing it is a no-op that never touches a later transaction.
     *
     * @return the open transaction's identity: producer id, epoch and the coordinator's start time
     * @throws SessionAbortableException if a send failed; the transaction must be aborted
     * @throws TransactionLostException if the coordinator already aborted it (state ABORTABLE_ERROR: abort it)
     * @throws SessionFencedException if another producer took the transactional id over
     * @throws SessionTimeoutException if the coordinator did not answer; prepare may be called again
     */
    PreparedTransaction prepareTransaction();

    /**
     * Prepares the open transaction as {@link #prepareTransaction()} does, with one round trip less on the way when it
     * can: with transaction version 2 the coordinator is asked about the transaction while the flush runs rather than
     * after it. When the transaction's records were still in the producer at the prepare (the usual case right after
     * a send), the returned identity has no start time (the coordinator had not registered the transaction yet when
     * asked; its producer id and epoch name it, as with {@link #expectedPreparedTransaction()}), and it is complete
     * only once the flush succeeded: the transaction is confirmed open under this producer's epoch when the
     * coordinator showed it open, or showed that epoch with nothing registered yet while records sent before the
     * question were still on their way (they were registered after it, under that epoch, or their sends failed).
     *
     * <p>Not guaranteed: what the start time adds. Completing, resuming and recovering work by producer id and epoch,
     * but a transaction the coordinator later aborts on its timeout can then no longer be told from a later transaction
     * of the id, so a check of it reports its outcome unknown rather than aborted. The confirmation holds for a moment
     * during the flush instead of right after it (a flush longer than 20 ms is followed by a look after it, so that the
     * gap stays short). With transaction version 1, or where the session cannot tell its identity, this is
     * {@link #prepareTransaction()}.
     *
     * @return the open transaction's identity: producer id and epoch, the coordinator's start time when it was known
     * @throws SessionAbortableException if a send failed; the transaction must be aborted
     * @throws TransactionLostException if the coordinator already aborted it (state ABORTABLE_ERROR: abort it)
     * @throws SessionFencedException if another producer took the transactional id over
     * @throws SessionTimeoutException if the coordinator did not answer; prepare may be called again
     */
    default PreparedTransaction prepareTransactionByEpoch() {
        return prepareTransaction();
    }

    /**
     * The identity {@link #prepareTransaction()} is expected to return for the open transaction, known without asking
     * the coordinator: with transaction version 2 every transaction has a producer epoch of its own, so its producer id
     * and epoch name it (the returned identity has no start time, and {@link PreparedTransaction#toString()} stores it
     * as {@code pid:epoch}). A two-phase caller may write its decision under this identity while
     * {@link #prepareTransaction()} runs on another thread, so that the decision's write and the coordinator's round
     * trip overlap; it must then check, before its decision commits, that the prepared transaction has this producer
     * id and epoch, and roll its decision back if the prepare failed.
     *
     * <p>Not guaranteed: this is a prediction from what the session tracked, not a check. Only
     * {@link #prepareTransaction()} confirms with the coordinator that the transaction is open under this identity.
     *
     * @return the expected identity; empty when it cannot be told without the coordinator: no transaction open, nothing
     *         written yet (a transaction whose bound consumers' offsets are its only writes, added at prepare),
     *         transaction version 1 (there the start time tells transactions apart), an identity the session does
     *         not track (after an error, or once the epoch is exhausted), or a resumed session; always empty in
     *         implementations that do not predict
     */
    default Optional<PreparedTransaction> expectedPreparedTransaction() {
        return Optional.empty();
    }

    /**
     * Commits the open or prepared transaction. Bound consumers' offsets are added first. On a resumed session this
     * finishes the resumed transaction, and is idempotent: a transaction that is already committed reports success.
     *
     * <p>A commit that times out moves the session to PREPARED: kafka-clients keeps the commit request and sends it,
     * so call {@code commitTransaction()} again to learn its outcome (offsets are not sent twice). An
     * {@link #abortTransaction()} then reports the commit if it went through.
     *
     * @throws SessionFencedException if another session took over; nothing becomes visible
     * @throws SessionAbortableException if the transaction failed; abort it
     * @throws TransactionLostException if the coordinator had already aborted it
     * @throws SessionTimeoutException if the outcome is not known yet; retry the commit
     */
    void commitTransaction();

    /**
     * Aborts the open, prepared or failed transaction: nothing it wrote becomes visible, bound consumers rewind to
     * where it began. On a resumed session this aborts the resumed transaction at the coordinator.
     *
     * @throws TransactionSessionException if an earlier commit that timed out has meanwhile committed the
     *         transaction: it cannot be aborted, the session is READY and bound consumers keep their progress
     * @throws SessionTimeoutException if the abort (or the earlier commit it waits for) did not finish in time;
     *         call {@code abortTransaction()} again
     */
    void abortTransaction();

    /**
     * Finishes a prepared transaction from the identity stored with the external decision: commits if
     * {@code prepared} names the transaction that is prepared now, aborts it otherwise. Idempotent on a resumed
     * session: completing an already-committed transaction again reports
     * {@link CompletionOutcome#ALREADY_COMMITTED}, so retries after a crash are safe. Outcomes that cannot be known
     * are thrown, never guessed; the full table is in {@code ResumedCompletion} and the README.
     *
     * @param prepared the identity {@link #prepareTransaction()} returned, as stored by the decision maker
     * @return what was done
     * @throws TransactionLostException the transaction was aborted (timeout, fencing, another party)
     * @throws TransactionSupersededException the id moved on and the outcome is unknown
     * @throws SessionFencedException another producer took the id over
     */
    CompletionOutcome completeTransaction(PreparedTransaction prepared);

    /**
     * Completes from Kafka's {@code producerId:epoch} form: matches on producer id and epoch only. See
     * {@link PreparedTransaction} for what that cannot tell apart; prefer
     * {@link #completeTransaction(PreparedTransaction)}.
     *
     * @param state Kafka's {@code producerId:epoch} of the transaction, as stored by the decision maker; it must name
     *        a transaction
     * @return what was done, as for {@link #completeTransaction(PreparedTransaction)}
     * @throws IllegalArgumentException if {@code state} names no transaction (Kafka's empty state)
     */
    CompletionOutcome completeTransaction(PreparedTxnState state);

    /**
     * Checks with the transaction coordinator that this session's transaction is still the open one. Brokers today
     * cannot extend a transaction's timeout (no TxnHeartbeat API), so this detects, it does not prolong.
     *
     * <p>Reports only what is certain. A transaction whose records have not reached their partition leaders yet is
     * not registered at the coordinator (it shows the previous transaction's end): that is healthy. A live session
     * compares with the producer id and epoch it learned while no transaction was open; if it does not know them
     * (after an epoch overflow or a failed transaction), it reports nothing until it does.
     *
     * @throws TransactionLostException if the coordinator aborted the transaction (timeout or fencing); a live
     *         session moves to ABORTABLE_ERROR, a resumed one to FATAL_ERROR
     * @throws SessionFencedException if another producer took the id over; the session moves to FATAL_ERROR
     */
    void heartbeat();

    /** Closes the session within {@code session.close.timeout.ms}; see {@link #close(Duration)}. */
    void close();

    /**
     * Closes the session: an open or prepared transaction of a live session is aborted (its records never become
     * visible) and bound consumers rewind; after a commit that timed out, that commit's outcome is awaited and
     * reported to the participants instead. The producer and coordinator connections are closed exactly once, and
     * every later call fails with {@link IllegalStateException}. A resumed session leaves its transaction as it is.
     *
     * <p>Safe against concurrent calls: a lifecycle call in progress on another thread finishes first (each is
     * bounded by {@code max.block.ms} or {@code session.coordinator.timeout.ms}); a second {@code close()} waits for
     * the first, at most its own {@code timeout}. Not callable from a send callback.
     *
     * @param timeout how long to wait for a lifecycle call in progress on another thread before logging a warning
     *        (the wait goes on) and, with the time left, for the producer to close; a second {@code close} waits at
     *        most this long for the first
     */
    void close(Duration timeout);

    /**
     * Closes the session <em>without</em> ending its transaction: an open or prepared transaction stays as it is at
     * the coordinator, for another process to finish ({@link #resume}) or for the coordinator to abort after
     * {@code transaction.timeout.ms}. Participants are told the outcome is unknown: a bound consumer goes back to its
     * group's committed offsets before its next poll; a bound share consumer releases its records (they may be
     * delivered again if the transaction commits). For a prepared transaction whose outcome is in doubt (a two-phase
     * commit may have decided to commit it): aborting it here could undo a decided commit. Resources are closed as by
     * {@link #close(Duration)}.
     */
    void abandon();

    /** @return the transactional id */
    String transactionalId();

    /** @return the current state; it may change right after it is read */
    SessionState state();

    /** @return whether this session was created by {@link #resume} (no producer; it can only finish) */
    boolean isResumed();

    /**
     * @return the identity of the prepared or resumed transaction, or of the open one once the coordinator has
     *         registered it (read lazily); empty when no transaction is open or nothing was written yet
     */
    Optional<PreparedTransaction> currentTransaction();

    /**
     * @return the producer id: of the prepared or resumed transaction, else the one the producer writes with
     *         (read from the transaction coordinator when not known)
     * @throws IllegalStateException before {@link #initialize()} or after close
     */
    long producerId();

    /**
     * @return the producer epoch, as {@link #producerId()}. With transaction version 2 it changes at every commit
     *         and abort.
     * @throws IllegalStateException before {@link #initialize()} or after close
     */
    short producerEpoch();

    /**
     * Adds a listener for what the background heartbeat finds.
     *
     * @param listener the listener, called on the heartbeat thread; not null
     */
    void addListener(SessionListener listener);

    /**
     * Removes a listener added with {@link #addListener}.
     *
     * @param listener the listener to remove; one that was not added is ignored
     */
    void removeListener(SessionListener listener);

    /**
     * Adds share-group acknowledgements to the open transaction, the share-group counterpart of
     * {@link #sendOffsetsToTransaction}: ACCEPT, RELEASE or REJECT take effect only if the transaction commits; after
     * an abort (or any end without a commit: fencing, a lost transaction, close) the records are released for
     * redelivery instead.
     *
     * <p>Each acknowledgement must be for a record that a {@link TransactionalShareConsumer} of {@code groupId} bound to
     * this session delivered and has not acknowledged yet; that consumer keeps it and applies it.
     * {@link TransactionalShareConsumer#acknowledge} calls this for you.
     *
     * <p>Not atomic on today's brokers. No broker release has transactional share acknowledgements (KIP-1289 is a
     * proposal; kafka-clients 4.2.2 has no such API key, and a session checks with
     * {@link #transactionalShareAcksAvailable()}), so the acknowledgements are sent after the Kafka commit
     * succeeds (with the consumer's next poll, or from a background check about 10 ms later). A crash between the commit and that send leaves the records acquired until their acquisition lock
     * expires, and then they are delivered again although their output is committed: at most one duplicate per
     * record of the crashed transaction.
     *
     * @param groupId the share group of the records
     * @param acks what to acknowledge
     * @throws IllegalStateException if no transaction is open, or no bound share consumer of {@code groupId} holds a
     *         record (it was not delivered by a consumer bound to this session, or was already acknowledged)
     */
    void addShareAcksToTransaction(String groupId, Collection<ShareAcknowledgement> acks);

    /**
     * @return whether the cluster offers transactional share acknowledgements (KIP-1289), so that acknowledgements
     *         could be written into the transaction itself. Always false with kafka-clients 4.2.2: its {@code ApiKeys}
     *         has no {@code TXN_SHARE_ACKNOWLEDGE}, so the client could not send it and the broker is not asked.
     */
    boolean transactionalShareAcksAvailable();
}
