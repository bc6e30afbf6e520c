package io.github.txnsession.spring;

import java.time.Duration;
import java.util.Date;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.AtomicBoolean;

import io.github.txnsession.kafka.TransactionSession;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.kafka.core.KafkaResourceHolder;
import org.springframework.transaction.CannotCreateTransactionException;
import org.springframework.transaction.support.ResourceHolderSupport;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Enlists a Kafka transaction session in the Spring transaction of <em>another</em> transaction manager: the
 * application's own {@code JdbcTransactionManager}, {@code JpaTransactionManager} or any manager over a
 * {@code DataSource}. The application keeps its manager as {@code transactionManager}; the first Kafka use inside one
 * of its transactions (a {@code KafkaTemplate} send, through {@link SessionProducerFactory}) takes a session from the
 * pool, begins its transaction and registers an {@link EnlistedSessionSynchronization} that ends it with the database
 * transaction. A transaction that never touches Kafka costs nothing.
 *
 * <h2>Why a synchronization, not a second manager</h2>
 * Spring runs one transaction manager per transaction. Replacing the application's manager (or chaining two) made
 * Boot's own JDBC and JPA managers back off and left the database outside the transaction. A synchronization joins
 * whatever manager runs: it is told before the database commits (Kafka is prepared, and in two-phase mode the
 * decision is written through the transaction's own connection), after it committed (Kafka commits) and after it
 * rolled back (Kafka aborts).
 *
 * <p>Add {@link SessionCommitPoint#LISTENER} to the application's transaction manager (the starter does) so that
 * sessions prepare after every other {@code beforeCommit} callback, sends from {@code BEFORE_COMMIT} event listeners
 * included; without it a session prepares in its own {@code beforeCommit} callback, in registration order.
 *
 * <h2>Modes</h2>
 * <ul>
 * <li>Best effort ({@code twoPhase == null}): Kafka commits right after the database. A crash or a Kafka failure
 * between the two leaves the database committed and the Kafka side aborted (logged at ERROR); never the reverse.</li>
 * <li>Two-phase ({@link TwoPhaseDecision}): the decision row commits with the database, and recovery completes the
 * Kafka side after a crash, as {@code JdbcKafkaTransactionManager} does.</li>
 * </ul>
 */
public class SessionEnlistment {

    private static final Log log = LogFactory.getLog(SessionEnlistment.class);

    private final TransactionSessionPool pool;
    private final @Nullable TwoPhaseDecision twoPhase;
    private volatile List<SessionTransactionObserver> observers = List.of();
    private volatile List<CommitPhaseListener> phaseListeners = List.of();
    private volatile Executor clearExecutor;
    private volatile boolean completeInBackground;
    private volatile boolean decisionAlongsidePrepare;
    private final AtomicBoolean missingCommitPointReported = new AtomicBoolean();

    /**
     * @param pool the sessions to enlist
     * @param twoPhase the decision log of two-phase mode, or null for best effort
     */
    public SessionEnlistment(TransactionSessionPool pool, @Nullable TwoPhaseDecision twoPhase) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.twoPhase = twoPhase;
        this.clearExecutor = pool::runInBackground;
    }

    /** @param observers told how each enlisted transaction ended (metrics, health) */
    public void setObservers(List<? extends SessionTransactionObserver> observers) {
        this.observers = List.copyOf(observers);
    }

    /**
     * @param listeners told as each enlisted commit passes each {@link CommitPhase} (tracing, failure tests); the
     *        decision-log phases only in two-phase mode
     */
    public void setCommitPhaseListeners(List<? extends CommitPhaseListener> listeners) {
        this.phaseListeners = List.copyOf(listeners);
    }

    /**
     * @param executor runs the clearing of two-phase decision rows after the Kafka commit, and the Kafka side's
     *        prepare while the committing thread writes the decision (transaction version 2, see
     *        {@code DecisionAlongsidePrepare}); by default the pool's background threads,
     *        {@link TransactionSessionPool#runInBackground}. The committing thread does not wait for a clearing, and
     *        prepares itself when the executor has not started its prepare by the time the decision is written
     */
    public void setDecisionClearExecutor(Executor executor) {
        this.clearExecutor = Objects.requireNonNull(executor, "executor");
    }

    /**
     * Two-phase mode only: whether the Kafka side of a commit is completed off the committing thread, once the
     * database committed the decision (default false). The transaction's commit then returns without waiting for the
     * Kafka commit (about one broker round trip less); its records become visible to {@code read_committed} readers
     * shortly after, as they already do after a Kafka commit returns (the coordinator writes its markers after it
     * answered). Nothing is weaker: the decision is durable, a failed completion is settled from it (in the
     * background, then by the pool), and the session goes back to the pool only when its transaction is complete.
     * What changes: a failure to complete the Kafka side is logged, not thrown to the caller (it could do nothing about
     * it: the commit is decided), and the committed-transaction observers are told from the background thread.
     *
     * @param completeInBackground true to complete the Kafka side of a two-phase commit in the background, false
     *        (the default) to complete it on the committing thread; ignored in best-effort mode
     */
    public void setCompleteInBackground(boolean completeInBackground) {
        this.completeInBackground = completeInBackground;
    }

    /**
     * Whether a two-phase commit writes its decision while the Kafka side is being prepared, instead of after
     * (default false). With transaction version 2 the session knows the producer id and epoch its prepare will
     * confirm, so the decision is written under them while the prepare's round trip to the coordinator is in flight,
     * and the database commits only once the prepare confirmed that identity; the two round trips overlap (see
     * {@code DecisionAlongsidePrepare}), and the prepare asks the coordinator while the flush runs
     * ({@link io.github.txnsession.kafka.TransactionSession#prepareTransactionByEpoch()}), so the transaction is known
     * open at a moment during the flush rather than right after it. Sessions with bound consumers and fleets stay
     * serial.
     *
     * <p>The trade-off: such a decision names the transaction without the coordinator's start time. After a restart
     * that left the row (a crash between the database commit and the Kafka commit), recovery from the row alone cannot
     * tell a transaction the coordinator aborted on its timeout (LOST, handed to the {@code LostTransactionHandler})
     * from a later transaction of the id, and reports it in doubt (UNKNOWN) for an operator instead. Within a running
     * process the prepare learns no start time either when the records were still on their way (the usual case: it asks
     * before the coordinator registered the transaction), so a settlement there of a transaction aborted on its timeout
     * (a completion delayed by the whole transaction timeout) is reported in doubt too. Nothing is committed or
     * compensated by mistake either way.
     *
     * @param decisionAlongsidePrepare true to overlap the decision write with the prepare; ignored in best-effort
     *        mode and with transaction version 1
     */
    public void setDecisionAlongsidePrepare(boolean decisionAlongsidePrepare) {
        this.decisionAlongsidePrepare = decisionAlongsidePrepare;
    }

    /** @return the pool whose sessions are enlisted */
    public TransactionSessionPool getPool() {
        return this.pool;
    }

    /** @return whether a Spring transaction that a session may join is active on this thread */
    public static boolean canEnlist() {
        return TransactionSynchronizationManager.isSynchronizationActive()
                && TransactionSynchronizationManager.isActualTransactionActive();
    }

    /**
     * @return the session of the current Spring transaction: the one already enlisted (or bound by a
     *         {@link SessionTransactionManager}), else a new one, begun and synchronized with the transaction
     * @throws IllegalStateException if no transaction with synchronization is active on this thread
     */
    public SessionResourceHolder enlist() {
        SessionResourceHolder current = SessionResourceHolder.current(this.pool);
        if (current != null) {
            return current;
        }
        if (!canEnlist()) {
            throw new IllegalStateException("No Spring transaction is active on this thread: a Kafka session can only "
                    + "be enlisted in a running transaction (@Transactional, TransactionTemplate)");
        }
        SessionCommitPoint point = SessionCommitPoint.current();
        if (this.twoPhase != null) {
            refuseEnlistingAfterTheDecision(point);
            this.twoPhase.ensureReady();
        }
        long began = System.nanoTime();
        PooledSession lease = this.pool.acquire();
        TransactionSession session = lease.session();
        try {
            session.beginTransaction();
        }
        catch (RuntimeException ex) {
            lease.release();
            throw new CannotCreateTransactionException("Could not begin a transaction on session '"
                    + session.transactionalId() + "': " + ex.getMessage(), ex);
        }
        SessionResourceHolder holder = new SessionResourceHolder(lease, began);
        holder.setSynchronizedWithTransaction(true);
        applyDatabaseDeadline(holder);
        TransactionSynchronizationManager.bindResource(this.pool, holder);
        EnlistedSessionSynchronization synchronization = new EnlistedSessionSynchronization(this.pool, holder,
                this.twoPhase, this.observers, this.phaseListeners, this.clearExecutor, this.completeInBackground,
                this.decisionAlongsidePrepare);
        if (point != null) {
            synchronization.prepareAtCommitPoint(point);
        }
        else if (this.twoPhase != null && this.missingCommitPointReported.compareAndSet(false, true)) {
            log.warn("Two-phase commit: the transaction manager of this transaction has no SessionCommitPoint.LISTENER "
                    + "(a JTA manager, or one created outside the application context). The Kafka session prepares "
                    + "in its own beforeCommit callback, in registration order, and a first Kafka send from a "
                    + "beforeCommit callback (a BEFORE_COMMIT event listener) is refused. Add the listener to the "
                    + "manager (manager.addListener(SessionCommitPoint.LISTENER)). Reported once.");
        }
        TransactionSynchronizationManager.registerSynchronization(synchronization);
        return holder;
    }

    /**
     * In two-phase mode a session must join before the transaction's decision is taken. A first Kafka send that comes
     * later (from a {@code beforeCommit} callback of a manager without {@link SessionCommitPoint#LISTENER}, or from a
     * transaction listener notified after the commit point prepared) would register a synchronization that Spring no
     * longer calls before the database commits: the Kafka side could only commit best effort, and a crash between the
     * two commits would lose it. It is refused instead; the exception fails the callback, which rolls the whole
     * transaction back. A first send from a {@code beforeCompletion} callback of a manager without the listener
     * still commits best effort: Spring swallows what those callbacks throw, so refusing would lose the send for sure.
     */
    private static void refuseEnlistingAfterTheDecision(@Nullable SessionCommitPoint point) {
        boolean late = (point != null) ? point.isPastPrepare() : SessionCommitPoint.insideCommitCallbacks();
        if (late) {
            throw new IllegalStateException("Two-phase commit: a first Kafka send of this transaction came while it "
                    + "was already committing (from a " + (point != null ? "transaction listener notified after the "
                    + "Kafka sessions were prepared" : "beforeCommit callback, and the transaction manager has no "
                    + "SessionCommitPoint.LISTENER") + "). It could not join the commit decision, so it is refused and "
                    + "the transaction rolls back. Add SessionCommitPoint.LISTENER to the transaction manager "
                    + "(manager.addListener(SessionCommitPoint.LISTENER); the starter does so for every manager bean "
                    + "but JTA ones), or send before the commit starts.");
        }
    }

    /**
     * The transaction's timeout ({@code @Transactional(timeout = ...)}, {@code TransactionTemplate.setTimeout},
     * {@code spring.transaction.default-timeout}) is known only to the manager that began it, which puts it on the
     * resource it binds (JDBC's {@code ConnectionHolder}, JPA's {@code EntityManagerHolder}): the session takes the
     * earliest deadline found there, so a send after it fails with {@code TransactionTimedOutException} (and the
     * whole transaction rolls back), as the database's next statement would.
     */
    private static void applyDatabaseDeadline(SessionResourceHolder holder) {
        Date earliest = null;
        for (Object resource : TransactionSynchronizationManager.getResourceMap().values()) {
            if (resource instanceof ResourceHolderSupport r && r != holder && r.hasTimeout()) {
                Date deadline = r.getDeadline();
                if (deadline != null && (earliest == null || deadline.before(earliest))) {
                    earliest = deadline;
                }
            }
        }
        if (earliest != null) {
            holder.setTimeoutInMillis(Math.max(0, earliest.getTime() - System.currentTimeMillis()));
        }
    }

    /**
     * Enlists (see {@link #enlist()}) and binds a {@link KafkaResourceHolder} for {@code producerFactory}, as a
     * spring-kafka listener container expects to find it for sending the consumed offsets into the transaction.
     * A holder already bound for {@code producerFactory} is left as it is.
     *
     * @param producerFactory the factory the listener container sends the offsets through; a holder bound for it here
     *        is unbound when the transaction ends
     * @return the holder of the enlisted session, as {@link #enlist()} returns it
     * @throws IllegalStateException if no transaction with synchronization is active on this thread
     */
    public SessionResourceHolder enlistWithProducer(SessionProducerFactory<Object, Object> producerFactory) {
        SessionResourceHolder holder = enlist();
        if (TransactionSynchronizationManager.getResource(producerFactory) == null) {
            KafkaResourceHolder<Object, Object> kafkaHolder = new KafkaResourceHolder<>(
                    producerFactory.boundProducer(holder), Duration.ZERO);
            kafkaHolder.setSynchronizedWithTransaction(true);
            TransactionSynchronizationManager.bindResource(producerFactory, kafkaHolder);
            holder.unbindWithTransaction(producerFactory);
        }
        return holder;
    }

    @Override
    public String toString() {
        return "SessionEnlistment[" + this.pool + (this.twoPhase == null ? ", best effort" : ", two-phase") + "]";
    }
}
