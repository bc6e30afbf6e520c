package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.function.Supplier;

import io.github.txnsession.kafka.InvalidSessionConfigException;
import io.github.txnsession.kafka.SessionListener;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.TransactionSessionConfig;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionEnlistment;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.kafka.fleet.TransactionalIdFleet;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.TransactionSessionProxy;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import io.github.txnsession.spring.TwoPhaseDecision;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.serialization.Serializer;
import org.jspecify.annotations.Nullable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.beans.BeanUtils;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.kafka.autoconfigure.DefaultKafkaProducerFactoryCustomizer;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaConnectionDetails;
import org.springframework.boot.kafka.autoconfigure.KafkaProperties;
import org.springframework.boot.kafka.autoconfigure.SslBundleSslEngineFactory;
import org.springframework.boot.ssl.SslBundle;
import org.springframework.boot.task.ThreadPoolTaskExecutorBuilder;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Lazy;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.Environment;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;
import org.springframework.util.StringUtils;

/**
 * Auto-configuration of transaction sessions for Spring Boot applications that use Kafka. Registers, each only when
 * the application defines no bean of its own of that kind:
 * <ul>
 * <li>{@link TransactionSessionPool} {@code transactionSessionPool}: the bounded pool, ids
 * {@code kafka.txn-session.transactional-id-prefix + i}, connection settings from {@code spring.kafka.*};</li>
 * <li>{@link SessionProducerFactory} {@code kafkaProducerFactory}: replaces Boot's producer factory, so Boot's
 * {@code KafkaTemplate} sends into the current session (serializers from {@code spring.kafka.producer.*}; the
 * listeners of Boot's {@code DefaultKafkaProducerFactoryCustomizer}s, such as Micrometer's client metrics, see the
 * sessions' producers);</li>
 * <li>the transaction manager: see {@link SessionTransactionManagerAutoConfiguration} (the application's own manager
 * is kept when it has one);</li>
 * <li>{@link TransactionSession} {@code transactionSession}: the session of the current transaction, a
 * transaction-scoped proxy ({@link TransactionSessionProxy}) that refuses the calls the transaction manager drives;
 * </li>
 * <li>{@link CurrentTransactionSession}: the session of the current transaction as an accessor, whose
 * {@code get()} returns the session itself (to bind producers and consumers to);</li>
 * <li>{@link TransactionalConsumerFactory}: transactional consumers and share consumers (connection settings from
 * {@code spring.kafka.consumer.*}) bound to the current transaction, for programmatic loops and
 * {@link io.github.txnsession.spring.SessionShareListenerContainer}s;</li>
 * <li>{@link SessionTransactionCounters}, and with Actuator's health module / Micrometer on the classpath a health
 * indicator ({@code kafkaTxnSession}) and meters ({@code kafka.txn.session.*}).</li>
 * </ul>
 * Turned off with {@code kafka.txn-session.enabled=false}.
 */
@AutoConfiguration(before = KafkaAutoConfiguration.class,
        beforeName = "org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration")
@ConditionalOnClass({ TransactionSession.class, TransactionSessionPool.class, KafkaTemplate.class,
        KafkaProperties.class })
@ConditionalOnBooleanProperty(name = "kafka.txn-session.enabled", matchIfMissing = true)
@EnableConfigurationProperties({ TransactionSessionProperties.class, KafkaProperties.class })
@Import({ TransactionSessionHealthConfiguration.class, TransactionSessionMetricsConfiguration.class })
public final class TransactionSessionAutoConfiguration {

    private static final Logger log = LoggerFactory.getLogger(TransactionSessionAutoConfiguration.class);

    /** @return running totals of how transactions ended, for health */
    @Bean
    @ConditionalOnMissingBean
    public SessionTransactionCounters sessionTransactionCounters() {
        return new SessionTransactionCounters();
    }

