package io.github.txnsession.autoconfigure;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import javax.sql.DataSource;

import io.github.txnsession.spring.CommitPhaseListener;
import io.github.txnsession.spring.DatabaseSessionTransactionManager;
import io.github.txnsession.spring.SessionAfterRollbackProcessor;
import io.github.txnsession.spring.SessionCommitPoint;
import io.github.txnsession.spring.SessionEnlistment;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.SessionTransactionObserver;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.TwoPhaseDecision;
import io.github.txnsession.spring.jdbc.DecisionLog;
import io.github.txnsession.spring.jdbc.JdbcKafkaTransactionManager;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanPostProcessor;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.BeanDefinitionRegistryPostProcessor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigureOrder;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.kafka.autoconfigure.DefaultKafkaProducerFactoryCustomizer;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaConnectionDetails;
import org.springframework.boot.kafka.autoconfigure.KafkaProperties;
import org.springframework.boot.transaction.autoconfigure.TransactionManagerCustomizers;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.kafka.config.AbstractKafkaListenerContainerFactory;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.AbstractPlatformTransactionManager;

/**
 * Which transaction manager runs {@code @Transactional}, decided after the application's own database managers
 * (Boot's {@code JdbcTransactionManager} and {@code JpaTransactionManager} are configured first):
 * <ul>
 * <li><b>The application has a transaction manager</b> (Boot's JDBC or JPA one, or its own): it stays the
 * {@code transactionManager}. A Kafka session is <em>enlisted</em> in its transactions ({@link SessionEnlistment}):
 * best effort by default (Kafka commits right after the database), two-phase with
 * {@code kafka.txn-session.jdbc.enabled=true} (the decision row commits with the database, recovery completes Kafka
 * after a crash). {@code @KafkaListener} containers get a {@link DatabaseSessionTransactionManager} over the same
 * manager, so consumed offsets, database writes and sends commit together. Adding the starter never takes the
 * database out of the application's transactions.</li>
 * <li><b>No transaction manager, no database</b>: {@link SessionTransactionManager} {@code sessionTransactionManager}
 * is the transaction manager (Kafka only).</li>
 * <li><b>Two-phase mode with a {@code DataSource} but no manager</b> (Boot's JDBC auto-configuration absent):
 * {@link JdbcKafkaTransactionManager} spans the {@code DataSource} and Kafka.</li>
 * <li>An application {@code KafkaAwareTransactionManager} is used as it is.</li>
 * </ul>
 * The managers it creates are customized like Boot's own ({@code spring.transaction.*} through
 * {@code TransactionManagerCustomizers}); {@code kafka.txn-session.default-timeout}, when set, wins.
 */
@AutoConfiguration(after = { TransactionSessionAutoConfiguration.class, TwoPhaseCommitAutoConfiguration.class },
        afterName = { "org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration",
                "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration" },
        before = KafkaAutoConfiguration.class,
        beforeName = "org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration")
@AutoConfigureOrder(Ordered.LOWEST_PRECEDENCE) // after unrelated auto-configurations that may add a manager
@ConditionalOnClass({ SessionTransactionManager.class, KafkaAwareTransactionManager.class })
@ConditionalOnBooleanProperty(name = "kafka.txn-session.enabled", matchIfMissing = true)
@ConditionalOnBean(TransactionSessionPool.class)
public final class SessionTransactionManagerAutoConfiguration {

    private static final Logger log = LoggerFactory.getLogger(SessionTransactionManagerAutoConfiguration.class);

    /** The bean Boot's Kafka auto-configuration adds when {@code spring.kafka.producer.transaction-id-prefix} is set. */
    static final String BOOTS_KAFKA_TRANSACTION_MANAGER = "kafkaTransactionManager";

