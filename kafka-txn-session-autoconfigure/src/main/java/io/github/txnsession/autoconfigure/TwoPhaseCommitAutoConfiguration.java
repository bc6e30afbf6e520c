package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.Locale;

import javax.sql.DataSource;

import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.TwoPhaseDecision;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager;
import io.github.txnsession.spring.jdbc.JdbcTwoPhaseDecision;
import io.github.txnsession.spring.jdbc.LostTransactionHandler;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.init.DataSourceScriptDatabaseInitializer;
import org.springframework.boot.sql.autoconfigure.init.OnDatabaseInitializationCondition;
import org.springframework.boot.sql.init.DatabaseInitializationMode;
import org.springframework.boot.sql.init.dependency.DatabaseInitializationDependencyConfigurer;
import org.springframework.boot.sql.init.dependency.DependsOnDatabaseInitialization;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Import;
import org.springframework.core.type.AnnotatedTypeMetadata;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Auto-configuration of the JDBC two-phase commit, active with {@code kafka.txn-session.jdbc.enabled=true} when the
 * application has a {@link DataSource}. Registers, each only when the application defines none of its own:
 * <ul>
 * <li>{@link DecisionLog} (table {@code kafka.txn-session.jdbc.table});</li>
 * <li>{@link DecisionLogDataSourceScriptDatabaseInitializer}, Boot's kind of schema initializer for the table:
 * {@code kafka.txn-session.jdbc.initialize-schema} {@code always} (default: the shipped scripts are idempotent),
 * {@code embedded} or {@code never} (Flyway, Liquibase or a DBA create the table: nothing is run, no fallback);
 * Boot's database initialization ordering runs it after Flyway and Liquibase, and the beans that use the table
 * ({@link TwoPhaseRecovery}, {@link JdbcTwoPhaseDecision}) after it;</li>
 * <li>{@link TwoPhaseRecovery} for the session pool's prefix, run at startup before any session is handed out, told
 * about lost transactions through a {@link LostTransactionHandler} bean if there is one;</li>
 * <li>{@link JdbcTwoPhaseDecision}: the Kafka sessions enlisted in the application's own transaction manager (Boot's
 * JDBC or JPA manager, kept as {@code transactionManager}) write their decision through its connection, so
 * {@code @Transactional} spans the database and Kafka with two-phase commit (see
 * {@link SessionTransactionManagerAutoConfiguration}; without any manager, a {@link JdbcKafkaTransactionManager});</li>
 * <li>with Actuator: health {@code kafkaTxnRecovery} (DOWN while lost transactions are unresolved), endpoint
 * {@code txnsessionrecovery} (read the last report, run recovery on demand; registered when available, i.e. exposed,
 * as Boot does for its own endpoints) and recovery meters ({@link TwoPhaseRecoveryMetrics}).</li>
 * </ul>
 * A prepared Kafka transaction still times out on the broker after {@code transaction.timeout.ms} (Kafka-native 2PC,
 * KIP-939, is not available on released brokers): in this mode the sessions default to the broker's
 * {@code transaction.max.timeout.ms} (see {@code kafka.txn-session.transaction-timeout}), and startup warns when
 * the timeout leaves recovery little time.
 *
 * <p>Needs Spring Boot's JDBC support ({@code spring-boot-jdbc}, which also auto-configures the {@code DataSource}).
 */
@AutoConfiguration(after = TransactionSessionAutoConfiguration.class,
        afterName = { "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
                "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
                "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration" },
        beforeName = "org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration")
@ConditionalOnClass({ JdbcKafkaTransactionManager.class, JdbcTemplate.class, TransactionSessionPool.class,
        DataSourceScriptDatabaseInitializer.class })
@ConditionalOnBooleanProperty(name = "kafka.txn-session.jdbc.enabled")
@ConditionalOnBean(DataSource.class)
@EnableConfigurationProperties(TwoPhaseCommitProperties.class)
@Import({ DatabaseInitializationDependencyConfigurer.class, TwoPhaseRecoveryActuatorConfiguration.class })
public final class TwoPhaseCommitAutoConfiguration {

    private static final Logger log = LoggerFactory.getLogger(TwoPhaseCommitAutoConfiguration.class);

    /** Transaction timeouts below this leave recovery after a crash little time; startup warns. */
    static final Duration SHORT_TIMEOUT = Duration.ofMinutes(5);

    /**
     * @param properties the {@code kafka.txn-session.jdbc.*} settings: {@code table} names the table
     * @return the decision log table
     */
    @Bean
    @ConditionalOnMissingBean
    public DecisionLog decisionLog(TwoPhaseCommitProperties properties) {
        return new DecisionLog(properties.getTable());
    }

