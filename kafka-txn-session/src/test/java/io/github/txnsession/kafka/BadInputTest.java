package io.github.txnsession.kafka;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.PreparedTxnState;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.consumerConfigs;
import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static io.github.txnsession.kafka.TestClients.shareConsumerConfigs;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Bad input across the core's public API (issue R4): nulls, blanks, negative and out-of-range values, unknown and
 * foreign transactional ids, wrong producer ids and epochs, configs that contradict a session, wrong call order, reuse
 * after close, a call from a send callback, an interrupted caller. Each case must fail with the named error type, a
 * message that names what was wrong (and, where the library can tell, what to do), and leave the session it was
 * called on in the state it had. After every case no producer network thread or heartbeat thread is left over.
 *
 * <p>The table of cases and the messages they produced is written to {@code target/bad-input-cases.md}.
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class BadInputTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    private static final List<String> REPORT = new ArrayList<>();
    private static final Set<String> LEAK_PREFIXES = Set.of("kafka-producer-network-thread", "txn-session-heartbeat");

    private static TransactionSession uninitialized;
    private static TransactionSession ready;
    private static TransactionSession inTransaction;
    private static TransactionSession closed;
    private static String topic;
    private static String knownId;
    private static PreparedTransaction knownCommitted;
    private static long threadsBefore;

    @BeforeAll
    static void fixtures() {
        threadsBefore = threads();
        topic = EmbeddedKafkaCluster.uniqueName("bad-input");
        kafka.cluster().createTopic(topic, 1);
        uninitialized = TransactionSession.open(sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("bi-u")));
        ready = TransactionSession.open(sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("bi-r")));
        ready.initialize();
        inTransaction = TransactionSession.open(sessionConfigs(kafka.cluster(),
                EmbeddedKafkaCluster.uniqueName("bi-t")));
        inTransaction.initialize();
        inTransaction.beginTransaction();
        closed = TransactionSession.open(sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("bi-c")));
        closed.close();
        knownId = EmbeddedKafkaCluster.uniqueName("bi-known");
        try (TransactionSession s = TransactionSession.open(sessionConfigs(kafka.cluster(), knownId))) {
            s.initialize();
            s.beginTransaction();
            new SessionProducer<>(s, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topic, "v"));
            knownCommitted = s.prepareTransaction();
            s.commitTransaction();
        }
    }

    @AfterAll
    static void report() throws IOException {
        for (TransactionSession s : Arrays.asList(uninitialized, ready, inTransaction)) {
            if (s != null) {
                s.close();
            }
        }
        List<String> lines = new ArrayList<>();
        lines.add("# Bad input: cases and messages");
        lines.add("");
        lines.add("Written by `BadInputTest`; one row per case, with the error and message it produced.");
        lines.add("");
        lines.add("| # | case | error | message |");
        lines.add("|---|---|---|---|");
        lines.addAll(REPORT);
        Path out = Path.of("target", "bad-input-cases.md");
        Files.createDirectories(out.getParent());
        Files.write(out, lines, StandardCharsets.UTF_8);
    }

    private static long threads() {
        return Thread.getAllStackTraces().keySet().stream()
            .filter(t -> LEAK_PREFIXES.stream().anyMatch(p -> t.getName().startsWith(p)))
            .count();
    }

    /** One case: what is called, the error type expected, fragments its message must contain. */
    private record Case(String name, Class<? extends Throwable> error, List<String> fragments,
            @Nullable TransactionSession stateUnchanged, Call call) {
    }

    @FunctionalInterface
    private interface Call {
        void run() throws Exception;
    }

    private static Case c(String name, Class<? extends Throwable> error, String fragments, Call call) {
        return new Case(name, error, Arrays.asList(fragments.split("\\|")), null, call);
    }

    private static Case c(String name, Class<? extends Throwable> error, String fragments,
            TransactionSession unchanged, Call call) {
        return new Case(name, error, Arrays.asList(fragments.split("\\|")), unchanged, call);
    }

    private static Map<String, Object> configs(Object... keyValues) {
        Map<String, Object> m = sessionConfigs(kafka.cluster(), EmbeddedKafkaCluster.uniqueName("bi-cfg"));
        for (int i = 0; i < keyValues.length; i += 2) {
            if (keyValues[i + 1] == null) {
                m.remove((String) keyValues[i]);
            }
            else {
                m.put((String) keyValues[i], keyValues[i + 1]);
            }
        }
        return m;
    }

    private static Map<String, Object> resumeConfigs() {
        Map<String, Object> m = new HashMap<>(kafka.cluster().clientConfigs());
        m.put(TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 5_000);
        return m;
    }

    private static void openAndClose(Map<String, Object> configs) {
        TransactionSession.open(configs).close();
    }

    private static SessionProducer<String, String> producerOf(TransactionSession s) {
        return new SessionProducer<>(s, new StringSerializer(), new StringSerializer());
    }

    private static List<Case> cases() {
        List<Case> cases = new ArrayList<>();
        // ---------------------------------------------------------------- configs of a session
        cases.add(c("open(null)", NullPointerException.class, "configs", () -> TransactionSession.open(null)));
        cases.add(c("bootstrap.servers missing", InvalidSessionConfigException.class, "bootstrap.servers|set",
                () -> openAndClose(configs("bootstrap.servers", null))));
        cases.add(c("bootstrap.servers blank", InvalidSessionConfigException.class, "bootstrap.servers",
                () -> openAndClose(configs("bootstrap.servers", "  "))));
        cases.add(c("transactional.id missing", InvalidSessionConfigException.class, "transactional.id|needs",
                () -> openAndClose(configs("transactional.id", null))));
        cases.add(c("transactional.id blank", InvalidSessionConfigException.class, "transactional.id|non-blank",
                () -> openAndClose(configs("transactional.id", "   "))));
        cases.add(c("transactional.id not a string", InvalidSessionConfigException.class, "transactional.id",
                () -> openAndClose(configs("transactional.id", 42))));
        cases.add(c("enable.idempotence=false", InvalidSessionConfigException.class, "enable.idempotence|set it to true",
                () -> openAndClose(configs("enable.idempotence", false))));
        cases.add(c("enable.idempotence=\" FALSE \"", InvalidSessionConfigException.class, "enable.idempotence",
                () -> openAndClose(configs("enable.idempotence", " FALSE "))));
        cases.add(c("acks=1", InvalidSessionConfigException.class, "acks|set it to all",
                () -> openAndClose(configs("acks", "1"))));
        cases.add(c("acks=0", InvalidSessionConfigException.class, "acks",
                () -> openAndClose(configs("acks", 0))));
        cases.add(c("unknown session.* key", InvalidSessionConfigException.class, "session.hartbeat|known keys",
                () -> openAndClose(configs("session.hartbeat.interval.ms", 5))));
        cases.add(c("session.close.timeout.ms negative", InvalidSessionConfigException.class,
                "session.close.timeout.ms|at least 0", () -> openAndClose(configs(
                        TransactionSessionConfig.CLOSE_TIMEOUT_MS, -1))));
        cases.add(c("session.close.timeout.ms not a number", InvalidSessionConfigException.class,
                "session.close.timeout.ms|whole number", () -> openAndClose(configs(
                        TransactionSessionConfig.CLOSE_TIMEOUT_MS, "soon"))));
        cases.add(c("session.coordinator.timeout.ms zero", InvalidSessionConfigException.class,
                "session.coordinator.timeout.ms|at least 1", () -> openAndClose(configs(
                        TransactionSessionConfig.COORDINATOR_TIMEOUT_MS, 0))));
        cases.add(c("session.heartbeat.interval.ms negative", InvalidSessionConfigException.class,
                "session.heartbeat.interval.ms", () -> openAndClose(configs(
                        TransactionSessionConfig.HEARTBEAT_INTERVAL_MS, -5))));
        cases.add(c("session.await-transaction-end=maybe", InvalidSessionConfigException.class,
                "await-transaction-end|auto, true or false", () -> openAndClose(configs(
                        TransactionSessionConfig.AWAIT_TRANSACTION_END, "maybe"))));
        cases.add(c("max.block.ms negative", InvalidSessionConfigException.class, "max.block.ms",
                () -> openAndClose(configs(ProducerConfig.MAX_BLOCK_MS_CONFIG, -1))));
        cases.add(c("null config key", InvalidSessionConfigException.class, "must not be null", () -> {
            Map<String, Object> m = configs();
            m.put(null, "x");
            openAndClose(m);
        }));
        // ---------------------------------------------------------------- resume
        cases.add(c("resume(null id)", NullPointerException.class, "transactionalId",
                () -> TransactionSession.resume(null, knownCommitted, resumeConfigs())));
        cases.add(c("resume(blank id)", InvalidSessionConfigException.class, "transactional.id|non-blank",
                () -> TransactionSession.resume("  ", knownCommitted, resumeConfigs())));
        cases.add(c("resume(null prepared)", NullPointerException.class, "prepared",
                () -> TransactionSession.resume(knownId, (PreparedTransaction) null, resumeConfigs())));
        cases.add(c("resume(null configs)", NullPointerException.class, "configs",
                () -> TransactionSession.resume(knownId, knownCommitted, null)));
        cases.add(c("resume with producer id -1", IllegalArgumentException.class, "producerId and epoch",
                () -> TransactionSession.resume(knownId, -1L, (short) 0, resumeConfigs())));
        cases.add(c("resume with epoch -1", IllegalArgumentException.class, "producerId and epoch",
                () -> TransactionSession.resume(knownId, 5L, (short) -1, resumeConfigs())));
        cases.add(c("resume of an id the coordinator does not know", TransactionIdentityMismatchException.class,
                "does not know", () -> TransactionSession.resume(EmbeddedKafkaCluster.uniqueName("bi-unknown"),
                        PreparedTransaction.of(1, (short) 0, -1), resumeConfigs()).close()));
        cases.add(c("resume with an epoch the id never reached", TransactionIdentityMismatchException.class,
                "never existed", () -> TransactionSession.resume(knownId, PreparedTransaction.of(
                        knownCommitted.producerId(), (short) (knownCommitted.epoch() + 50), -1), resumeConfigs())
                    .close()));
        cases.add(c("resume with another producer id", TransactionIdentityMismatchException.class, "producerId",
                () -> TransactionSession.resume(knownId, PreparedTransaction.of(knownCommitted.producerId() + 1000,
                        knownCommitted.epoch(), -1), resumeConfigs()).close()));
        cases.add(c("resume without bootstrap.servers", InvalidSessionConfigException.class, "bootstrap.servers",
                () -> TransactionSession.resume(knownId, knownCommitted, Map.of())));
        cases.add(c("resume from PreparedTxnState without a transaction", IllegalArgumentException.class,
                "no transaction|empty", () -> TransactionSession.resume(knownId, new PreparedTxnState(),
                        resumeConfigs())));
        cases.add(c("resumeOpen(null id)", NullPointerException.class, "transactionalId",
                () -> TransactionSession.resumeOpen(null, resumeConfigs())));
        // ---------------------------------------------------------------- prepared identities
        cases.add(c("PreparedTransaction.parse(null)", NullPointerException.class, "text",
                () -> PreparedTransaction.parse(null)));
        cases.add(c("PreparedTransaction.parse(\"\")", IllegalArgumentException.class, "producerId:epoch",
                () -> PreparedTransaction.parse("")));
        cases.add(c("PreparedTransaction.parse(\"abc\")", IllegalArgumentException.class, "abc|producerId:epoch",
                () -> PreparedTransaction.parse("abc")));
        cases.add(c("PreparedTransaction.parse(\"1:2:3:4\")", IllegalArgumentException.class, "1:2:3:4",
                () -> PreparedTransaction.parse("1:2:3:4")));
        cases.add(c("PreparedTransaction.parse(\"1:x:3\")", IllegalArgumentException.class, "1:x:3",
                () -> PreparedTransaction.parse("1:x:3")));
        cases.add(c("PreparedTransaction.parse(\"1:99999:3\") (epoch beyond a short)", IllegalArgumentException.class,
                "1:99999:3", () -> PreparedTransaction.parse("1:99999:3")));
        cases.add(c("PreparedTransaction.of(-1, 0, 0)", IllegalArgumentException.class, "-1",
                () -> PreparedTransaction.of(-1, (short) 0, 0)));
        cases.add(c("PreparedTransaction.of(1, -1, 0)", IllegalArgumentException.class, "-1",
                () -> PreparedTransaction.of(1, (short) -1, 0)));
        cases.add(c("PreparedTransaction.from(null)", NullPointerException.class, "state",
                () -> PreparedTransaction.from(null)));
        // ---------------------------------------------------------------- call order
        cases.add(c("beginTransaction() before initialize()", IllegalStateException.class,
                "UNINITIALIZED|initialize() first", uninitialized, uninitialized::beginTransaction));
        cases.add(c("prepareTransaction() before initialize()", IllegalStateException.class,
                "UNINITIALIZED|initialize() first", uninitialized, uninitialized::prepareTransaction));
        cases.add(c("send before initialize()", IllegalStateException.class, "UNINITIALIZED",
                uninitialized, () -> producerOf(uninitialized).send(new ProducerRecord<>(topic, "x"))));
        cases.add(c("commitTransaction() with no transaction", IllegalStateException.class,
                "READY|beginTransaction() first", ready, ready::commitTransaction));
        cases.add(c("abortTransaction() with no transaction", IllegalStateException.class,
                "READY|beginTransaction() first", ready, ready::abortTransaction));
        cases.add(c("prepareTransaction() with no transaction", IllegalStateException.class,
                "READY|beginTransaction() first", ready, ready::prepareTransaction));
        cases.add(c("send with no transaction", IllegalStateException.class, "READY|beginTransaction() first", ready,
                () -> producerOf(ready).send(new ProducerRecord<>(topic, "x"))));
        cases.add(c("initialize() twice", IllegalStateException.class, "READY|initialize", ready, ready::initialize));
        cases.add(c("heartbeat() with no transaction", IllegalStateException.class, "READY|heartbeat", ready,
                ready::heartbeat));
        cases.add(c("completeTransaction() on a live session with no transaction", IllegalStateException.class,
                "READY", ready, () -> ready.completeTransaction(knownCommitted)));
        cases.add(c("beginTransaction() twice", IllegalStateException.class, "IN_TRANSACTION|beginTransaction",
                inTransaction, inTransaction::beginTransaction));
        cases.add(c("initialize() in a transaction", IllegalStateException.class, "IN_TRANSACTION|initialize",
                inTransaction, inTransaction::initialize));
        cases.add(c("completeTransaction(null)", NullPointerException.class, "prepared", inTransaction,
                () -> inTransaction.completeTransaction((PreparedTransaction) null)));
        cases.add(c("addPartitionsToTransaction(null)", NullPointerException.class, "partitions", inTransaction,
                () -> inTransaction.addPartitionsToTransaction(null)));
        cases.add(c("sendOffsetsToTransaction(null offsets)", NullPointerException.class, "offsets", inTransaction,
                () -> producerOf(inTransaction).sendOffsetsToTransaction(null, new ConsumerGroupMetadata("g"))));
        cases.add(c("sendOffsetsToTransaction(null group)", NullPointerException.class, "group", inTransaction,
                () -> producerOf(inTransaction).sendOffsetsToTransaction(
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(1)), null)));
        cases.add(c("send(null record)", NullPointerException.class, "record", inTransaction,
                () -> producerOf(inTransaction).send(null)));
        cases.add(c("addListener(null)", NullPointerException.class, "listener", inTransaction,
                () -> inTransaction.addListener(null)));
        cases.add(c("close(null timeout)", NullPointerException.class, "timeout", inTransaction,
                () -> inTransaction.close(null)));
        cases.add(c("new SessionProducer(null session)", NullPointerException.class, "session",
                () -> new SessionProducer<>(null, new StringSerializer(), new StringSerializer())));
        cases.add(c("new SessionProducer(null serializer)", NullPointerException.class, "Serializer",
                () -> new SessionProducer<>(ready, null, new StringSerializer())));
        // ---------------------------------------------------------------- reuse after close
        cases.add(c("beginTransaction() after close()", IllegalStateException.class, "CLOSED|create a new one",
                closed, closed::beginTransaction));
        cases.add(c("initialize() after close()", IllegalStateException.class, "CLOSED|create a new one", closed,
                closed::initialize));
        cases.add(c("send after close()", IllegalStateException.class, "CLOSED", closed,
                () -> producerOf(closed).send(new ProducerRecord<>(topic, "x"))));
        cases.add(c("send through a closed SessionProducer", IllegalStateException.class, "closed", ready, () -> {
            SessionProducer<String, String> p = producerOf(ready);
            p.close();
            p.send(new ProducerRecord<>(topic, "x"));
        }));
        cases.add(c("TransactionCommitter used after close()", IllegalStateException.class, "closed", () -> {
            TransactionCommitter committer = TransactionCommitter.create(resumeConfigs());
            committer.close();
            committer.commit(knownId, knownCommitted);
        }));
        // ---------------------------------------------------------------- external committer
        cases.add(c("TransactionCommitter.create(null)", NullPointerException.class, "configs",
                () -> TransactionCommitter.create(null)));
        cases.add(c("TransactionCommitter without bootstrap.servers", InvalidSessionConfigException.class,
                "bootstrap.servers", () -> TransactionCommitter.create(Map.of()).close()));
        cases.add(c("TransactionCommitter.commit(blank id)", IllegalArgumentException.class, "transactional",
                () -> {
                    try (TransactionCommitter committer = TransactionCommitter.create(resumeConfigs())) {
                        committer.commit(" ", knownCommitted);
                    }
                }));
        cases.add(c("TransactionCommitter.commit(null prepared)", NullPointerException.class, "prepared", () -> {
            try (TransactionCommitter committer = TransactionCommitter.create(resumeConfigs())) {
                committer.commit(knownId, null);
            }
        }));
        cases.add(c("TransactionCommitter.commit of an unknown id", TransactionSupersededException.class,
                "does not know", () -> {
                    try (TransactionCommitter committer = TransactionCommitter.create(resumeConfigs())) {
                        committer.commit(EmbeddedKafkaCluster.uniqueName("bi-never"), PreparedTransaction.of(7,
                                (short) 0, -1));
                    }
                }));
        // ---------------------------------------------------------------- bound consumers
        cases.add(c("share consumer in implicit acknowledgement mode", InvalidSessionConfigException.class,
                "share.acknowledgement.mode|explicit", () -> {
                    Map<String, Object> m = shareConsumerConfigs(kafka.cluster(), "bi-share");
                    m.put(TransactionalShareConsumer.ACKNOWLEDGEMENT_MODE_CONFIG, "implicit");
                    new TransactionalShareConsumer<>(m, new StringDeserializer(), new StringDeserializer()).close();
                }));
        cases.add(c("share consumer without group.id", InvalidSessionConfigException.class, "group.id", () -> {
            Map<String, Object> m = shareConsumerConfigs(kafka.cluster(), "bi-share");
            m.remove(ConsumerConfig.GROUP_ID_CONFIG);
            new TransactionalShareConsumer<>(m, new StringDeserializer(), new StringDeserializer()).close();
        }));
        // ---------------------------------------------------------------- share outcome ledger
        cases.add(c("ledger with a blank topic", IllegalArgumentException.class, "topic", () -> new ShareOutcomeLedger(
                kafka.cluster().clientConfigs(), " ", Duration.ofSeconds(5)).close()));
        cases.add(c("ledger with a zero lookup timeout", IllegalArgumentException.class, "timeout|positive",
                () -> new ShareOutcomeLedger(kafka.cluster().clientConfigs(), "bi-ledger", Duration.ZERO).close()));
        cases.add(c("ledger without bootstrap.servers", InvalidSessionConfigException.class, "bootstrap.servers",
                () -> new ShareOutcomeLedger(Map.of("client.id", "x")).close()));
        cases.add(c("ledger on a topic that is not compacted", IllegalArgumentException.class,
                "cleanup.policy=delete|compact", () -> {
                    String topic = EmbeddedKafkaCluster.uniqueName("bi-ledger-delete");
                    kafka.cluster().createTopic(topic, 1);
                    new ShareOutcomeLedger(kafka.cluster().clientConfigs(), topic, Duration.ofSeconds(10)).close();
                }));
        cases.add(c("useOutcomeLedger(null)", NullPointerException.class, "ledger", () -> {
            try (var consumer = new TransactionalShareConsumer<>(shareConsumerConfigs(kafka.cluster(), "bi-share"),
                    new StringDeserializer(), new StringDeserializer())) {
                consumer.useOutcomeLedger(null);
            }
        }));
        cases.add(c("new TransactionalConsumer(null)", NullPointerException.class, "delegate",
                () -> new TransactionalConsumer<String, String>(null)));
        cases.add(c("bindTransactionSession(null)", NullPointerException.class, "session", () -> {
            try (TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(new KafkaConsumer<>(
                    consumerConfigs(kafka.cluster(), "bi-group"), new StringDeserializer(),
                    new StringDeserializer()))) {
                consumer.bindTransactionSession(null);
            }
        }));
        // ---------------------------------------------------------------- callbacks and interrupts
        cases.add(c("commitTransaction() from a send callback", IllegalStateException.class, "callback", () -> {
            Map<String, Object> m = configs();
            try (TransactionSession s = TransactionSession.open(m)) {
                s.initialize();
                s.beginTransaction();
                AtomicReference<Throwable> inCallback = new AtomicReference<>();
                producerOf(s).send(new ProducerRecord<>(topic, "x"), (md, ex) -> {
                    try {
                        s.commitTransaction();
                    }
                    catch (Throwable t) {
                        inCallback.set(t);
                    }
                }).get(30, TimeUnit.SECONDS);
                s.commitTransaction();
                rethrow(inCallback.get());
            }
        }));
        cases.add(c("initialize() on an interrupted thread", org.apache.kafka.common.errors.InterruptException.class,
                "interrupt", () -> {
                    try (TransactionSession s = TransactionSession.open(configs())) {
                        CompletableFuture<Throwable> f = CompletableFuture.supplyAsync(() -> {
                            Thread.currentThread().interrupt();
                            try {
                                s.initialize();
                                return null;
                            }
                            catch (Throwable t) {
                                return t;
                            }
                            finally {
                                Thread.interrupted();
                            }
                        });
                        Throwable t = f.get(60, TimeUnit.SECONDS);
                        assertThat(s.state()).as("state after an interrupted initialize()").isIn(
                                SessionState.UNINITIALIZED, SessionState.FATAL_ERROR);
                        rethrow(t);
                    }
                }));
        return cases;
    }

    private static void rethrow(@Nullable Throwable t) throws Exception {
        if (t instanceof Exception e) {
            throw e;
        }
        if (t instanceof Error e) {
            throw e;
        }
    }

    @TestFactory
    @Order(1)
    Stream<DynamicTest> everyBadInputFailsWithATypedErrorThatNamesTheFault() {
        List<Case> cases = cases();
        assertThat(cases).as("cases").hasSizeGreaterThanOrEqualTo(60);
        return cases.stream().map(k -> DynamicTest.dynamicTest(k.name(), () -> check(k)));
    }

    private static void check(Case k) {
        SessionState before = k.stateUnchanged() == null ? null : k.stateUnchanged().state();
        Throwable thrown = null;
        try {
            k.call().run();
        }
        catch (Throwable t) {
            thrown = t;
        }
        String message = thrown == null ? "(no error)" : String.valueOf(thrown.getMessage());
        REPORT.add("| " + (REPORT.size() + 1) + " | " + k.name().replace("|", "\\|") + " | "
                + (thrown == null ? "none" : thrown.getClass().getSimpleName()) + " | "
                + message.replace("|", "\\|").replace("\n", " ") + " |");
        assertThat(thrown).as("%s: an error", k.name()).isNotNull();
        assertThat(thrown).as("%s: error type (message: %s)", k.name(), message).isInstanceOf(k.error());
        for (String fragment : k.fragments()) {
            assertThat(message.toLowerCase()).as("%s: message names the fault", k.name())
                .contains(fragment.toLowerCase());
        }
        if (k.stateUnchanged() != null) {
            assertThat(k.stateUnchanged().state()).as("%s: state unchanged", k.name()).isEqualTo(before);
        }
    }

    @Test
    @Order(2)
    void noProducerOrHeartbeatThreadIsLeftOver() {
        org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(30)).untilAsserted(() -> assertThat(threads())
            .as("producer and heartbeat threads (the fixtures' 3 sessions still open)")
            .isLessThanOrEqualTo(threadsBefore + 3));
        String names = Thread.getAllStackTraces().keySet().stream().map(Thread::getName)
            .filter(n -> LEAK_PREFIXES.stream().anyMatch(n::startsWith)).collect(Collectors.joining(", "));
        System.out.println("bad input: session threads at the end: " + names);
    }
}