    /**
     * With {@code spring.kafka.producer.transaction-id-prefix} set (how transactional applications are configured
     * without the starter), Boot adds its own {@code KafkaTransactionManager}: next to the session manager it would
     * make {@code @Transactional} ambiguous, and next to the application's database manager it would split a
     * transaction into two. The sessions take its place (the property becomes their transactional id prefix), so
     * its definition is removed, and the log says so.
     *
     * @return the post-processor removing Boot's {@code kafkaTransactionManager} definition
     */
    @Bean
    static BeanDefinitionRegistryPostProcessor sessionsReplaceBootsKafkaTransactionManager() {
        return new BeanDefinitionRegistryPostProcessor() {
            @Override
            public void postProcessBeanDefinitionRegistry(BeanDefinitionRegistry registry) {
                if (registry.containsBeanDefinition(BOOTS_KAFKA_TRANSACTION_MANAGER)
                        && KafkaAutoConfiguration.class.getName().equals(registry
                            .getBeanDefinition(BOOTS_KAFKA_TRANSACTION_MANAGER).getFactoryBeanName())) {
                    registry.removeBeanDefinition(BOOTS_KAFKA_TRANSACTION_MANAGER);
                    log.info("spring.kafka.producer.transaction-id-prefix is set: the Kafka transaction sessions "
                            + "replace Boot's KafkaTransactionManager (the prefix is the sessions' transactional id "
                            + "prefix unless kafka.txn-session.transactional-id-prefix is set)");
                }
            }

            @Override
            public void postProcessBeanFactory(ConfigurableListableBeanFactory beanFactory) {
                // nothing: the registry callback did the work
            }
        };
    }

    /**
     * What listener containers do after a session transaction rolled back, unless the application defines an
     * {@code AfterRollbackProcessor} bean (Boot's container factory takes the unique one): redeliver without limit
     * while Kafka or the database is unavailable, give a record up after 10 deliveries only on a record failure, and
     * not redeliver records whose transaction committed after all (when the container commits the offsets in the
     * transaction, its default). spring-kafka's default gives any record up after 10 deliveries, which loses its
     * output under a long enough outage.
     *
     * @return the starter's after-rollback processor
     */
    @Bean
    @ConditionalOnMissingBean(AfterRollbackProcessor.class)
    SessionAfterRollbackProcessor<Object, Object> sessionAfterRollbackProcessor() {
        return new SessionAfterRollbackProcessor<>();
    }

    /**
     * Warns at startup about listener containers whose failures would not reach the after-rollback processor (an
     * application {@code CommonErrorHandler}, a container factory built without Boot's configurer).
     *
     * @return the check, run when the context is refreshed
     */
    @Bean
    static ListenerFailureHandlingCheck sessionListenerFailureHandlingCheck() {
        return new ListenerFailureHandlingCheck();
    }

    /**
     * The session-backed producer factory of {@code pool}, after checking that the application defines no
     * {@code ProducerFactory} that would send around the sessions.
     *
     * @throws ForeignProducerFactoryException naming the other factories (see
     *         {@code kafka.txn-session.allow-non-session-producer-factories})
     */
    @SuppressWarnings({ "unchecked", "rawtypes" })
    static SessionProducerFactory<Object, Object> sessionProducerFactory(TransactionSessionPool pool,
            ListableBeanFactory beans, TransactionSessionProperties properties) {
        Map<String, ProducerFactory> factories = beans.getBeansOfType(ProducerFactory.class);
        List<String> foreign = new ArrayList<>();
        SessionProducerFactory<Object, Object> ours = null;
        for (Map.Entry<String, ProducerFactory> e : factories.entrySet()) {
            if (e.getValue() instanceof SessionProducerFactory<?, ?> f && f.getPool() == pool) {
                ours = ours == null ? (SessionProducerFactory<Object, Object>) f : ours;
            }
            else {
                foreign.add(e.getKey());
            }
        }
        if (!foreign.isEmpty() && !properties.isAllowNonSessionProducerFactories()) {
            throw new ForeignProducerFactoryException(foreign);
        }
        if (ours == null) {
            // the application's own factories are deliberately non-transactional: the sessions get a factory of
            // their own (not a bean), from spring.kafka.producer.*
            ours = TransactionSessionAutoConfiguration.producerFactory(pool, beans.getBean(KafkaProperties.class),
                    beans.getBeanProvider(KafkaConnectionDetails.class).getIfAvailable(),
                    beans.getBeanProvider(DefaultKafkaProducerFactoryCustomizer.class));
        }
        return ours;
    }