    /**
     * @param dataSource the application's database, where the table is created
     * @param properties the {@code kafka.txn-session.jdbc.*} settings: table, schema script, platform, mode and
     *        whether to continue on error
     * @return creates or migrates the decision log table, as {@code kafka.txn-session.jdbc.initialize-schema} says
     *         (no bean with {@code never})
     */
    @Bean
    @ConditionalOnMissingBean
    @Conditional(OnDecisionLogInitializationCondition.class)
    public DecisionLogDataSourceScriptDatabaseInitializer decisionLogDataSourceScriptDatabaseInitializer(
            DataSource dataSource, TwoPhaseCommitProperties properties) {
        return new DecisionLogDataSourceScriptDatabaseInitializer(dataSource, properties);
    }

    /**
     * @param dataSource the application's database, which holds the decision log
     * @param decisionLog the decision log table
     * @param pool the session pool to recover for: its prefix, size and client configs, and its live sessions are
     *        left alone
     * @param lostHandler the {@link LostTransactionHandler} bean, if there is one, told about lost transactions
     * @return recovery for the pool's prefix; created after the database initializers (the table exists)
     */
    @Bean
    @ConditionalOnMissingBean
    @DependsOnDatabaseInitialization
    public TwoPhaseRecovery twoPhaseRecovery(DataSource dataSource, DecisionLog decisionLog,
            TransactionSessionPool pool, ObjectProvider<LostTransactionHandler> lostHandler) {
        // over a fleet pool it also becomes the pool's FleetIdSettler (settle and initialize under the key)
        return new TwoPhaseRecovery(dataSource, decisionLog, pool, lostHandler.getIfAvailable());
    }

    /**
     * @param dataSource the application's database: decisions are written through its transaction's connection
     * @param decisionLog the decision log table
     * @param recovery recovery of the pool: settles failed completions and in-doubt slots
     * @param pool the session pool, whose in-doubt resolver is set to {@code recovery}
     * @return the decision log as the sessions enlisted in the application's transaction manager use it (see
     *         {@link SessionTransactionManagerAutoConfiguration}); sets recovery as the pool's in-doubt resolver
     */
    @Bean
    @ConditionalOnMissingBean(TwoPhaseDecision.class)
    @DependsOnDatabaseInitialization
    public JdbcTwoPhaseDecision jdbcTwoPhaseDecision(DataSource dataSource, DecisionLog decisionLog,
            TwoPhaseRecovery recovery, TransactionSessionPool pool) {
        pool.setInDoubtResolver(recovery::recoverTransactionalId);
        return new JdbcTwoPhaseDecision(dataSource, decisionLog, recovery);
    }

    /**
     * @return gives the session pool, as soon as it is created, a gate that runs startup recovery before its first
     *         session is lent (unless {@code recover-on-startup=false}): a send from a {@code @PostConstruct} method,
     *         before any other two-phase bean exists, must not initialize an id whose prepared transaction a decision
     *         says to commit. Recovery is looked up at the first acquire.
     */
    @Bean
    static BeanPostProcessor twoPhaseSessionPoolGate(ObjectProvider<TwoPhaseRecovery> recovery,
            ObjectProvider<TwoPhaseCommitProperties> properties) {
        return new BeanPostProcessor() {
            @Override
            public Object postProcessAfterInitialization(Object bean, String beanName) {
                if (bean instanceof TransactionSessionPool pool) {
                    TwoPhaseCommitProperties settings = properties.getIfAvailable();
                    if (settings == null || settings.isRecoverOnStartup()) {
                        pool.setAcquireGate(() -> {
                            TwoPhaseRecovery r = recovery.getIfUnique();
                            if (r != null && r.transactionalIdPrefix().equals(pool.transactionalIdPrefix())) {
                                r.ensureStartupRun();
                            }
                        });
                    }
                }
                return bean;
            }
        };
    }

    /**
     * @param dataSource the application's database; a dependency only, so that it is closed after this bean
     * @param pool the session pool whose background work is awaited (at most
     *        {@link TransactionSessionPool#BACKGROUND_DRAIN_TIMEOUT})
     * @return waits, when the context closes, for the pool's background work (decision rows cleared, Kafka commits
     *         completed in the background) while the {@code DataSource} is still open: it depends on both, so it is
     *         destroyed before either
     */
    @Bean
    public DisposableBean transactionSessionBackgroundDrain(DataSource dataSource, TransactionSessionPool pool) {
        return () -> {
            if (!pool.awaitBackgroundWork(TransactionSessionPool.BACKGROUND_DRAIN_TIMEOUT)) {
                log.warn("The transaction session pool's background work did not finish within {} s of shutdown; "
                        + "recovery settles what it left at the next start",
                        TransactionSessionPool.BACKGROUND_DRAIN_TIMEOUT.toSeconds());
            }
        };
    }

