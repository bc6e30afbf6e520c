package io.github.txnsession.spring;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Objects;
import java.util.Set;

import io.github.txnsession.kafka.TransactionSession;
import org.jspecify.annotations.Nullable;

/**
 * The session of the current transaction as a {@link TransactionSession}: a transaction-scoped proxy, the counterpart
 * of Spring's shared {@code EntityManager}. Inject it once as a {@code TransactionSession} (Boot's auto-configuration
 * registers one) and call it from any {@code @Transactional} method: each call goes to the session bound to the
 * calling thread's transaction by the {@link SessionTransactionManager} (or a {@link SessionEnlistment}) of the
 * proxy's {@link TransactionSessionPool}, so two threads in two transactions each reach their own session.
 *
 * <h2>What it does</h2>
 * <ul>
 * <li>Identity and state ({@code transactionalId()}, {@code state()}, {@code producerId()},
 * {@code currentTransaction()}, ...), {@code prepareTransaction()}, {@code prepareTransactionByEpoch()},
 * {@code heartbeat()},
 * {@code sendOffsetsToTransaction}, {@code addShareAcksToTransaction} and {@code addPartitionsToTransaction} go to
 * the current session; what they throw is the session's own exception.</li>
 * <li>Outside a session transaction every such call throws {@link IllegalStateException} naming the call, the thread
 * and what to change; {@link CurrentTransactionSession#isActive()} asks without failing. When sessions are enlisted
 * in the application's own (JDBC, JPA) transactions ({@link SessionEnlistment}), a transaction has a session only from
 * its first Kafka send on.</li>
 * <li>The calls the transaction manager drives are refused with {@link IllegalStateException}, inside a transaction
 * or not: {@code initialize}, {@code beginTransaction}, {@code commitTransaction}, {@code abortTransaction},
 * {@code completeTransaction}, {@code close} and {@code abandon}. So are {@code addListener} and
 * {@code removeListener}: a listener belongs to the pool, which gives it to all of its sessions.</li>
 * <li>{@code toString}, {@code equals} and {@code hashCode} need no transaction. Two proxies of the same pool are
 * equal.</li>
 * </ul>
 *
 * <h2>Not what it is for</h2>
 * Binding: a {@link io.github.txnsession.kafka.SessionProducer}, a
 * {@link io.github.txnsession.kafka.TransactionalConsumer} or a
 * {@link io.github.txnsession.kafka.TransactionalShareConsumer} joins one session's transactions for as long as it is
 * bound, so it refuses the proxy with {@link IllegalArgumentException}; bind the session itself,
 * {@link CurrentTransactionSession#get()}, or let {@link TransactionalConsumerFactory} do it.
 *
 * <p>Declared as a bean of your own, give it {@code @Bean(destroyMethod = "")}: Spring would otherwise call its
 * {@code close()} at shutdown (a {@code TransactionSession} is {@link AutoCloseable}), which the proxy refuses; the
 * pool closes the sessions.
 */
public final class TransactionSessionProxy {

    /** the calls the transaction manager (and, for initialize and close, the pool) makes on a session */
    private static final Set<String> DRIVEN_BY_TRANSACTION_MANAGER = Set.of("initialize", "beginTransaction",
            "commitTransaction", "abortTransaction", "completeTransaction", "close", "abandon");

    private static final Set<String> POOL_LISTENERS = Set.of("addListener", "removeListener");

    private TransactionSessionProxy() {
    }

    /**
     * @param pool the pool of the transaction manager whose transactions are meant
     * @return a {@link TransactionSession} whose calls go to the session of the calling thread's transaction
     */
    public static TransactionSession create(TransactionSessionPool pool) {
        Objects.requireNonNull(pool, "pool");
        return (TransactionSession) Proxy.newProxyInstance(TransactionSession.class.getClassLoader(),
                new Class<?>[] { TransactionSession.class }, new CurrentSessionHandler(pool));
    }

    /**
     * @param candidate any object
     * @return whether {@code candidate} is a proxy made by {@link #create}
     */
    public static boolean isProxy(@Nullable Object candidate) {
        return handlerOf(candidate) != null;
    }

    private static @Nullable CurrentSessionHandler handlerOf(@Nullable Object candidate) {
        return candidate != null && Proxy.isProxyClass(candidate.getClass())
                && Proxy.getInvocationHandler(candidate) instanceof CurrentSessionHandler handler ? handler : null;
    }

    /** Sends each call to the session bound to the calling thread for the pool, or refuses it. */
    private static final class CurrentSessionHandler implements InvocationHandler {

        private final TransactionSessionPool pool;

        CurrentSessionHandler(TransactionSessionPool pool) {
            this.pool = pool;
        }

        @Override
        public @Nullable Object invoke(Object proxy, Method method, @Nullable Object @Nullable [] args)
                throws Throwable {
            String name = method.getName();
            int arity = method.getParameterCount();
            if (name.equals("equals") && arity == 1) {
                CurrentSessionHandler other = handlerOf(Objects.requireNonNull(args)[0]);
                return other != null && other.pool == this.pool;
            }
            if (name.equals("hashCode") && arity == 0) {
                return System.identityHashCode(this.pool);
            }
            if (name.equals("toString") && arity == 0) {
                return describe();
            }
            if (DRIVEN_BY_TRANSACTION_MANAGER.contains(name)) {
                throw new IllegalStateException("TransactionSession." + name + "() was called on the transaction-"
                        + "scoped session proxy of pool " + this.pool + ", but the transaction manager drives the "
                        + "lifecycle of the sessions it binds: it begins, commits, aborts and closes the session of "
                        + "each Spring transaction (the pool initializes and closes them). End the Spring transaction "
                        + "instead: return normally to commit, throw or call setRollbackOnly() to abort. To drive a "
                        + "session yourself, use one of your own: TransactionSession.open(configs).");
            }
            if (POOL_LISTENERS.contains(name)) {
                throw new IllegalStateException("TransactionSession." + name + "() was called on the transaction-"
                        + "scoped session proxy of pool " + this.pool + ": a listener would stay on whichever pooled "
                        + "session the calling thread's transaction happens to use. Give SessionListeners to the pool "
                        + "instead (TransactionSessionPool's constructor; with Boot, declare them as beans).");
            }
            SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
            if (holder == null) {
                throw new IllegalStateException("TransactionSession." + name + "() was called on the transaction-"
                        + "scoped session proxy outside a transaction. "
                        + CurrentTransactionSession.noSessionMessage(this.pool));
            }
            try {
                return method.invoke(holder.session(), args);
            }
            catch (InvocationTargetException ex) {
                throw ex.getTargetException();
            }
        }

        private String describe() {
            SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
            return "TransactionSession proxy of the current transaction of " + this.pool + " ("
                    + (holder == null ? "no transaction on thread '" + Thread.currentThread().getName() + "'"
                            : "now " + holder.session())
                    + ")";
        }
    }
}
