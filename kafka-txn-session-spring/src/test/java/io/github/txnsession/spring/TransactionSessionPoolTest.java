package io.github.txnsession.spring;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.github.txnsession.kafka.SessionFencedException;
import io.github.txnsession.kafka.SessionProducer;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

/** The bounded pool against a real broker: ids, laziness, exhaustion, waiting, replacement, close. */
class TransactionSessionPoolTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String TOPIC = "pool";

    @BeforeAll
    static void topics() {
        kafka.cluster().createTopic(TOPIC, 1);
    }

    private TransactionSessionPool pool(String prefix, int size, Duration acquireTimeout) {
        return new TransactionSessionPool(prefix, size, acquireTimeout, kafka.cluster().clientConfigs(), List.of());
    }

    @Test
    void idsArePrefixPlusIndexAndSessionsStartLazily() {
        String prefix = EmbeddedKafkaCluster.uniqueName("ids") + "-";
        try (TransactionSessionPool pool = pool(prefix, 3, Duration.ZERO)) {
            assertThat(pool.snapshot().initialized()).isZero();
            PooledSession a = pool.acquire();
            PooledSession b = pool.acquire();
            assertThat(a.session().transactionalId()).isEqualTo(prefix + "0");
            assertThat(b.session().transactionalId()).isEqualTo(prefix + "1");
            assertThat(a.session().state()).isEqualTo(SessionState.READY);
            assertThat(pool.snapshot()).extracting(SessionPoolSnapshot::initialized, SessionPoolSnapshot::inUse)
                .containsExactly(2, 2);
            b.release();
            a.release();
            PooledSession again = pool.acquire(); // an idle initialized session is reused before a new slot opens
            assertThat(again.session().transactionalId()).isIn(prefix + "0", prefix + "1");
            assertThat(pool.snapshot().initialized()).isEqualTo(2);
            again.release();
        }
    }

    @Test
    void exhaustionFailsAtOnceWithZeroTimeoutAndSaysWhatToChange() {
        String prefix = EmbeddedKafkaCluster.uniqueName("exhaust") + "-";
        try (TransactionSessionPool pool = pool(prefix, 1, Duration.ZERO)) {
            PooledSession held = pool.acquire();
            assertThatThrownBy(pool::acquire).isInstanceOf(SessionPoolExhaustedException.class)
                .hasMessageContaining("All 1 transaction sessions of pool '" + prefix + "'")
                .hasMessageContaining("kafka.txn-session.pool-size")
                .hasMessageContaining(prefix + "0@" + Thread.currentThread().getName());
            assertThat(pool.snapshot().exhausted()).isEqualTo(1);
            held.release();
            pool.acquire().release();
        }
    }

    @Test
    void aWaitingAcquireGetsTheSessionWhenItIsReleased() throws Exception {
        String prefix = EmbeddedKafkaCluster.uniqueName("wait") + "-";
        try (TransactionSessionPool pool = pool(prefix, 1, Duration.ofSeconds(30))) {
            PooledSession held = pool.acquire();
            CompletableFuture<PooledSession> waiter = CompletableFuture.supplyAsync(pool::acquire);
            await().atMost(Duration.ofSeconds(10)).until(() -> pool.snapshot().waiting() == 1);
            assertThat(waiter).isNotDone();
            held.release();
            PooledSession got = waiter.get(10, TimeUnit.SECONDS);
            assertThat(got.session()).isSameAs(held.session());
            got.release();
        }
    }

    @Test
    void releasingAnOpenTransactionAbortsIt() {
        String prefix = EmbeddedKafkaCluster.uniqueName("open") + "-";
        try (TransactionSessionPool pool = pool(prefix, 1, Duration.ZERO)) {
            PooledSession lease = pool.acquire();
            lease.session().beginTransaction();
            lease.release();
            assertThat(lease.session().state()).isEqualTo(SessionState.READY);
            PooledSession next = pool.acquire();
            assertThat(next.session()).isSameAs(lease.session());
            next.release();
        }
    }

    @Test
    void aFencedSessionIsReplacedAndTheSameIdComesBack() {
        String prefix = EmbeddedKafkaCluster.uniqueName("fenced") + "-";
        try (TransactionSessionPool pool = pool(prefix, 1, Duration.ZERO)) {
            PooledSession lease = pool.acquire();
            TransactionSession first = lease.session();
            lease.release();
            Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
            configs.put("transactional.id", prefix + "0");
            try (TransactionSession intruder = TransactionSession.open(configs)) {
                intruder.initialize(); // fences the pool's session
            }
            PooledSession fenced = pool.acquire();
            assertThat(fenced.session()).isSameAs(first);
            SessionProducer<String, String> producer = new SessionProducer<>(fenced.session(), new StringSerializer(),
                    new StringSerializer());
            assertThatThrownBy(() -> {
                fenced.session().beginTransaction();
                producer.send(new ProducerRecord<>(TOPIC, "k", "v")).get();
                fenced.session().commitTransaction();
            }).satisfies(ex -> assertThat(isFencing(ex)).as("fenced: " + ex).isTrue());
            fenced.release();
            assertThat(pool.snapshot().replaced()).isEqualTo(1);
            assertThat(first.state()).isEqualTo(SessionState.CLOSED);

            PooledSession fresh = pool.acquire();
            assertThat(fresh.session()).isNotSameAs(first);
            assertThat(fresh.session().transactionalId()).isEqualTo(prefix + "0");
            fresh.session().beginTransaction();
            fresh.session().commitTransaction();
            fresh.release();
        }
    }

    private static boolean isFencing(Throwable ex) {
        for (Throwable t = ex; t != null; t = t.getCause()) {
            if (t instanceof SessionFencedException || t instanceof ProducerFencedException
                    || t instanceof InvalidProducerEpochException) {
                return true;
            }
        }
        return false;
    }

    /**
     * Work queued in the background (clearing a decision row, completing a Kafka commit) is not cut off by close: close
     * waits for it, then refuses new work; executors set for the pool are shut down with it.
     */
    @Test
    void closeWaitsForTheBackgroundWorkAlreadyQueued() throws Exception {
        TransactionSessionPool pool = pool(EmbeddedKafkaCluster.uniqueName("drain") + "-", 2, Duration.ZERO);
        ExecutorService work = Executors.newFixedThreadPool(2);
        ExecutorService settlement = Executors.newSingleThreadExecutor();
        pool.setBackgroundExecutors(work, settlement);
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1); // the work itself: a slow DELETE, say, until released
        AtomicBoolean finished = new AtomicBoolean();
        pool.runInBackground(() -> {
            started.countDown();
            try {
                release.await(30, TimeUnit.SECONDS);
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            }
            finished.set(true);
        });
        assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();
        CompletableFuture<Void> closing = CompletableFuture.runAsync(pool::close);
        // close does not return while the work runs
        await().during(Duration.ofMillis(300)).atMost(Duration.ofSeconds(5)).until(() -> !closing.isDone());
        release.countDown();
        closing.get(10, TimeUnit.SECONDS);
        assertThat(finished).as("the queued work finished before close returned").isTrue();
        assertThatThrownBy(() -> pool.runInBackground(() -> { }))
            .isInstanceOf(RejectedExecutionException.class);
        assertThat(work.isShutdown()).isTrue();
        assertThat(settlement.isShutdown()).isTrue();
        assertThatThrownBy(() -> pool.setBackgroundExecutors(work, settlement))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("before the pool is used");
    }

    @Test
    void closeClosesTheSessionsAndRefusesNewAcquires() {
        String prefix = EmbeddedKafkaCluster.uniqueName("close") + "-";
        TransactionSessionPool pool = pool(prefix, 2, Duration.ZERO);
        PooledSession idle = pool.acquire();
        PooledSession busy = pool.acquire();
        idle.release();
        busy.session().beginTransaction();
        pool.close();
        assertThat(idle.session().state()).isEqualTo(SessionState.CLOSED);
        assertThat(busy.session().state()).isEqualTo(SessionState.CLOSED); // its open transaction was aborted
        busy.release();
        assertThat(pool.snapshot().closed()).isTrue();
        assertThat(pool.snapshot().inUse()).isZero();
        assertThatThrownBy(pool::acquire).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void invalidArgumentsAreRefusedWithTheReason() {
        Map<String, Object> configs = kafka.cluster().clientConfigs();
        assertThatThrownBy(() -> new TransactionSessionPool(" ", 1, Duration.ZERO, configs, List.of()))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("transactionalIdPrefix");
        assertThatThrownBy(() -> new TransactionSessionPool("p-", 0, Duration.ZERO, configs, List.of()))
            .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("size must be at least 1");
        Map<String, Object> withId = new HashMap<>(configs);
        withId.put("transactional.id", "fixed");
        assertThatThrownBy(() -> new TransactionSessionPool("p-", 1, Duration.ZERO, withId, List.of()))
            .hasMessageContaining("transactional.id");
    }

    /**
     * Closing the pool while a lent session holds a prepared transaction (a two-phase commit may have decided it, its
     * database commit in flight) leaves that transaction open for recovery instead of aborting it.
     */
    @Test
    void closingThePoolLeavesALentPreparedTransactionForRecovery() throws Exception {
        String prefix = EmbeddedKafkaCluster.uniqueName("close-prepared") + "-";
        TransactionSessionPool pool = pool(prefix, 1, Duration.ofSeconds(5));
        PooledSession lease = pool.acquire();
        TransactionSession session = lease.session();
        session.beginTransaction();
        new SessionProducer<>(session, new StringSerializer(), new StringSerializer())
            .send(new ProducerRecord<>(TOPIC, "prepared", "v")).get();
        session.prepareTransaction();
        pool.close();
        Optional<TransactionSession> open = TransactionSession.resumeOpen(prefix + "0",
                kafka.cluster().clientConfigs());
        assertThat(open).as("the prepared transaction is still open for recovery").isPresent();
        try (TransactionSession resumed = open.get()) {
            resumed.abortTransaction();
        }
        lease.release();
    }

    /**
     * A crashed predecessor with the same prefix left transactions open on ids 0 and 2. The background end fences id
     * 2, which this pool has not used, and aborts its transaction (the predecessor, were it only paused, can no longer
     * commit); id 2's session stays in the pool. Id 0 was initialized by this pool (which ended its leftover) and is
     * lent with a transaction of its own, which is left alone and commits.
     */
    @Test
    void leftoversOnIdsThisPoolHasNotUsedAreEndedInTheBackground() throws Exception {
        String prefix = EmbeddedKafkaCluster.uniqueName("leftover") + "-";
        try (KafkaProducer<String, String> crashed0 = leftover(prefix + "0");
                KafkaProducer<String, String> crashed2 = leftover(prefix + "2");
                TransactionSessionPool pool = pool(prefix, 3, Duration.ofSeconds(5))) {
            PooledSession lent = pool.acquire();
            lent.session().beginTransaction();
            new SessionProducer<>(lent.session(), new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(TOPIC, "lent", "v")).get();
            List<String> ended = pool.endLeftoversInBackground().get(30, TimeUnit.SECONDS);
            assertThat(ended).containsExactly(prefix + "2");
            assertThat(transactionState(prefix + "2")).isNotEqualTo(TransactionState.ONGOING);
            assertThatThrownBy(crashed2::commitTransaction).as("the predecessor is fenced")
                .isInstanceOf(KafkaException.class);
            assertThat(pool.snapshot()).extracting(SessionPoolSnapshot::initialized, SessionPoolSnapshot::inUse)
                .containsExactly(2, 1);
            assertThat(lent.session().state()).isEqualTo(SessionState.IN_TRANSACTION);
            lent.session().commitTransaction();
            lent.release();
        }
    }

    /** When two-phase commit settles the pool's ids, a prepared transaction may have to be committed: nothing here. */
    @Test
    void aPoolWhosePreparedTransactionsRecoverySettlesLeavesLeftoversAlone() throws Exception {
        String prefix = EmbeddedKafkaCluster.uniqueName("leftover-2pc") + "-";
        try (KafkaProducer<String, String> crashed = leftover(prefix + "1");
                TransactionSessionPool withResolver = pool(prefix, 2, Duration.ofSeconds(5));
                TransactionSessionPool withRecovery = pool(prefix, 2, Duration.ofSeconds(5))) {
            withResolver.setInDoubtResolver(id -> { });
            withRecovery.settledByRecovery();
            assertThat(withResolver.endLeftoversInBackground().get(30, TimeUnit.SECONDS)).isEmpty();
            assertThat(withRecovery.endLeftoversInBackground().get(30, TimeUnit.SECONDS)).isEmpty();
            assertThat(transactionState(prefix + "1")).isEqualTo(TransactionState.ONGOING);
            crashed.abortTransaction();
        }
    }

    /** A producer that began a transaction with one record and stopped there, as a crashed process would. */
    private static KafkaProducer<String, String> leftover(String transactionalId) throws Exception {
        Map<String, Object> configs = new HashMap<>(kafka.cluster().clientConfigs());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        configs.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 300_000);
        KafkaProducer<String, String> producer = new KafkaProducer<>(configs, new StringSerializer(),
                new StringSerializer());
        producer.initTransactions();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(TOPIC, "leftover", transactionalId)).get();
        assertThat(transactionState(transactionalId)).isEqualTo(TransactionState.ONGOING);
        return producer;
    }

    private static TransactionState transactionState(String transactionalId) throws Exception {
        return kafka.cluster().admin().describeTransactions(List.of(transactionalId)).description(transactionalId)
            .get(10, TimeUnit.SECONDS).state();
    }
}