    /**
     * @param properties the {@code kafka.txn-session.jdbc.*} settings: {@code recover-on-startup}
     * @param recovery recovery of the pool, run unless {@code recover-on-startup} is false
     * @param pool the session pool, whose transaction timeout is checked (a short one is warned about)
     * @param transactionManagers the transaction manager beans: startup fails unless one of them is a
     *        {@link JdbcKafkaTransactionManager} or a producer factory enlists (else two-phase commit is not in effect)
     * @param producerFactories the session-backed producer factory beans, checked for one that enlists its sessions in
     *        the application's transactions
     * @return recovers at startup, before listener containers start (the table was created or migrated by then:
     *         {@link DecisionLogDataSourceScriptDatabaseInitializer})
     */
    @Bean
    public SmartInitializingSingleton twoPhaseCommitStartup(TwoPhaseCommitProperties properties,
            TwoPhaseRecovery recovery, TransactionSessionPool pool,
            ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<SessionProducerFactory<?, ?>> producerFactories) {
        return () -> {
            checkTwoPhaseIsInEffect(transactionManagers, producerFactories);
            warnIfTimeoutIsShort(pool);
            if (properties.isRecoverOnStartup()) {
                recovery.ensureRecovered();
            }
        };
    }

    /**
     * {@code jdbc.enabled=true} promises two-phase commit: fail at startup when another setup took its place (an
     * application {@code KafkaAwareTransactionManager} such as Boot's {@code KafkaTransactionManager}, or producer
     * factories without the enlistment), instead of committing best effort without a word.
     */
    private static void checkTwoPhaseIsInEffect(ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<SessionProducerFactory<?, ?>> producerFactories) {
        boolean oneManager = transactionManagers.orderedStream().anyMatch(JdbcKafkaTransactionManager.class::isInstance);
        boolean enlisting = producerFactories.orderedStream().anyMatch(f -> f.getEnlistment() != null);
        if (!oneManager && !enlisting) {
            throw new IllegalStateException("kafka.txn-session.jdbc.enabled=true asks for two-phase commit between the "
                    + "database and Kafka, but it is not in effect: no session-backed producer factory enlists in the "
                    + "application's transaction manager (an application KafkaAwareTransactionManager, e.g. a "
                    + "KafkaTransactionManager bean, or an own SessionEnlistment bean turns it off). Remove that bean, "
                    + "or set kafka.txn-session.jdbc.enabled=false for best effort.");
        }
    }

    private static void warnIfTimeoutIsShort(TransactionSessionPool pool) {
        Object configured = pool.sessionConfigs().get(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG);
        long timeoutMs = configured == null ? 60_000 : Long.parseLong(configured.toString());
        if (timeoutMs < SHORT_TIMEOUT.toMillis()) {
            log.warn("Two-phase commit with transaction.timeout.ms={}: after a crash between the database commit and "
                    + "the Kafka commit, recovery must run within {} ms or the Kafka side is lost (reported, never "
                    + "silent). Set kafka.txn-session.transaction-timeout closer to the broker's "
                    + "transaction.max.timeout.ms (15 minutes by default).", timeoutMs, timeoutMs);
        }
    }

    /**
     * Boot's condition for a database initializer bean: none with {@code initialize-schema=never}. A value that is no
     * mode (such as {@code true} or {@code false}, the boolean of earlier versions) matches, so that binding the
     * properties fails with Boot's message naming the property and the valid values.
     */
    static final class OnDecisionLogInitializationCondition extends OnDatabaseInitializationCondition {

        private static final String PROPERTY = TwoPhaseCommitProperties.PREFIX + ".initialize-schema";

        OnDecisionLogInitializationCondition() {
            super("Kafka transaction session decision log", PROPERTY);
        }

        @Override
        public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
            String value = context.getEnvironment().getProperty(PROPERTY);
            if (value != null && !isMode(value.trim())) {
                return ConditionOutcome.match(PROPERTY + " is '" + value + "', not a mode: binding reports it");
            }
            return super.getMatchOutcome(context, metadata);
        }

        private static boolean isMode(String value) {
            for (DatabaseInitializationMode mode : DatabaseInitializationMode.values()) {
                if (mode.name().equals(value.toUpperCase(Locale.ENGLISH))) {
                    return true;
                }
            }
            return false;
        }
    }
}
