package io.github.txnsession.spring;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.TransactionSession;
import org.apache.commons.logging.LogFactory;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serializer;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.core.ProducerPostProcessor;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * A spring-kafka {@link ProducerFactory} backed by a {@link TransactionSessionPool}, so that an unchanged
 * {@code KafkaTemplate} (and a listener container's offset commits) write into the session of the current
 * transaction.
 *
 * <ul>
 * <li>Inside a {@link SessionTransactionManager} transaction, spring-kafka finds the producer that the transaction
 * manager bound for this factory. Other {@code SessionProducerFactory} instances over the same pool (say, with other
 * serializers) join the same session: {@link #createProducer()} returns a producer bound to the thread's session,
 * so every template writes into the one transaction.</li>
 * <li>Inside the transaction of another manager (the application's JDBC or JPA manager) and with a
 * {@link #setEnlistment SessionEnlistment}, the first producer enlists a session in that transaction: Kafka prepares
 * before the database commits and commits after it (two-phase with a decision log).</li>
 * <li>Outside any transaction, {@link #createProducer()} lends a session from the pool for a local transaction
 * ({@code KafkaTemplate.executeInTransaction}); closing the producer gives the session back.</li>
 * <li>{@link #createNonTransactionalProducer()} serves templates with {@code allowNonTransactional}: a plain,
 * shared, non-transactional producer with the same connection settings.</li>
 * </ul>
 *
 * <p>{@linkplain #addListener Listeners} (Micrometer's {@code MicrometerProducerListener}, added by Boot's
 * {@code DefaultKafkaProducerFactoryCustomizer}s) are told about each session's producer when the pool opens and
 * closes the session (as a {@link SessionProducer} view for reading: its {@code metrics()} are the session producer's
 * client metrics; its serializers refuse, so it cannot send), and about the non-transactional producer.
 * {@linkplain #addPostProcessor Post-processors} (a tracing wrapper, say) wrap every producer this factory hands out:
 * the non-transactional one once, and the producer of each transaction (bound or lent) when it is created. They see
 * this factory's producers, never a session's {@code KafkaProducer}, so what they send joins the transaction.
 *
 * <p>Not supported: a per-template transactional id prefix. The pool fixes the ids; a template or call that asks for
 * another prefix fails with a message saying so. {@code executeInTransaction} inside a session transaction joins
 * that transaction rather than starting an independent one; use {@code REQUIRES_NEW} for an independent one.
 *
 * @param <K> key type
 * @param <V> value type
 */
public class SessionProducerFactory<K, V> implements ProducerFactory<K, V>, DisposableBean {

    private final TransactionSessionPool pool;
    private final Supplier<Serializer<K>> keySerializer;
    private final Supplier<Serializer<V>> valueSerializer;
    private final Map<String, Object> configs;
    private volatile @Nullable DefaultKafkaProducerFactory<K, V> nonTransactional;
    private volatile @Nullable SessionEnlistment enlistment;
    private final List<Listener<K, V>> listeners = new CopyOnWriteArrayList<>();
    private final List<ProducerPostProcessor<K, V>> postProcessors = new CopyOnWriteArrayList<>();
    /** the views the listeners were given, by session, to remove them with the same object and id */
    private final Map<TransactionSession, Announced<K, V>> announced = new ConcurrentHashMap<>();
    private final AtomicLong announcements = new AtomicLong();
    private final AtomicBoolean watchingPool = new AtomicBoolean();

    /**
     * @param pool the sessions to send through
     * @param keySerializer makes a configured key serializer for each producer
     * @param valueSerializer makes a configured value serializer for each producer
     * @param configs producer configs for non-transactional sends ({@code bootstrap.servers} and security); a
     *        {@code transactional.id} in them is ignored
     */
    public SessionProducerFactory(TransactionSessionPool pool, Supplier<Serializer<K>> keySerializer,
            Supplier<Serializer<V>> valueSerializer, Map<String, ?> configs) {
        this.pool = Objects.requireNonNull(pool, "pool");
        this.keySerializer = Objects.requireNonNull(keySerializer, "keySerializer");
        this.valueSerializer = Objects.requireNonNull(valueSerializer, "valueSerializer");
        Map<String, Object> copy = new HashMap<>(Objects.requireNonNull(configs, "configs"));
        copy.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        this.configs = Map.copyOf(copy);
    }

    /**
     * Lets producers made inside the transaction of another transaction manager (the application's JDBC or JPA
     * manager) enlist a session in it, instead of running a local Kafka transaction of their own.
     *
     * @param enlistment over this factory's pool, or null to stop enlisting
     */
    public void setEnlistment(@Nullable SessionEnlistment enlistment) {
        if (enlistment != null && enlistment.getPool() != this.pool) {
            throw new IllegalArgumentException("The enlistment is for pool " + enlistment.getPool() + ", not for this "
                    + "factory's pool " + this.pool);
        }
        this.enlistment = enlistment;
    }

    /** @return the enlistment set with {@link #setEnlistment}, if any */
    public @Nullable SessionEnlistment getEnlistment() {
        return this.enlistment;
    }

    @Override
    public void addListener(Listener<K, V> listener) {
        this.listeners.add(Objects.requireNonNull(listener, "listener"));
        watchPool();
        DefaultKafkaProducerFactory<K, V> plain = this.nonTransactional;
        if (plain != null) {
            plain.addListener(listener);
        }
    }

    @Override
    public void addListener(int index, Listener<K, V> listener) {
        this.listeners.add(index, Objects.requireNonNull(listener, "listener"));
        watchPool();
        DefaultKafkaProducerFactory<K, V> plain = this.nonTransactional;
        if (plain != null) {
            plain.addListener(index, listener);
        }
    }

    @Override
    public boolean removeListener(Listener<K, V> listener) {
        DefaultKafkaProducerFactory<K, V> plain = this.nonTransactional;
        if (plain != null) {
            plain.removeListener(listener);
        }
        return this.listeners.remove(listener);
    }

    @Override
    public List<Listener<K, V>> getListeners() {
        return List.copyOf(this.listeners);
    }

    /** Wraps every producer this factory hands out from now on (see the class description). */
    @Override
    public void addPostProcessor(ProducerPostProcessor<K, V> postProcessor) {
        this.postProcessors.add(Objects.requireNonNull(postProcessor, "postProcessor"));
        DefaultKafkaProducerFactory<K, V> plain = this.nonTransactional;
        if (plain != null) {
            plain.addPostProcessor(postProcessor);
        }
    }

    @Override
    public boolean removePostProcessor(ProducerPostProcessor<K, V> postProcessor) {
        DefaultKafkaProducerFactory<K, V> plain = this.nonTransactional;
        if (plain != null) {
            plain.removePostProcessor(postProcessor);
        }
        return this.postProcessors.remove(postProcessor);
    }

    @Override
    public List<ProducerPostProcessor<K, V>> getPostProcessors() {
        return List.copyOf(this.postProcessors);
    }

    /** Tells the listeners about the producers of the sessions the pool opens and closes from now on. */
    private void watchPool() {
        if (!this.watchingPool.compareAndSet(false, true)) {
            return;
        }
        this.pool.addLifecycleListener(new TransactionSessionPool.SessionLifecycleListener() {
            @Override
            public void sessionOpened(TransactionSession session) {
                // serializers that refuse: the view is for listeners that read the producer (metrics), and it makes
                // no serializer instance that nobody would close
                SessionProducer<K, V> view = new SessionProducer<>(session, refusing(), refusing());
                // one id per session object: a new session of the same transactional id is a new producer
                Announced<K, V> a = new Announced<>("session-" + session.transactionalId() + "-"
                        + announcements.incrementAndGet(), view);
                announced.put(session, a);
                tell(l -> l.producerAdded(a.id(), a.view()));
            }

            @Override
            public void sessionClosed(TransactionSession session) {
                Announced<K, V> a = announced.remove(session);
                if (a != null) {
                    tell(l -> l.producerRemoved(a.id(), a.view()));
                }
            }
        });
    }

    private void tell(java.util.function.Consumer<Listener<K, V>> call) {
        for (Listener<K, V> listener : this.listeners) {
            try {
                call.accept(listener);
            }
            catch (RuntimeException ex) {
                LogFactory.getLog(SessionProducerFactory.class).warn("Producer factory listener " + listener
                        + " failed", ex);
            }
        }
    }

    private static <T> Serializer<T> refusing() {
        return (topic, data) -> {
            throw new UnsupportedOperationException("This producer is a view of a pooled session for listeners "
                    + "(metrics); send through a KafkaTemplate in a transaction");
        };
    }

    /** A session producer view handed to the listeners, and the id it was announced with. */
    private record Announced<K, V>(String id, SessionProducer<K, V> view) {
    }

    /** @return the pool whose sessions this factory's producers write into */
    public TransactionSessionPool getPool() {
        return this.pool;
    }

    @Override
    public Producer<K, V> createProducer() {
        return createProducer(null);
    }

    /**
     * @param txIdPrefix must be null or the pool's prefix: the pool fixes the transactional ids
     * @return a producer bound to the thread's session transaction, or one over a session lent for a local
     *         transaction (closing it gives the session back)
     */
    @Override
    public Producer<K, V> createProducer(@Nullable String txIdPrefix) {
        if (txIdPrefix != null && !txIdPrefix.equals(this.pool.transactionalIdPrefix())) {
            throw new IllegalArgumentException("Transactional id prefix '" + txIdPrefix + "' was requested, but this "
                    + "producer factory writes into the sessions of pool '" + this.pool.transactionalIdPrefix()
                    + "', whose ids are fixed. Remove the template's transaction-id-prefix "
                    + "(spring.kafka.template.transaction-id-prefix) and set kafka.txn-session.transactional-id-prefix.");
        }
        SessionResourceHolder holder = SessionResourceHolder.current(this.pool);
        if (holder != null) {
            holder.checkNotEnded();
            return boundProducer(holder);
        }
        if (TransactionSynchronizationManager.isActualTransactionActive()
                && !TransactionSynchronizationManager.isSynchronizationActive()) {
            // an afterCompletion callback: the transaction is ending; a producer lent now would be bound to the thread
            // by spring-kafka with nothing left to end it (a leaked session, later sends lost)
            throw new IllegalStateException("A Kafka send was made while the Spring transaction is completing (an "
                    + "afterCompletion or @TransactionalEventListener(AFTER_COMPLETION/AFTER_ROLLBACK) callback): it "
                    + "can join no transaction any more. Send from a new transaction (REQUIRES_NEW) or outside one.");
        }
        SessionEnlistment enlist = this.enlistment;
        if (enlist != null && SessionEnlistment.canEnlist()) {
            // inside the transaction of the application's own manager (JDBC, JPA): join it
            try {
                return boundProducer(enlist.enlist());
            }
            catch (TransactionException ex) {
                throw SessionCommitPoint.duringCommit(ex);
            }
        }
        PooledSession lease = this.pool.acquire();
        try {
            return postProcess(new LeasedSessionProducer<>(view(lease), lease));
        }
        catch (RuntimeException ex) {
            lease.release();
            throw ex;
        }
    }

    /** @return a producer into the session of {@code holder}, whose lifecycle calls are left to the manager */
    Producer<K, V> boundProducer(SessionResourceHolder holder) {
        return postProcess(new BoundSessionProducer<>(new SessionProducer<>(holder.session(),
                this.keySerializer.get(), this.valueSerializer.get()), holder));
    }

    /**
     * Wraps a producer of this factory with the post-processors, in order. A wrapper sees only the factory's own
     * producer (a view of the session, whose lifecycle calls the transaction drives), never the session's
     * {@code KafkaProducer}: whatever it sends goes into the session's transaction.
     */
    private Producer<K, V> postProcess(Producer<K, V> producer) {
        Producer<K, V> result = producer;
        for (ProducerPostProcessor<K, V> postProcessor : this.postProcessors) {
            result = postProcessor.apply(result);
        }
        return result;
    }

    private SessionProducer<K, V> view(PooledSession lease) {
        return new SessionProducer<>(lease.session(), this.keySerializer.get(), this.valueSerializer.get());
    }

    /** @return a shared non-transactional producer (its {@code close} keeps it open for the next caller) */
    @Override
    public Producer<K, V> createNonTransactionalProducer() {
        DefaultKafkaProducerFactory<K, V> factory = this.nonTransactional;
        if (factory == null) {
            synchronized (this) {
                factory = this.nonTransactional;
                if (factory == null) {
                    factory = new DefaultKafkaProducerFactory<>(this.configs, this.keySerializer,
                            this.valueSerializer);
                    this.listeners.forEach(factory::addListener);
                    this.postProcessors.forEach(factory::addPostProcessor);
                    this.nonTransactional = factory;
                }
            }
        }
        return factory.createProducer();
    }

    @Override
    public boolean transactionCapable() {
        return true;
    }

    @Override
    public String getTransactionIdPrefix() {
        return this.pool.transactionalIdPrefix();
    }

    @Override
    public Map<String, Object> getConfigurationProperties() {
        return this.configs;
    }

    @Override
    public Supplier<Serializer<K>> getKeySerializerSupplier() {
        return this.keySerializer;
    }

    @Override
    public Supplier<Serializer<V>> getValueSerializerSupplier() {
        return this.valueSerializer;
    }

    /** Closes the shared non-transactional producer, if one was made. The pool is closed by its owner. */
    @Override
    public void destroy() {
        DefaultKafkaProducerFactory<K, V> factory = this.nonTransactional;
        if (factory != null) {
            factory.destroy();
        }
    }

    @Override
    public String toString() {
        return "SessionProducerFactory[" + this.pool + "]";
    }
}
