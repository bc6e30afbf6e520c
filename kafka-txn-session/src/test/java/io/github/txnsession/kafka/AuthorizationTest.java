package io.github.txnsession.kafka;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.classic.spi.ThrowableProxyUtil;
import ch.qos.logback.core.read.ListAppender;
import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.slf4j.LoggerFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Security (issue R5) on a SASL/PLAIN cluster with the ACL authorizer. A principal without {@code Write} on the
 * transactional id is refused at {@code initialize()} with {@link SessionAuthorizationException} (a new session works
 * once the ACL is granted), at {@code resume()} with Kafka's authorization error, before anything is written; one with {@code Describe} only gets the same; one with {@code Write} on the id but not on a
 * topic gets an abortable error: the transaction aborts and the session goes on. Throughout, every log line (the
 * library's at TRACE), exception message, stack trace and {@code toString()} is searched for the passwords: none may
 * appear.
 */
class AuthorizationTest {

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.with(EmbeddedKafkaCluster.Builder::saslPlain);

    /** The non-super user of the embedded SASL cluster (Kafka's test kit defines it). */
    private static final String USER = "plain-user1";
    private static final String USER_PASSWORD = "plain-user1-secret";
    private static final List<String> SECRETS = List.of(USER_PASSWORD, EmbeddedKafkaCluster.SASL_PASSWORD,
            "not-the-password");

    private static final ListAppender<ILoggingEvent> LOGS = new ListAppender<>();
    private static final List<String> SEEN = new ArrayList<>();
    private static Level libraryLevel;
    private static Level clientsLevel;

    @BeforeAll
    static void captureLogs() {
        Logger root = (Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        LOGS.start();
        root.addAppender(LOGS);
        Logger library = (Logger) LoggerFactory.getLogger("io.github.txnsession");
        libraryLevel = library.getLevel();
        library.setLevel(Level.TRACE);
        Logger clients = (Logger) LoggerFactory.getLogger("org.apache.kafka.clients");
        clientsLevel = clients.getLevel();
        clients.setLevel(Level.INFO); // the clients' config dumps
    }

    @AfterAll
    static void noSecretAnywhere() {
        Logger root = (Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
        root.detachAppender(LOGS);
        ((Logger) LoggerFactory.getLogger("io.github.txnsession")).setLevel(libraryLevel);
        ((Logger) LoggerFactory.getLogger("org.apache.kafka.clients")).setLevel(clientsLevel);
        List<String> text = new ArrayList<>(SEEN);
        for (ILoggingEvent e : LOGS.list) {
            text.add(e.getFormattedMessage());
            if (e.getThrowableProxy() != null) {
                text.add(ThrowableProxyUtil.asString(e.getThrowableProxy()));
            }
        }
        assertThat(text).as("log lines, messages and toString() output searched").hasSizeGreaterThan(20);
        for (String secret : SECRETS) {
            assertThat(text).as("no password in logs, messages or toString()")
                .noneMatch(line -> line != null && line.contains(secret));
        }
    }

    private static Map<String, Object> as(String user, String password, String transactionalId) {
        Map<String, Object> configs = new HashMap<>(EmbeddedKafkaCluster.saslClientConfigs(user, password));
        configs.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
        configs.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        configs.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 15_000);
        return configs;
    }

    private static void allow(ResourceType type, String name, AclOperation... operations) throws Exception {
        List<AclBinding> bindings = new ArrayList<>();
        for (AclOperation op : operations) {
            bindings.add(new AclBinding(new ResourcePattern(type, name, PatternType.LITERAL),
                    new AccessControlEntry("User:" + USER, "*", op, AclPermissionType.ALLOW)));
        }
        kafka.cluster().admin().createAcls(bindings).all().get();
    }

    /** Keeps what a user or operator would see: the exception's whole chain, printed. */
    private static Throwable seen(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        SEEN.add(w.toString());
        System.out.println("authorization test saw: " + t + (t.getCause() == null ? "" : " <- " + t.getCause()));
        return t;
    }

    @Test
    void withoutWriteOnTheIdInitializeIsRefusedBeforeAnythingIsWritten() throws Exception {
        String txnId = EmbeddedKafkaCluster.uniqueName("acl-none");
        try (TransactionSession s = TransactionSession.open(as(USER, USER_PASSWORD, txnId))) {
            SEEN.add(s.toString());
            assertThatThrownBy(s::initialize).satisfies(AuthorizationTest::seen)
                .satisfies(ex -> assertThat(authorizationCause(ex)).as("an authorization error in %s", ex).isTrue());
            assertThat(s.state()).as("kafka-clients' producer cannot go on").isEqualTo(SessionState.FATAL_ERROR);
            SEEN.add(s.toString());
        }
        allow(ResourceType.TRANSACTIONAL_ID, txnId, AclOperation.WRITE, AclOperation.DESCRIBE);
        org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).untilAsserted(() -> {
            try (TransactionSession again = TransactionSession.open(as(USER, USER_PASSWORD, txnId))) {
                again.initialize(); // a new session, once the ACL has reached the broker's authorizer
                assertThat(again.state()).isEqualTo(SessionState.READY);
            }
            catch (SessionAuthorizationException notYet) {
                throw new AssertionError(notYet);
            }
        });
    }

    @Test
    void describeOnlyOnTheIdIsRefusedToo() throws Exception {
        String txnId = EmbeddedKafkaCluster.uniqueName("acl-describe");
        allow(ResourceType.TRANSACTIONAL_ID, txnId, AclOperation.DESCRIBE);
        try (TransactionSession s = TransactionSession.open(as(USER, USER_PASSWORD, txnId))) {
            assertThatThrownBy(s::initialize).satisfies(AuthorizationTest::seen)
                .satisfies(ex -> assertThat(authorizationCause(ex)).as("an authorization error in %s", ex).isTrue());
        }
    }

    @Test
    void resumeWithoutRightsOnTheIdIsRefused() throws Exception {
        String txnId = EmbeddedKafkaCluster.uniqueName("acl-resume");
        String topic = EmbeddedKafkaCluster.uniqueName("acl-resume-topic");
        kafka.cluster().createTopic(topic, 1);
        PreparedTransaction prepared;
        try (TransactionSession admin = TransactionSession.open(TestClients.sessionConfigs(kafka.cluster(), txnId))) {
            admin.initialize();
            admin.beginTransaction();
            new SessionProducer<>(admin, new StringSerializer(), new StringSerializer())
                .send(new ProducerRecord<>(topic, "prepared by the admin"));
            prepared = admin.prepareTransaction();
            Map<String, Object> user = as(USER, USER_PASSWORD, txnId);
            user.remove(ProducerConfig.TRANSACTIONAL_ID_CONFIG);
            assertThatThrownBy(() -> TransactionSession.resume(txnId, prepared, user))
                .satisfies(AuthorizationTest::seen)
                .isInstanceOf(org.apache.kafka.common.errors.TransactionalIdAuthorizationException.class);
            assertThatThrownBy(() -> {
                try (TransactionCommitter committer = TransactionCommitter.create(user)) {
                    SEEN.add(committer.toString());
                    committer.commit(txnId, prepared);
                }
            }).satisfies(AuthorizationTest::seen).isInstanceOf(TransactionSessionException.class)
                .satisfies(ex -> assertThat(hasCause(ex, AuthorizationException.class)).as("%s", ex).isTrue());
            admin.abortTransaction();
        }
        assertThat(TestClients.values(TestClients.readCommitted(kafka.cluster(), topic))).isEmpty();
    }

    @Test
    void writeOnTheIdButNotOnATopicIsAbortableAndTheSessionGoesOn() throws Exception {
        String txnId = EmbeddedKafkaCluster.uniqueName("acl-topic");
        String forbidden = EmbeddedKafkaCluster.uniqueName("acl-forbidden");
        String allowed = EmbeddedKafkaCluster.uniqueName("acl-allowed");
        kafka.cluster().createTopic(forbidden, 1);
        kafka.cluster().createTopic(allowed, 1);
        allow(ResourceType.TRANSACTIONAL_ID, txnId, AclOperation.WRITE, AclOperation.DESCRIBE);
        allow(ResourceType.TOPIC, allowed, AclOperation.WRITE, AclOperation.DESCRIBE);
        try (TransactionSession s = TransactionSession.open(as(USER, USER_PASSWORD, txnId))) {
            s.initialize();
            SessionProducer<String, String> producer = new SessionProducer<>(s, new StringSerializer(),
                    new StringSerializer());
            s.beginTransaction();
            producer.send(new ProducerRecord<>(allowed, "aborted with its neighbour"));
            Throwable failure = null;
            try {
                producer.send(new ProducerRecord<>(forbidden, "refused")); // fails in the background, or at once
                s.commitTransaction();
            }
            catch (Exception ex) {
                failure = seen(ex);
            }
            assertThat(failure).as("the send to a topic without Write, or the commit after it, fails")
                .isInstanceOf(SessionAbortableException.class);
            assertThat(hasCause(failure, TopicAuthorizationException.class)).as("%s", failure).isTrue();
            assertThat(s.state()).as("abortable, not fatal").isEqualTo(SessionState.ABORTABLE_ERROR);
            s.abortTransaction();
            assertThat(s.state()).isEqualTo(SessionState.READY);
            s.beginTransaction();
            producer.send(new ProducerRecord<>(allowed, "committed after the abort"));
            s.commitTransaction();
            SEEN.add(s.toString());
        }
        assertThat(TestClients.values(TestClients.readCommitted(kafka.cluster(), allowed)))
            .containsExactly("committed after the abort");
    }

    @Test
    void aWrongPasswordIsAnAuthenticationErrorThatDoesNotShowThePassword() {
        String txnId = EmbeddedKafkaCluster.uniqueName("acl-auth");
        try (TransactionSession s = TransactionSession.open(as(USER, "not-the-password", txnId))) {
            assertThatThrownBy(s::initialize).satisfies(AuthorizationTest::seen)
                .isInstanceOf(SessionAuthorizationException.class).hasMessageContaining("security settings")
                .satisfies(ex -> assertThat(s.state()).isEqualTo(SessionState.FATAL_ERROR))
                .satisfies(ex -> assertThat(hasCause(ex,
                        org.apache.kafka.common.errors.AuthenticationException.class)).as("%s", ex).isTrue());
        }
    }

    /** initialize(): the library's typed error, naming the id and the ACL, with Kafka's error as its cause. */
    private static boolean authorizationCause(Throwable t) {
        return t instanceof SessionAuthorizationException && hasCause(t, AuthorizationException.class)
                && t.getMessage().contains("TransactionalId '");
    }

    private static boolean hasCause(Throwable t, Class<? extends Throwable> type) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (type.isInstance(c)) {
                return true;
            }
        }
        return false;
    }
}