    /** Kafka only: no transaction manager and no two-phase database. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnMissingBean({ PlatformTransactionManager.class, TwoPhaseDecision.class })
    static class KafkaOnly {

        @Bean
        SessionTransactionManager sessionTransactionManager(TransactionSessionPool pool, ListableBeanFactory beans,
                TransactionSessionProperties properties, ObjectProvider<SessionTransactionObserver> observers,
                ObjectProvider<TransactionManagerCustomizers> customizers) {
            SessionTransactionManager manager = new SessionTransactionManager(pool,
                    sessionProducerFactory(pool, beans, properties));
            customizers.ifAvailable(c -> c.customize(manager)); // spring.transaction.*, as for Boot's own managers
            if (properties.getDefaultTimeout() != null) {
                manager.setDefaultTimeout((int) Math.max(1, properties.getDefaultTimeout().toSeconds()));
            }
            manager.setObservers(observers.orderedStream().toList());
            return manager;
        }
    }

    /** Two-phase mode with a DataSource but no transaction manager to join: one manager for both. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(JdbcKafkaTransactionManager.class)
    @ConditionalOnBean({ TwoPhaseDecision.class, DataSource.class })
    @ConditionalOnMissingBean(PlatformTransactionManager.class)
    static class JdbcTwoPhaseWithoutManager {

        @Bean
        JdbcKafkaTransactionManager transactionManager(TransactionSessionPool pool, ListableBeanFactory beans,
                DataSource dataSource, DecisionLog decisionLog, TwoPhaseRecovery recovery,
                TransactionSessionProperties properties, ObjectProvider<CommitPhaseListener> phaseListeners,
                ObjectProvider<SessionTransactionObserver> observers,
                ObjectProvider<TransactionManagerCustomizers> customizers) {
            JdbcKafkaTransactionManager manager = new JdbcKafkaTransactionManager(pool,
                    sessionProducerFactory(pool, beans, properties), dataSource, decisionLog, recovery);
            customizers.ifAvailable(c -> c.customize(manager));
            if (properties.getDefaultTimeout() != null) {
                manager.setDefaultTimeout((int) Math.max(1, properties.getDefaultTimeout().toSeconds()));
            }
            manager.setCommitPhaseListeners(phaseListeners.orderedStream().toList());
            manager.setObservers(observers.orderedStream().toList());
            return manager;
        }
    }

    /** The application has its own transaction manager: enlist sessions in it. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnBean(PlatformTransactionManager.class)
    @ConditionalOnMissingBean(KafkaAwareTransactionManager.class)
    static class JoinTheApplicationsManager {

        @Bean
        @ConditionalOnMissingBean
        SessionEnlistment sessionEnlistment(TransactionSessionPool pool, ListableBeanFactory beans,
                TransactionSessionProperties properties, ObjectProvider<TwoPhaseDecision> twoPhase,
                ObjectProvider<SessionTransactionObserver> observers,
                ObjectProvider<CommitPhaseListener> phaseListeners,
                ObjectProvider<TwoPhaseCommitProperties> twoPhaseProperties) {
            SessionEnlistment enlistment = new SessionEnlistment(pool, twoPhase.getIfAvailable());
            TwoPhaseCommitProperties jdbc = twoPhaseProperties.getIfAvailable();
            enlistment.setCompleteInBackground(jdbc != null && jdbc.isCompleteInBackground());
            enlistment.setDecisionAlongsidePrepare(jdbc != null && jdbc.isDecisionAlongsidePrepare());
            enlistment.setObservers(observers.orderedStream().toList());
            enlistment.setCommitPhaseListeners(phaseListeners.orderedStream().toList());
            sessionProducerFactory(pool, beans, properties).setEnlistment(enlistment);
            // every session-backed factory of the pool enlists: one left out would run a Kafka transaction of its own,
            // committed after the database's, even in two-phase mode
            for (SessionProducerFactory<?, ?> factory : beans.getBeansOfType(SessionProducerFactory.class).values()) {
                if (factory.getPool() == pool) {
                    factory.setEnlistment(enlistment);
                }
            }
            log.info("Kafka transaction sessions join the application's transaction manager: {} mode",
                    twoPhase.getIfAvailable() == null ? "best-effort" : "two-phase");
            return enlistment;
        }

        /**
         * Not a candidate for injection by type: {@code @Transactional} keeps resolving the application's manager.
         * Listener containers get it from {@link #listenerContainerTransactions}.
         */
        @Bean(autowireCandidate = false)
        DatabaseSessionTransactionManager kafkaListenerTransactionManager(
                ObjectProvider<PlatformTransactionManager> applicationManager, SessionEnlistment enlistment,
                ListableBeanFactory beans, TransactionSessionProperties properties) {
            return new DatabaseSessionTransactionManager(applicationManager.getObject(), enlistment,
                    sessionProducerFactory(enlistment.getPool(), beans, properties));
        }

