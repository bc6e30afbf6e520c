package io.github.txnsession.autoconfigure;

import java.time.Duration;

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

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Auto-configuration of the JDBC two-phase commit, active with {@code kafka.txn-session.jdbc.enabled=true} when the
 * application has a {@link DataSource}. Registers, each only when the application defines none of its own:
 * <ul>
 * <li>{@link DecisionLog} (table {@code kafka.txn-session.jdbc.table}, created at startup unless
 * {@code initialize-schema=false});</li>
 * <li>{@link TwoPhaseRecovery} for the session pool's prefix, run at startup before any session is handed out, told
 * about lost transactions through a {@link LostTransactionHandler} bean if there is one;</li>
 * <li>{@link JdbcTwoPhaseDecision}: the Kafka sessions enlisted in the application's own transaction manager (Boot's
 * JDBC or JPA manager, kept as {@code transactionManager}) write their decision through its connection, so
 * {@code @Transactional} spans the database and Kafka with two-phase commit (see
 * {@link SessionTransactionManagerAutoConfiguration}; without any manager, a {@link JdbcKafkaTransactionManager});</li>
 * <li>with Actuator: health {@code kafkaTxnRecovery} (DOWN while lost transactions are unresolved), endpoint
 * {@code txnsessionrecovery} (read the last report, run recovery on demand) and recovery meters.</li>
 * </ul>
 * A prepared Kafka transaction still times out on the broker after {@code transaction.timeout.ms} (Kafka-native 2PC,
 * KIP-939, is not available on released brokers): in this mode the sessions default to the broker's
 * {@code transaction.max.timeout.ms} (see {@code kafka.txn-session.transaction-timeout}), and startup warns when
 * the timeout leaves recovery little time.
 */
@AutoConfiguration(after = TransactionSessionAutoConfiguration.class,
        afterName = { "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
                "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
                "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration" },
        beforeName = "org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration")
@ConditionalOnClass({ JdbcKafkaTransactionManager.class, JdbcTemplate.class, TransactionSessionPool.class })
@ConditionalOnBooleanProperty(name = "kafka.txn-session.jdbc.enabled")
@ConditionalOnBean(DataSource.class)
@EnableConfigurationProperties(TwoPhaseCommitProperties.class)
@Import(TwoPhaseRecoveryActuatorConfiguration.class)
public class TwoPhaseCommitAutoConfiguration {

    private static final Logger log = LoggerFactory.getLogger(TwoPhaseCommitAutoConfiguration.class);

    /** Transaction timeouts below this leave recovery after a crash little time; startup warns. */
    static final Duration SHORT_TIMEOUT = Duration.ofMinutes(5);

    /** @return the decision log table */
    @Bean
    @ConditionalOnMissingBean
    public DecisionLog decisionLog(TwoPhaseCommitProperties properties) {
        return new DecisionLog(properties.getTable());
    }

    /** @return recovery for the pool's prefix */
    @Bean
    @ConditionalOnMissingBean
    public TwoPhaseRecovery twoPhaseRecovery(DataSource dataSource, DecisionLog decisionLog,
            TransactionSessionPool pool, ObjectProvider<LostTransactionHandler> lostHandler) {
        return new TwoPhaseRecovery(dataSource, decisionLog, pool, lostHandler.getIfAvailable());
    }

    /**
     * @return the decision log as the sessions enlisted in the application's transaction manager use it (see
     *         {@link SessionTransactionManagerAutoConfiguration}); sets recovery as the pool's in-doubt resolver
     */
    @Bean
    @ConditionalOnMissingBean(TwoPhaseDecision.class)
    public JdbcTwoPhaseDecision jdbcTwoPhaseDecision(DataSource dataSource, DecisionLog decisionLog,
            TwoPhaseRecovery recovery, TransactionSessionPool pool) {
        pool.setInDoubtResolver(recovery::recoverTransactionalId);
        return new JdbcTwoPhaseDecision(dataSource, decisionLog, recovery);
    }

    /** @return creates the table and recovers at startup, before listener containers start */
    @Bean
    public SmartInitializingSingleton twoPhaseCommitStartup(TwoPhaseCommitProperties properties, DataSource dataSource,
            DecisionLog decisionLog, TwoPhaseRecovery recovery, TransactionSessionPool pool,
            ObjectProvider<PlatformTransactionManager> transactionManagers,
            ObjectProvider<SessionProducerFactory<?, ?>> producerFactories) {
        return () -> {
            checkTwoPhaseIsInEffect(transactionManagers, producerFactories);
            if (properties.isInitializeSchema()) {
                decisionLog.createTableIfMissing(dataSource);
            }
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
}
