package io.github.txnsession.spring;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

/**
 * The transaction-scoped {@link TransactionSession} proxy against a real broker: each call reaches the session of the
 * calling thread's transaction, a call outside a transaction says what is missing, and the calls the transaction
 * manager drives are refused.
 */
class TransactionSessionProxyTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private TransactionSessionPool pool;
    private TransactionTemplate tx;
    private CurrentTransactionSession current;
    private TransactionSession proxy;

    @BeforeEach
    void managerAndProxy() {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        this.pool = new TransactionSessionPool(EmbeddedKafkaCluster.uniqueName("proxy") + "-", 2,
                Duration.ofSeconds(30), configs, List.of());
        SessionProducerFactory<Object, Object> factory = new SessionProducerFactory<>(this.pool, serializer(),
                serializer(), configs);
        this.tx = new TransactionTemplate(new SessionTransactionManager(this.pool, factory));
        this.current = new CurrentTransactionSession(this.pool);
        this.proxy = TransactionSessionProxy.create(this.pool);
    }

    @AfterEach
    void closePool() {
        this.pool.close();
    }

    @SuppressWarnings({ "unchecked", "rawtypes" })
    private static Supplier<Serializer<Object>> serializer() {
        return () -> (Serializer) new StringSerializer();
    }

    @Test
    void insideATransactionEveryCallGoesToTheBoundSession() {
        this.tx.executeWithoutResult(status -> {
            TransactionSession bound = this.current.get();
            assertThat(TransactionSessionProxy.isProxy(bound)).as("get() returns the session itself").isFalse();
            assertThat(this.proxy.transactionalId()).isEqualTo(bound.transactionalId());
            assertThat(this.proxy.state()).isEqualTo(bound.state()).isEqualTo(SessionState.IN_TRANSACTION);
            assertThat(this.proxy.producerId()).isEqualTo(bound.producerId());
            assertThat(this.proxy.producerEpoch()).isEqualTo(bound.producerEpoch());
            assertThat(this.proxy.isResumed()).isFalse();
            assertThat(this.proxy.toString()).contains(bound.toString());
        });
    }

    @Test
    void outsideATransactionACallSaysWhatIsMissing() {
        assertThatIllegalStateException().isThrownBy(this.proxy::state)
            .withMessageContaining("TransactionSession.state()")
            .withMessageContaining("outside a transaction")
            .withMessageContaining("No transaction session is bound to thread '" + Thread.currentThread().getName())
            .withMessageContaining(this.pool.toString());
        assertThatIllegalStateException().isThrownBy(this.proxy::transactionalId)
            .withMessageContaining("TransactionSession.transactionalId()");
        // toString, equals and hashCode need no transaction
        assertThat(this.proxy.toString()).contains(this.pool.toString()).contains("no transaction");
        TransactionSession sameHandler = TransactionSessionProxy.create(this.pool);
        assertThat(this.proxy).isEqualTo(sameHandler).hasSameHashCodeAs(sameHandler);
        try (TransactionSessionPool other = new TransactionSessionPool(EmbeddedKafkaCluster.uniqueName("other") + "-",
                1, Duration.ZERO, kafka.cluster().clientConfigs(), List.of())) {
            assertThat(this.proxy).isNotEqualTo(TransactionSessionProxy.create(other));
        }
        assertThat(this.proxy).isNotEqualTo(this.current);
    }

    @Test
    void lifecycleCallsAreRefusedBecauseTheTransactionManagerDrivesThem() {
        this.tx.executeWithoutResult(status -> {
            assertThatIllegalStateException().isThrownBy(this.proxy::beginTransaction)
                .withMessageContaining("TransactionSession.beginTransaction()")
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(this.proxy::commitTransaction)
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(this.proxy::abortTransaction)
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException()
                .isThrownBy(() -> this.proxy.completeTransaction(PreparedTransaction.of(1, (short) 0, -1)))
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(this.proxy::initialize)
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(this.proxy::close)
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(() -> this.proxy.close(Duration.ZERO))
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(this.proxy::abandon)
                .withMessageContaining("the transaction manager drives");
            assertThatIllegalStateException().isThrownBy(() -> this.proxy.addListener((session, failure) -> { }))
                .withMessageContaining("to the pool");
            // none of them reached the session: its transaction is still open, and commits as usual
            assertThat(this.current.get().state()).isEqualTo(SessionState.IN_TRANSACTION);
        });
        assertThatIllegalStateException().isThrownBy(this.proxy::beginTransaction)
            .withMessageContaining("the transaction manager drives");
        assertThat(this.pool.snapshot().inUse()).isZero();
    }

    @Test
    void twoThreadsInTwoTransactionsEachReachTheirOwnSession() throws Exception {
        CyclicBarrier bothOpen = new CyclicBarrier(2);
        Callable<String[]> work = () -> this.tx.execute(status -> {
            TransactionSession bound = this.current.get();
            try {
                bothOpen.await(30, TimeUnit.SECONDS); // both transactions are open: they hold different sessions
            }
            catch (Exception ex) {
                throw new IllegalStateException(ex);
            }
            assertThat(this.proxy.producerId()).isEqualTo(bound.producerId());
            assertThat(this.proxy.state()).isEqualTo(SessionState.IN_TRANSACTION);
            return new String[] { bound.transactionalId(), this.proxy.transactionalId() };
        });
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            Future<String[]> a = threads.submit(work);
            Future<String[]> b = threads.submit(work);
            String[] seenByA = a.get(60, TimeUnit.SECONDS);
            String[] seenByB = b.get(60, TimeUnit.SECONDS);
            assertThat(seenByA[1]).isEqualTo(seenByA[0]);
            assertThat(seenByB[1]).isEqualTo(seenByB[0]);
            assertThat(seenByA[0]).isNotEqualTo(seenByB[0]);
        }
        finally {
            threads.shutdownNow();
        }
    }

    @Test
    void producersAndConsumersAreBoundToTheSessionItselfNotToTheProxy() {
        assertThatIllegalArgumentException()
            .isThrownBy(() -> new SessionProducer<>(this.proxy, new StringSerializer(), new StringSerializer()))
            .withMessageContaining("a proxy?")
            .withMessageContaining("CurrentTransactionSession.get()");
        this.tx.executeWithoutResult(status -> {
            try (SessionProducer<String, String> producer = new SessionProducer<>(this.current.get(),
                    new StringSerializer(), new StringSerializer())) {
                assertThat(producer.session().transactionalId()).isEqualTo(this.proxy.transactionalId());
            }
        });
    }
}