        /**
         * The application's transaction managers prepare enlisted sessions after every other {@code beforeCommit}
         * callback ({@link SessionCommitPoint}): sends from {@code BEFORE_COMMIT} event listeners join the
         * transaction, and the two-phase decision covers them.
         */
        @Bean
        static BeanPostProcessor sessionCommitPointOnTransactionManagers() {
            return new BeanPostProcessor() {
                @Override
                public Object postProcessAfterInitialization(Object bean, String beanName) {
                    // imperative managers only (not reactive ones), and not JTA's (it releases JDBC connections
                    // in beforeCompletion, before the commit point runs)
                    if (bean instanceof AbstractPlatformTransactionManager manager
                            && !(bean instanceof KafkaAwareTransactionManager<?, ?>)
                            && !bean.getClass().getName().startsWith("org.springframework.transaction.jta.")
                            && !manager.getTransactionExecutionListeners().contains(SessionCommitPoint.LISTENER)) {
                        manager.addListener(SessionCommitPoint.LISTENER);
                    }
                    return bean;
                }
            };
        }

        /** Listener container factories without a transaction manager run on the application's, with a session. */
        @Bean
        @SuppressWarnings("unchecked")
        static BeanPostProcessor listenerContainerTransactions(BeanFactory beanFactory) {
            return new BeanPostProcessor() {
                @Override
                public Object postProcessAfterInitialization(Object bean, String beanName) {
                    if (!(bean instanceof AbstractKafkaListenerContainerFactory<?, ?, ?> factory)
                            || factory.getContainerProperties().getKafkaAwareTransactionManager() != null) {
                        return bean;
                    }
                    PlatformTransactionManager plain = factory.getContainerProperties().getTransactionManager();
                    DatabaseSessionTransactionManager ours = beanFactory.getBean("kafkaListenerTransactionManager",
                            DatabaseSessionTransactionManager.class);
                    if (plain != null && plain != ours.getDatabaseTransactionManager()) {
                        // a container given another plain manager: its offsets must still go into the session
                        ours = new DatabaseSessionTransactionManager(plain, beanFactory.getBean(
                                SessionEnlistment.class), (SessionProducerFactory<Object, Object>) ours
                                    .getProducerFactory());
                    }
                    factory.getContainerProperties().setTransactionManager(null);
                    factory.getContainerProperties().setKafkaAwareTransactionManager(ours);
                    return bean;
                }
            };
        }
    }
}
