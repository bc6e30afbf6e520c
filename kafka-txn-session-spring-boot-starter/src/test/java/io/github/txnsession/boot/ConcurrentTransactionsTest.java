package io.github.txnsession.boot;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.github.txnsession.kafka.test.KafkaClusterExtension;
import io.github.txnsession.spring.CurrentTransactionSession;
import io.github.txnsession.spring.SessionPoolSnapshot;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

import static org.assertj.core.api.Assertions.assertThat;

/** 16 threads run {@code @Transactional} methods at once over a pool of 4 sessions. */
class ConcurrentTransactionsTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    static final String TOPIC = "concurrent";
    static final int CALLERS = 16;
    static final int POOL = 4;

    static ConfigurableApplicationContext context;

    @BeforeAll
    static void start() {
        kafka.cluster().createTopic(TOPIC, 2);
        context = new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.NONE)
            .properties("spring.main.banner-mode=off", CommittedReader.KAFKA_ONLY,
                    "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
                    "kafka.txn-session.transactional-id-prefix=concurrent-test-",
                    "kafka.txn-session.pool-size=" + POOL,
                    "kafka.txn-session.acquire-timeout=60s")
            .run();
    }

    @AfterAll
    static void stop() {
        if (context != null) {
            context.close();
        }
    }

    @Test
    void sixteenCallersShareFourSessionsWithoutOverlap() throws Exception {
        Worker worker = context.getBean(Worker.class);
        ExecutorService pool = Executors.newFixedThreadPool(CALLERS);
        CountDownLatch go = new CountDownLatch(1);
        List<Future<String>> results = new ArrayList<>();
        try {
            for (int i = 0; i < CALLERS; i++) {
                int n = i;
                results.add(pool.submit(() -> {
                    go.await();
                    return worker.work("caller-" + n);
                }));
            }
            go.countDown();
            for (Future<String> f : results) {
                assertThat(f.get(60, TimeUnit.SECONDS)).startsWith("concurrent-test-");
            }
        }
        finally {
            pool.shutdownNow();
        }
        assertThat(worker.overlaps()).as("a session used by two threads at once").isZero();
        assertThat(worker.maxActive()).isLessThanOrEqualTo(POOL).isGreaterThan(1); // really concurrent, never above 4
        assertThat(worker.sessionsUsed()).hasSizeLessThanOrEqualTo(POOL)
            .allMatch(id -> id.matches("concurrent-test-[0-3]"));
        SessionPoolSnapshot snapshot = context.getBean(TransactionSessionPool.class).snapshot();
        assertThat(snapshot.inUse()).isZero();
        assertThat(snapshot.initialized()).isLessThanOrEqualTo(POOL);
        assertThat(snapshot.exhausted()).isZero();

        List<ConsumerRecord<String, String>> records = CommittedReader.readToEnd(kafka.bootstrapServers(), TOPIC, true);
        assertThat(records).extracting(ConsumerRecord::key).hasSize(CALLERS).doesNotHaveDuplicates();
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {

        @Bean
        Worker worker(KafkaTemplate<Object, Object> template, CurrentTransactionSession current) {
            return new Worker(template, current);
        }
    }

    /** Records which thread holds which session while a transaction runs. */
    public static class Worker {

        private final KafkaTemplate<Object, Object> template;
        private final CurrentTransactionSession current;
        private final Map<String, Thread> holders = new ConcurrentHashMap<>();
        private final Set<String> sessionsUsed = ConcurrentHashMap.newKeySet();
        private final AtomicInteger overlaps = new AtomicInteger();
        private final AtomicInteger active = new AtomicInteger();
        private final AtomicInteger maxActive = new AtomicInteger();

        public Worker(KafkaTemplate<Object, Object> template, CurrentTransactionSession current) {
            this.template = template;
            this.current = current;
        }

        @Transactional
        public String work(String key) throws InterruptedException {
            String id = this.current.transactionalId();
            Thread me = Thread.currentThread();
            this.maxActive.accumulateAndGet(this.active.incrementAndGet(), Math::max);
            if (this.holders.putIfAbsent(id, me) != null) {
                this.overlaps.incrementAndGet();
            }
            // the session counts as ours until the transaction has completed (commit included); the manager gives it
            // back to the pool only after this callback
            TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
                @Override
                public void afterCompletion(int status) {
                    Worker.this.holders.remove(id, me);
                    Worker.this.active.decrementAndGet();
                }
            });
            this.sessionsUsed.add(id);
            this.template.send(TOPIC, key, id);
            this.template.flush();
            Thread.sleep(20); // simulated work, so that callers really overlap
            return id;
        }

        public int overlaps() {
            return this.overlaps.get();
        }

        public int maxActive() {
            return this.maxActive.get();
        }

        public Set<String> sessionsUsed() {
            return this.sessionsUsed;
        }
    }
}
