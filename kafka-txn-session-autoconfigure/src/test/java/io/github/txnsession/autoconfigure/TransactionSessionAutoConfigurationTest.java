package io.github.txnsession.autoconfigure;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.TimeUnit;

import javax.sql.DataSource;

import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionCommitPoint;
import io.github.txnsession.spring.SessionProducerFactory;
import io.github.txnsession.spring.SessionTransactionManager;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.TransactionSessionProxy;
import io.github.txnsession.spring.TransactionalConsumerFactory;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.task.TaskExecutionAutoConfiguration;
import org.springframework.boot.kafka.autoconfigure.KafkaAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.task.TaskDecorator;
import org.springframework.jdbc.datasource.SimpleDriverDataSource;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.transaction.PlatformTransactionManager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

/**
 * The auto-configuration's beans, conditions and property validation. No broker is needed: the pool creates
 * sessions lazily, at the first transaction.
 */
class TransactionSessionAutoConfigurationTest {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(TransactionSessionAutoConfiguration.class,
                SessionTransactionManagerAutoConfiguration.class, KafkaAutoConfiguration.class,
                TransactionAutoConfiguration.class))
        .withPropertyValues("spring.kafka.bootstrap-servers=localhost:1");

    @Test
    void isRegisteredForBootToDiscover() throws Exception {
        var imports = getClass().getClassLoader().getResources(
                "META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports");
        StringBuilder all = new StringBuilder();
        while (imports.hasMoreElements()) {
            try (var in = imports.nextElement().openStream()) {
                all.append(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
            }
        }
        assertThat(all.toString()).contains(TransactionSessionAutoConfiguration.class.getName());
    }

    /**
     * The pool's background work runs on an executor of its own built with Boot's ThreadPoolTaskExecutorBuilder: the
     * application's task decorator applies, and Boot's applicationTaskExecutor does not back off.
     */
    @Test
    void backgroundWorkRunsOnAnExecutorBuiltByBootWithTheApplicationsTaskDecorator() {
        this.runner.withConfiguration(AutoConfigurations.of(TaskExecutionAutoConfiguration.class))
            .withBean(TaskDecorator.class, () -> task -> () -> {
                DECORATED.set(true);
                try {
                    task.run();
                }
                finally {
                    DECORATED.remove();
                }
            })
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(context).hasBean("applicationTaskExecutor");
                TransactionSessionPool pool = context.getBean(TransactionSessionPool.class);
                CompletableFuture<String> ran = new CompletableFuture<>();
                pool.runInBackground(() -> ran.complete(Thread.currentThread().getName() + " decorated="
                        + Boolean.TRUE.equals(DECORATED.get())));
                assertThat(ran.get(10, TimeUnit.SECONDS)).matches("txn-session-\\d+ decorated=true");
            });
    }

    private static final ThreadLocal<Boolean> DECORATED = new ThreadLocal<>();

    @Test
    void registersThePoolTheFactoryTheManagerAndTheCurrentSession() {
        this.runner.withPropertyValues("kafka.txn-session.transactional-id-prefix=orders-",
                "kafka.txn-session.pool-size=3", "kafka.txn-session.transaction-timeout=20s",
                "kafka.txn-session.default-timeout=7s", "kafka.txn-session.properties.linger.ms=5")
            .run(context -> {
                assertThat(context).hasNotFailed();
                TransactionSessionPool pool = context.getBean(TransactionSessionPool.class);
                assertThat(pool.transactionalIdPrefix()).isEqualTo("orders-");
                assertThat(pool.size()).isEqualTo(3);
                assertThat(pool.snapshot().initialized()).isZero(); // lazy: nothing connected yet
                assertThat(pool.sessionConfigs()).containsEntry("transaction.timeout.ms", "20000")
                    .containsEntry("linger.ms", "5")
                    .containsEntry("bootstrap.servers", List.of("localhost:1"));
                assertThat(context).hasSingleBean(SessionProducerFactory.class);
                assertThat(context.getBean(ProducerFactory.class)).isInstanceOf(SessionProducerFactory.class);
                assertThat(context.getBean(KafkaTemplate.class).getProducerFactory())
                    .isSameAs(context.getBean(ProducerFactory.class));
                SessionTransactionManager manager = context.getBean(SessionTransactionManager.class);
                assertThat(context.getBean(PlatformTransactionManager.class)).isSameAs(manager);
                assertThat(manager.getDefaultTimeout()).isEqualTo(7);
                assertThat(manager.getProducerFactory()).isSameAs(context.getBean(ProducerFactory.class));
                assertThat(context).hasSingleBean(CurrentTransactionSession.class);
                assertThat(context).hasSingleBean(TransactionSession.class);
                TransactionSession session = context.getBean(TransactionSession.class);
                assertThat(TransactionSessionProxy.isProxy(session)).isTrue();
                assertThat(session.toString()).contains(pool.toString()).contains("no transaction");
                assertThatIllegalStateException().isThrownBy(session::transactionalId)
                    .withMessageContaining("No transaction session is bound");
                // the proxy refuses close(): Spring must not call it at shutdown (the pool closes the sessions)
                assertThat(context.getBeanFactory().getBeanDefinition("transactionSession").getDestroyMethodName())
                    .isNullOrEmpty();
                assertThat(context).hasSingleBean(TransactionalConsumerFactory.class);
                assertThat(context).hasSingleBean(TransactionSessionHealthIndicator.class);
                assertThat(context).hasSingleBean(TransactionSessionMetrics.class);
            });
    }

    @Test
    void prefixDefaultsToTheApplicationName() {
        this.runner.withPropertyValues("spring.application.name=billing")
            .run(context -> assertThat(context.getBean(TransactionSessionPool.class).transactionalIdPrefix())
                .isEqualTo("billing-txn-"));
    }

    @Test
    void emptyPrefixFailsNamingTheProperty() {
        this.runner.withPropertyValues("kafka.txn-session.transactional-id-prefix=")
            .run(context -> assertFailureNames(context, "kafka.txn-session.transactional-id-prefix"));
    }

    @Test
    void poolSizeZeroFailsNamingTheProperty() {
        this.runner.withPropertyValues("kafka.txn-session.pool-size=0")
            .run(context -> assertFailureNames(context, "kafka.txn-session.pool-size"));
    }

    @Test
    void valuesOfTheWrongTypeFailNamingTheProperty() {
        this.runner.withPropertyValues("kafka.txn-session.pool-size=many")
            .run(context -> assertFailureNames(context, "kafka.txn-session.pool-size"));
        this.runner.withPropertyValues("kafka.txn-session.acquire-timeout=soon")
            .run(context -> assertFailureNames(context, "kafka.txn-session.acquire-timeout"));
    }

    @Test
    void negativeDurationsAndAFixedTransactionalIdFail() {
        this.runner.withPropertyValues("kafka.txn-session.heartbeat-interval=-1s")
            .run(context -> assertFailureNames(context, "kafka.txn-session.heartbeat-interval"));
        this.runner.withPropertyValues("kafka.txn-session.properties[transactional.id]=fixed")
            .run(context -> assertFailureNames(context, "kafka.txn-session.properties.transactional.id"));
    }

    @Test
    void kafkaSettingsThatBreakTransactionsFailAtStartup() {
        this.runner.withPropertyValues("kafka.txn-session.properties.acks=1")
            .run(context -> assertFailureNames(context, "acks"));
    }

    @Test
    void userBeansReplaceOurs() {
        this.runner.withUserConfiguration(UserBeans.class).run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(TransactionSessionPool.class)).isSameAs(context.getBean("userPool"));
            assertThat(context.getBean(SessionTransactionManager.class)).isSameAs(context.getBean("userManager"));
            assertThat(context.getBean(CurrentTransactionSession.class)).isSameAs(context.getBean("userCurrent"));
            assertThat(context.getBean(TransactionSession.class)).isSameAs(context.getBean("userSession"));
            assertThat(context.getBean(ProducerFactory.class)).isSameAs(context.getBean("userFactory"));
            assertThat(context).doesNotHaveBean("transactionSessionPool")
                .doesNotHaveBean("sessionTransactionManager")
                .doesNotHaveBean("kafkaProducerFactory")
                .doesNotHaveBean("currentTransactionSession")
                .doesNotHaveBean("transactionSession");
        });
    }

    @Test
    void aPlainProducerFactoryOfTheUserStopsStartupSayingWhatToDoInsteadOfSendingAroundTheSessions() {
        this.runner.withUserConfiguration(UserPlainFactory.class).run(context -> {
            assertThat(context).hasFailed();
            Throwable failure = context.getStartupFailure();
            Throwable cause = failure;
            while (cause != null && !(cause instanceof ForeignProducerFactoryException)) {
                cause = cause.getCause();
            }
            assertThat(cause).isInstanceOf(ForeignProducerFactoryException.class);
            org.springframework.boot.diagnostics.FailureAnalysis analysis =
                    new ForeignProducerFactoryFailureAnalyzer().analyze(failure);
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("userFactory").contains("outside every transaction");
            assertThat(analysis.getAction()).contains("spring.kafka.producer.*")
                .contains("kafka.txn-session.allow-non-session-producer-factories=true");
        });
    }

    @Test
    void aDeliberatelyNonTransactionalFactoryIsAllowedWhenSaidSo() {
        this.runner.withUserConfiguration(UserPlainFactory.class)
            .withPropertyValues("kafka.txn-session.allow-non-session-producer-factories=true")
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(context.getBean(ProducerFactory.class)).isInstanceOf(DefaultKafkaProducerFactory.class);
                SessionTransactionManager manager = context.getBean(SessionTransactionManager.class);
                assertThat(manager.getPool()).isSameAs(context.getBean(TransactionSessionPool.class));
            });
    }

    @Test
    void canBeTurnedOff() {
        this.runner.withPropertyValues("kafka.txn-session.enabled=false").run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context).doesNotHaveBean(TransactionSessionPool.class)
                .doesNotHaveBean(SessionTransactionManager.class);
        });
    }

    @Test
    void healthIndicatorCanBeTurnedOffAndBacksOffWithoutTheHealthModule() {
        this.runner.withPropertyValues("management.health.kafkatxnsession.enabled=false")
            .run(context -> assertThat(context).doesNotHaveBean(TransactionSessionHealthIndicator.class));
        this.runner.withClassLoader(new FilteredClassLoader("org.springframework.boot.health"))
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(context).doesNotHaveBean(TransactionSessionHealthIndicator.class);
            });
    }

    @Test
    void metricsBackOffWithoutMicrometer() {
        this.runner.withClassLoader(new FilteredClassLoader("io.micrometer.core"))
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(context).doesNotHaveBean(TransactionSessionMetrics.class);
                assertThat(context).hasSingleBean(SessionTransactionManager.class);
            });
    }

    @Test
    void anExistingTransactionalAppGainsSessionsWithOneTransactionManagerAndItsPrefix() {
        this.runner.withPropertyValues("spring.kafka.producer.transaction-id-prefix=tx-").run(context -> {
            assertThat(context).hasNotFailed();
            // Boot's KafkaTransactionManager is replaced: one transaction manager, @Transactional is not ambiguous
            assertThat(context).hasSingleBean(org.springframework.transaction.PlatformTransactionManager.class)
                .hasSingleBean(SessionTransactionManager.class)
                .doesNotHaveBean("kafkaTransactionManager");
            assertThat(context.getBean(TransactionSessionPool.class).transactionalIdPrefix()).isEqualTo("tx-");
        });
    }

    @Test
    void springTransactionPropertiesCustomizeTheSessionManagerLikeBootsOwn() {
        this.runner.withConfiguration(AutoConfigurations.of(
                org.springframework.boot.transaction.autoconfigure.TransactionManagerCustomizationAutoConfiguration.class))
            .withPropertyValues("spring.transaction.default-timeout=7s",
                    "spring.transaction.rollback-on-commit-failure=true")
            .run(context -> {
                assertThat(context).hasNotFailed();
                SessionTransactionManager manager = context.getBean(SessionTransactionManager.class);
                assertThat(manager.getDefaultTimeout()).isEqualTo(7);
                assertThat(manager.isRollbackOnCommitFailure()).isTrue();
            });
    }

    /**
     * With the application's own transaction manager: every session-backed producer factory of the pool enlists (one
     * left out would run Kafka transactions of its own, committed after the database's), and the manager gets the
     * commit point that prepares the sessions after every beforeCommit callback.
     */
    @Test
    void everySessionFactoryEnlistsAndTheApplicationsManagerGetsTheCommitPoint() {
        this.runner.withUserConfiguration(ApplicationManagerAndSecondFactory.class).run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBeansOfType(SessionProducerFactory.class)).hasSize(2)
                .allSatisfy((name, factory) -> assertThat(factory.getEnlistment()).as(name).isNotNull());
            assertThat(context.getBean("transactionManager", JdbcTransactionManager.class)
                .getTransactionExecutionListeners()).containsExactly(SessionCommitPoint.LISTENER);
        });
    }

    @Configuration(proxyBeanMethods = false)
    static class ApplicationManagerAndSecondFactory {

        @Bean
        DataSource dataSource() {
            return new SimpleDriverDataSource(new org.h2.Driver(), "jdbc:h2:mem:"
                    + EmbeddedKafkaCluster.uniqueName("factories") + ";DB_CLOSE_DELAY=-1", "sa", "");
        }

        @Bean
        JdbcTransactionManager transactionManager(DataSource dataSource) {
            return new JdbcTransactionManager(dataSource);
        }

        /** Boot's KafkaTemplate needs an Object/Object factory: the application's own replaces the starter's */
        @Bean
        SessionProducerFactory<Object, Object> objectProducerFactory(TransactionSessionPool pool) {
            return new SessionProducerFactory<>(pool, () -> (t, d) -> String.valueOf(d).getBytes(),
                    () -> (t, d) -> String.valueOf(d).getBytes(), Map.of("bootstrap.servers", "localhost:1"));
        }

        @Bean
        SessionProducerFactory<String, String> stringProducerFactory(TransactionSessionPool pool) {
            return new SessionProducerFactory<>(pool, StringSerializer::new, StringSerializer::new,
                    Map.of("bootstrap.servers", "localhost:1"));
        }
    }

    @Test
    void backsOffWithoutTheCoreLibrary() {
        new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TransactionSessionAutoConfiguration.class))
            .withClassLoader(new FilteredClassLoader(TransactionSession.class))
            .run(context -> assertThat(context).doesNotHaveBean(TransactionSessionAutoConfiguration.class));
    }

    /**
     * At startup the pool is asked to end what a predecessor left open on its ids (one task on its settlement
     * executor), unless two-phase commit owns those ids ({@code jdbc.enabled=true}, or two-phase beans of the
     * application's own, even lazy ones that were never created) or the application turned it off.
     */
    @Test
    void leftoverTransactionsAreEndedAtStartupOnlyWhenNoTwoPhaseCommitOwnsTheIds() {
        AtomicInteger kafkaOnly = new AtomicInteger();
        this.runner.withBean(TransactionSessionPool.class, () -> poolCountingSettlements(kafkaOnly))
            .run(context -> assertThat(context).hasNotFailed());
        assertThat(kafkaOnly).as("Kafka-only mode").hasValue(1);

        AtomicInteger withRecoveryBean = new AtomicInteger();
        this.runner.withBean(TransactionSessionPool.class, () -> poolCountingSettlements(withRecoveryBean))
            .withBean("recovery", TwoPhaseRecovery.class, () -> {
                throw new IllegalStateException("a lazy bean: looked up by type only, never created");
            }, definition -> definition.setLazyInit(true))
            .run(context -> assertThat(context).hasNotFailed());
        assertThat(withRecoveryBean).as("a TwoPhaseRecovery bean of the application's own").hasValue(0);

        AtomicInteger jdbcEnabled = new AtomicInteger();
        this.runner.withBean(TransactionSessionPool.class, () -> poolCountingSettlements(jdbcEnabled))
            .withPropertyValues("kafka.txn-session.jdbc.enabled=true")
            .run(context -> assertThat(context).hasNotFailed());
        assertThat(jdbcEnabled).as("jdbc.enabled=true").hasValue(0);

        AtomicInteger optedOut = new AtomicInteger();
        this.runner.withBean(TransactionSessionPool.class, () -> poolCountingSettlements(optedOut))
            .withPropertyValues("kafka.txn-session.end-leftovers-on-startup=false")
            .run(context -> assertThat(context).hasNotFailed());
        assertThat(optedOut).as("end-leftovers-on-startup=false").hasValue(0);
    }

    /** A pool whose settlement executor only counts the tasks it is given (no broker is needed). */
    private static TransactionSessionPool poolCountingSettlements(AtomicInteger tasks) {
        TransactionSessionPool pool = new TransactionSessionPool("leftover-", 2, Duration.ofSeconds(1),
                Map.of("bootstrap.servers", "localhost:1"), List.of());
        pool.setBackgroundExecutors(Executors.newSingleThreadExecutor(),
                new ThreadPoolExecutor(1, 1, 0, TimeUnit.SECONDS, new LinkedBlockingQueue<>()) {
                    @Override
                    public void execute(Runnable command) {
                        tasks.incrementAndGet();
                    }
                });
        return pool;
    }

    private static void assertFailureNames(AssertableApplicationContext context, String property) {
        assertThat(context).hasFailed();
        StringBuilder messages = new StringBuilder();
        for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
            messages.append(t.getMessage()).append('\n');
        }
        assertThat(messages.toString()).contains(property);
    }

    @Configuration(proxyBeanMethods = false)
    static class UserBeans {

        @Bean(destroyMethod = "close")
        TransactionSessionPool userPool() {
            return new TransactionSessionPool("user-", 2, java.time.Duration.ofSeconds(1),
                    Map.of("bootstrap.servers", "localhost:1"), List.of());
        }

        @Bean
        SessionProducerFactory<Object, Object> userFactory(TransactionSessionPool pool) {
            return new SessionProducerFactory<>(pool, UserBeans::serializer, UserBeans::serializer,
                    Map.of("bootstrap.servers", "localhost:1"));
        }

        static Serializer<Object> serializer() {
            return (topic, data) -> String.valueOf(data).getBytes(StandardCharsets.UTF_8);
        }

        @Bean
        SessionTransactionManager userManager(TransactionSessionPool pool,
                SessionProducerFactory<Object, Object> factory) {
            return new SessionTransactionManager(pool, factory);
        }

        @Bean
        CurrentTransactionSession userCurrent(TransactionSessionPool pool) {
            return new CurrentTransactionSession(pool);
        }

        @Bean(destroyMethod = "")
        TransactionSession userSession(TransactionSessionPool pool) {
            return TransactionSessionProxy.create(pool);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class UserPlainFactory {

        @Bean
        DefaultKafkaProducerFactory<Object, Object> userFactory() {
            return new DefaultKafkaProducerFactory<>(Map.of("bootstrap.servers", "localhost:1"));
        }
    }
}