    /**
     * @param properties the {@code kafka.txn-session.*} settings: transactional id prefix, pool size, timeouts and
     *        further producer properties (which override the {@code spring.kafka.*} ones)
     * @param kafkaProperties Boot's {@code spring.kafka.*} settings: their producer settings are the sessions' configs,
     *        and {@code spring.kafka.producer.transaction-id-prefix} is the default prefix
     * @param connectionDetails Boot's Kafka connection details, if there are any: their producer bootstrap servers,
     *        security protocol and SSL bundle replace those of {@code spring.kafka.*}
     * @param listeners the {@link SessionListener} beans, in their order, added to every session of the pool
     * @param taskExecutorBuilder Boot's executor builder (a default one when there is none), for the pool's own
     *        background executors
     * @param environment for {@code spring.application.name} (part of the default prefix) and
     *        {@code kafka.txn-session.jdbc.enabled} (which defaults the transaction timeout to the broker's maximum)
     * @return the pool of sessions; closed with the context
     * @throws IllegalStateException naming the key, when the resulting Kafka settings are invalid for a session
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public TransactionSessionPool transactionSessionPool(TransactionSessionProperties properties,
            KafkaProperties kafkaProperties, ObjectProvider<KafkaConnectionDetails> connectionDetails,
            ObjectProvider<SessionListener> listeners,
            ObjectProvider<ThreadPoolTaskExecutorBuilder> taskExecutorBuilder, Environment environment) {
        String prefix = resolvePrefix(properties, kafkaProperties, environment);
        Map<String, Object> configs = producerConfigs(kafkaProperties, connectionDetails.getIfAvailable());
        map(configs, ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, properties.getTransactionTimeout());
        if (!configs.containsKey(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG)
                && !properties.getProperties().containsKey(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG)
                && environment.getProperty(TwoPhaseCommitProperties.PREFIX + ".enabled", Boolean.class, false)) {
            // two-phase commit: a prepared transaction must survive until recovery, so ask for the broker's maximum
            Duration max = BrokerTransactionTimeout.discover(configs, Duration.ofSeconds(10));
            configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, String.valueOf(max.toMillis()));
            log.info("Two-phase commit: transaction.timeout.ms defaults to the broker's transaction.max.timeout.ms, "
                    + "{} ms", max.toMillis());
        }
        configs.put(TransactionSessionConfig.HEARTBEAT_INTERVAL_MS, properties.getHeartbeatInterval().toMillis());
        configs.put(TransactionSessionConfig.CLOSE_TIMEOUT_MS, properties.getCloseTimeout().toMillis());
        map(configs, TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, properties.getCoordinatorTimeout());
        configs.putAll(properties.getProperties());
        configs.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
        configs.remove(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG);
        configs.remove(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG);
        // fail at startup, naming the key, rather than at the first transaction
        Map<String, Object> probe = new HashMap<>(configs);
        probe.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, prefix + "0");
        try {
            TransactionSessionConfig.of(probe);
        }
        catch (InvalidSessionConfigException ex) {
            throw new IllegalStateException("Invalid Kafka setting for the transaction sessions (taken from "
                    + "spring.kafka.* and " + TransactionSessionProperties.PREFIX + ".properties): " + ex.getMessage(),
                    ex);
        }
        TransactionSessionPool pool;
        TransactionSessionProperties.Fleet fleet = properties.getFleet();
        if (fleet.isEnabled()) {
            log.info("Transaction session pool in fleet mode: {} slots x {} sessions, transactional ids {}<slot>-<n>, "
                    + "bootstrap servers {}", fleet.getSlots(), fleet.getSessionsPerSlot(), prefix,
                    configs.get(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG));
            pool = TransactionSessionPool.forFleet(prefix, fleet.getSlots(), fleet.getSessionsPerSlot(),
                    properties.getAcquireTimeout(), configs, listeners.orderedStream().toList());
            if (environment.getProperty(TwoPhaseCommitProperties.PREFIX + ".enabled", Boolean.class, false)) {
                // the fleet may start before two-phase recovery exists: settle no slot until it is wired
                pool.requireFleetIdSettler();
            }
        }
        else {
            log.info("Transaction session pool: transactional ids {}0..{}{}, bootstrap servers {}", prefix, prefix,
                    properties.getPoolSize() - 1, configs.get(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG));
            pool = new TransactionSessionPool(prefix, properties.getPoolSize(), properties.getAcquireTimeout(),
                    configs, listeners.orderedStream().toList());
        }
        ThreadPoolTaskExecutorBuilder builder = taskExecutorBuilder.getIfAvailable(ThreadPoolTaskExecutorBuilder::new);
        pool.setBackgroundExecutors(executor(builder, pool.size(), "txn-session-"),
                executor(builder, 1, "txn-session-settle-"));
        return pool;
    }

    /**
     * Fleet mode ({@code kafka.txn-session.fleet.enabled=true}): joins the fleet's group, so that the pool lends the
     * ids of the slots this instance owns. Never lazy: without it the pool lends nothing. Closed before the pool (it
     * depends on it): this instance's slots are given up, their sessions closed, before the pool closes.
     *
     * @param pool the pool in fleet mode whose listener settles and gives up slots
     * @param properties the {@code kafka.txn-session.fleet.*} settings
     * @return the running fleet membership
     */
    @Bean(destroyMethod = "close")
    @Lazy(false)
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = TransactionSessionProperties.PREFIX + ".fleet", name = "enabled",
            havingValue = "true")
    public TransactionalIdFleet transactionalIdFleet(TransactionSessionPool pool,
            TransactionSessionProperties properties) {
        if (!pool.isFleet()) {
            throw new IllegalStateException(TransactionSessionProperties.PREFIX + ".fleet.enabled=true, but the "
                    + "TransactionSessionPool bean was not built for a fleet: build it with TransactionSessionPool"
                    + ".forFleet(...) or remove it");
        }
        TransactionSessionProperties.Fleet f = properties.getFleet();
        TransactionalIdFleet.Builder builder = TransactionalIdFleet
            .builder(pool.transactionalIdPrefix(), pool.sessionConfigs())
            .slots(f.getSlots())
            .sessionsPerSlot(f.getSessionsPerSlot())
            .sessionTimeout(f.getSessionTimeout())
            .listener(pool.fleetListener());
        if (f.getGroupId() != null) {
            builder.groupId(f.getGroupId());
        }
        if (f.getSlotsTopic() != null) {
            builder.slotsTopic(f.getSlotsTopic());
        }
        TransactionalIdFleet fleet = builder.start();
        pool.setFleetSettlementRequester(fleet::requestSettlement);
        return fleet;
    }

    /**
     * Kafka-only mode: once every singleton exists, starts the pool's background end of the transactions a crashed
     * predecessor left open on ids this process has not used yet
     * ({@link TransactionSessionPool#endLeftoversInBackground()}), so that the consumer offsets those transactions
     * hold do not keep the application's {@code read_committed} consumers waiting for Kafka's transaction timeout.
     * Startup does not wait for it. Not with two-phase commit, where a prepared transaction may have to be committed:
     * neither with {@code kafka.txn-session.jdbc.enabled=true} (recovery settles every id) nor when the context
     * defines two-phase beans of its own ({@link TwoPhaseRecovery}, {@link TwoPhaseDecision},
     * {@link JdbcKafkaTransactionManager}, {@link DecisionLog}, found by type without creating them; a lazy bean
     * declared as another type is not found: set {@code kafka.txn-session.end-leftovers-on-startup=false} then); nor
     * in fleet mode (the fleet settles each slot as it arrives).
     *
     * @param pool the session pool, if the context has exactly one
     * @param beanFactory to look for two-phase beans by type, without creating them
     * @param environment for {@code kafka.txn-session.jdbc.enabled} and {@code end-leftovers-on-startup}
     * @return the startup hook
     */
    @Bean
    static SmartInitializingSingleton transactionSessionLeftoverEnd(ObjectProvider<TransactionSessionPool> pool,
            ListableBeanFactory beanFactory, Environment environment) {
        return () -> {
            if (environment.getProperty(TwoPhaseCommitProperties.PREFIX + ".enabled", Boolean.class, false)
                    || !environment.getProperty(TransactionSessionProperties.PREFIX + ".end-leftovers-on-startup",
                            Boolean.class, true)) {
                return;
            }
            for (Class<?> twoPhase : List.of(TwoPhaseRecovery.class, TwoPhaseDecision.class,
                    JdbcKafkaTransactionManager.class, DecisionLog.class)) {
                if (beanFactory.getBeanNamesForType(twoPhase, true, false).length > 0) {
                    log.debug("Two-phase beans ({}) are defined: leftover transactions are left to recovery",
                            twoPhase.getSimpleName());
                    return;
                }
            }
            TransactionSessionPool p = pool.getIfUnique();
            if (p != null && !p.isFleet()) {
                p.endLeftoversInBackground();
            }
        };
    }

    /**
     * An executor of the pool's own for its background work (decision rows cleared after the Kafka commit, in-doubt
     * slots settled), built with Boot's {@link ThreadPoolTaskExecutorBuilder} so that the application's task decorator
     * (context propagation) applies. Not the application's {@code applicationTaskExecutor}: a session stays lent until
     * its work is done, so that work must not queue behind the application's. Not a bean either: an {@code Executor}
     * bean would make Boot's {@code applicationTaskExecutor} back off. Sizes, queue and rejection are set again after
     * the builder's customizers ran: the pool relies on an unbounded queue. Shut down by the pool.
     */
    private static ExecutorService executor(ThreadPoolTaskExecutorBuilder builder, int threads, String namePrefix) {
        ThreadPoolTaskExecutor executor = builder.threadNamePrefix(namePrefix).build();
        executor.setCorePoolSize(threads);
        executor.setMaxPoolSize(threads);
        executor.setQueueCapacity(Integer.MAX_VALUE);
        executor.setAllowCoreThreadTimeOut(true);
        executor.setKeepAliveSeconds(60);
        executor.setRejectedExecutionHandler(new ThreadPoolExecutor.AbortPolicy());
        executor.setDaemon(true);
        executor.initialize();
        return executor.getThreadPoolExecutor();
    }

    /**
     * @param pool the session pool whose sessions the factory's producers send through
     * @param kafkaProperties Boot's {@code spring.kafka.*} settings: the producer settings, among them the key and
     *        value serializers
     * @param connectionDetails Boot's Kafka connection details, if there are any: their producer bootstrap servers,
     *        security protocol and SSL bundle replace those of {@code spring.kafka.*}
     * @param customizers Boot's {@code DefaultKafkaProducerFactoryCustomizer}s: the listeners and post-processors they
     *        add are taken over; other settings they make do not apply to the sessions
     * @return the session-backed producer factory that Boot's {@code KafkaTemplate} uses
     */
    @Bean
    @ConditionalOnMissingBean(ProducerFactory.class)
    public SessionProducerFactory<Object, Object> kafkaProducerFactory(TransactionSessionPool pool,
            KafkaProperties kafkaProperties, ObjectProvider<KafkaConnectionDetails> connectionDetails,
            ObjectProvider<DefaultKafkaProducerFactoryCustomizer> customizers) {
        return producerFactory(pool, kafkaProperties, connectionDetails.getIfAvailable(), customizers);
    }

    /**
     * @param pool the session pool whose current transaction's session the proxy calls
     * @return the session of the current transaction as a {@link TransactionSession}: a transaction-scoped proxy. No
     *         destroy method: the pool closes the sessions, and the proxy refuses {@code close()}
     */
    @Bean(destroyMethod = "")
    @ConditionalOnMissingBean(TransactionSession.class)
    public TransactionSession transactionSession(TransactionSessionPool pool) {
        return TransactionSessionProxy.create(pool);
    }

    /**
     * @param pool the session pool whose current transaction's session the accessor returns
     * @return the session of the current transaction, as an accessor
     */
    @Bean
    @ConditionalOnMissingBean
    public CurrentTransactionSession currentTransactionSession(TransactionSessionPool pool) {
        return new CurrentTransactionSession(pool);
    }

    /**
     * @param pool the session pool whose current transaction's session consumers are bound to
     * @param kafkaProperties Boot's {@code spring.kafka.*} settings: their consumer settings are the consumers' configs
     * @param connectionDetails Boot's Kafka connection details, if there are any: their consumer bootstrap servers,
     *        security protocol and SSL bundle replace those of {@code spring.kafka.*}
     * @param enlistment the enlistment of sessions in the application's own transaction manager, if the starter
     *        joins one: binding a consumer then enlists the transaction's session
     * @return makes transactional (share) consumers for programmatic loops and share listener containers
     */
    @Bean
    @ConditionalOnMissingBean
    public TransactionalConsumerFactory transactionalConsumerFactory(TransactionSessionPool pool,
            KafkaProperties kafkaProperties, ObjectProvider<KafkaConnectionDetails> connectionDetails,
            ObjectProvider<SessionEnlistment> enlistment) {
        Map<String, Object> configs = new HashMap<>(kafkaProperties.buildConsumerProperties());
        KafkaConnectionDetails details = connectionDetails.getIfAvailable();
        if (details != null) {
            KafkaConnectionDetails.Configuration consumer = details.getConsumer();
            configs.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, consumer.getBootstrapServers());
            if (StringUtils.hasLength(consumer.getSecurityProtocol())) {
                configs.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, consumer.getSecurityProtocol());
            }
            SslBundle sslBundle = consumer.getSslBundle();
            if (sslBundle != null) {
                configs.put(SslConfigs.SSL_ENGINE_FACTORY_CLASS_CONFIG, SslBundleSslEngineFactory.class);
                configs.put(SslBundle.class.getName(), sslBundle);
            }
        }
        TransactionalConsumerFactory factory = new TransactionalConsumerFactory(pool, configs);
        // with the application's own transaction manager, binding a consumer enlists the transaction's session
        factory.setEnlistment(enlistment.getIfAvailable());
        return factory;
    }

    static SessionProducerFactory<Object, Object> producerFactory(TransactionSessionPool pool,
            KafkaProperties kafkaProperties, @Nullable KafkaConnectionDetails connectionDetails,
            ObjectProvider<DefaultKafkaProducerFactoryCustomizer> customizers) {
        Map<String, Object> configs = producerConfigs(kafkaProperties, connectionDetails);
        Class<?> keyType = kafkaProperties.getProducer().getKeySerializer();
        Class<?> valueType = kafkaProperties.getProducer().getValueSerializer();
        SessionProducerFactory<Object, Object> factory = new SessionProducerFactory<>(pool,
                serializer(keyType, configs, true), serializer(valueType, configs, false), configs);
        applyCustomizers(factory, configs, customizers);
        return factory;
    }

    /**
     * Boot's {@code DefaultKafkaProducerFactoryCustomizer}s (Micrometer client metrics, the application's own) are
     * written for a {@code DefaultKafkaProducerFactory}: they run on a stand-in one (which makes no producer), and
     * the listeners and post-processors they add are taken over (see {@link SessionProducerFactory} for what each
     * applies to). Other settings a customizer makes on the stand-in have no effect on the sessions; the log says so.
     */
    static void applyCustomizers(SessionProducerFactory<Object, Object> factory, Map<String, Object> configs,
            ObjectProvider<DefaultKafkaProducerFactoryCustomizer> customizers) {
        List<DefaultKafkaProducerFactoryCustomizer> all = customizers.orderedStream().toList();
        if (all.isEmpty()) {
            return;
        }
        DefaultKafkaProducerFactory<Object, Object> standIn = new DefaultKafkaProducerFactory<>(configs);
        all.forEach(c -> c.customize(standIn));
        standIn.getListeners().forEach(factory::addListener);
        standIn.getPostProcessors().forEach(factory::addPostProcessor);
        log.debug("Applied {} DefaultKafkaProducerFactoryCustomizer(s) to the session producer factory: {} "
                + "listener(s), {} post-processor(s) taken over; other settings they make do not apply to sessions",
                all.size(), standIn.getListeners().size(), standIn.getPostProcessors().size());
    }

    @SuppressWarnings("unchecked")
    private static Supplier<Serializer<Object>> serializer(Class<?> type, Map<String, Object> configs, boolean isKey) {
        if (!Serializer.class.isAssignableFrom(type)) {
            throw new IllegalArgumentException("spring.kafka.producer." + (isKey ? "key" : "value") + "-serializer "
                    + type.getName() + " is not an org.apache.kafka.common.serialization.Serializer");
        }
        return () -> {
            Serializer<Object> s = (Serializer<Object>) BeanUtils.instantiateClass(type);
            s.configure(configs, isKey);
            return s;
        };
    }

    /** Producer settings of spring.kafka.* with the connection details applied, as Boot's own factory does. */
    static Map<String, Object> producerConfigs(KafkaProperties kafkaProperties,
            @Nullable KafkaConnectionDetails connectionDetails) {
        Map<String, Object> configs = new HashMap<>(kafkaProperties.buildProducerProperties());
        if (connectionDetails != null) {
            KafkaConnectionDetails.Configuration producer = connectionDetails.getProducer();
            configs.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, producer.getBootstrapServers());
            if (StringUtils.hasLength(producer.getSecurityProtocol())) {
                configs.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, producer.getSecurityProtocol());
            }
            SslBundle sslBundle = producer.getSslBundle();
            if (sslBundle != null) {
                configs.put(SslConfigs.SSL_ENGINE_FACTORY_CLASS_CONFIG, SslBundleSslEngineFactory.class);
                configs.put(SslBundle.class.getName(), sslBundle);
            }
        }
        return configs;
    }

    private static String resolvePrefix(TransactionSessionProperties properties, KafkaProperties kafkaProperties,
            Environment environment) {
        String prefix = properties.getTransactionalIdPrefix();
        if (prefix != null) {
            return prefix;
        }
        String springKafka = kafkaProperties.getProducer().getTransactionIdPrefix();
        if (StringUtils.hasText(springKafka)) {
            return springKafka;
        }
        String application = environment.getProperty("spring.application.name");
        return StringUtils.hasText(application) ? application + "-txn-" : "txn-session-";
    }

    private static void map(Map<String, Object> configs, String key, @Nullable Duration value) {
        if (value != null) {
            // as text: Kafka parses it for the key's own type (transaction.timeout.ms is an int, a Long fails)
            configs.put(key, String.valueOf(value.toMillis()));
        }
    }
}
