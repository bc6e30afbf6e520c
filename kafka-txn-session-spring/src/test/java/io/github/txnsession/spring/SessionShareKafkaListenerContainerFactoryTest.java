package io.github.txnsession.spring;

import java.time.Duration;
import java.util.List;
import java.util.Collection;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import org.springframework.kafka.config.KafkaListenerEndpoint;
import org.springframework.kafka.core.DefaultShareConsumerFactory;
import org.springframework.kafka.listener.AcknowledgingShareConsumerAwareMessageListener;
import org.springframework.kafka.listener.ContainerProperties;
import org.springframework.kafka.listener.MessageListener;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.listener.ShareConsumerRecordRecoverer;
import org.springframework.kafka.listener.ShareKafkaMessageListenerContainer;
import org.springframework.kafka.support.TopicPartitionOffset;
import org.springframework.kafka.support.converter.MessageConverter;
import org.springframework.test.util.ReflectionTestUtils;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.AbstractPlatformTransactionManager;
import org.springframework.transaction.support.DefaultTransactionStatus;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The {@code @KafkaListener} share factory without a broker: what it wraps, what it refuses. (Against a broker, with
 * outages, slow listeners, failed commits and a ledger: {@code TransactionalConsumersTest} in the starter.)
 */
class SessionShareKafkaListenerContainerFactoryTest {

    private static final Map<String, Object> NOWHERE = Map.of("bootstrap.servers", "localhost:9");

    private final CountingTransactionManager transactions = new CountingTransactionManager();
    private final TransactionSessionPool pool = new TransactionSessionPool("share-factory-", 1, Duration.ofSeconds(1),
            NOWHERE, List.of());
    private final SessionShareKafkaListenerContainerFactory<String, String> factory =
            new SessionShareKafkaListenerContainerFactory<>(new DefaultShareConsumerFactory<>(NOWHERE,
                    StringDeserializer::new, StringDeserializer::new), this.transactions,
                    new TransactionalConsumerFactory(this.pool, NOWHERE));

    private ShareKafkaMessageListenerContainer<String, String> container(MessageListener<String, String> listener) {
        return this.factory.createListenerContainer(new Endpoint(listener));
    }

    @AfterEach
    void closePool() {
        this.pool.close();
    }

    @Test
    void theListenerIsWrappedAndRefusesRecordsOfAConsumerTheFactoryDidNotMake() {
        AtomicInteger calls = new AtomicInteger();
        Object wrapped = container(r -> calls.incrementAndGet()).getContainerProperties().getMessageListener();
        assertThat(wrapped).isInstanceOf(AcknowledgingShareConsumerAwareMessageListener.class);
        @SuppressWarnings("unchecked")
        AcknowledgingShareConsumerAwareMessageListener<String, String> listener =
                (AcknowledgingShareConsumerAwareMessageListener<String, String>) wrapped;
        try (KafkaShareConsumer<String, String> plain = new KafkaShareConsumer<>(
                Map.of("bootstrap.servers", "localhost:9", "group.id", "workers"), new StringDeserializer(),
                new StringDeserializer())) {
            assertThatIllegalStateException()
                .isThrownBy(() -> listener.onShareRecord(new ConsumerRecord<>("tasks", 0, 7L, "k", "v"), null, plain))
                .withMessageContaining("not made by its SessionShareKafkaListenerContainerFactory");
        }
        assertThat(calls).hasValue(0);
        assertThat(this.transactions.commits).hasValue(0);
    }

    @Test
    void aManagerWithoutSessionsNeedsTheBindingFactory() {
        assertThatIllegalArgumentException()
            .isThrownBy(() -> new SessionShareKafkaListenerContainerFactory<>(new DefaultShareConsumerFactory<>(
                    NOWHERE, StringDeserializer::new, StringDeserializer::new), this.transactions))
            .withMessageContaining(CountingTransactionManager.class.getName())
            .withMessageContaining("TransactionalConsumerFactory");
    }

    @Test
    void aTransientFailureIsReleasedWhateverRecovererIsSet() {
        this.factory.setShareConsumerRecordRecoverer(ShareConsumerRecordRecoverer.REJECTING);
        ShareKafkaMessageListenerContainer<String, String> container = container(r -> { });
        ConsumerRecord<String, String> record = new ConsumerRecord<>("tasks", 0, 7L, "k", "v");
        ShareConsumerRecordRecoverer recoverer = (ShareConsumerRecordRecoverer) ReflectionTestUtils.invokeMethod(container, "getShareConsumerRecordRecoverer");
        assertThat(recoverer).isNotNull();
        assertThat(recoverer.recover(record, new TimeoutException("outage"))).isEqualTo(AcknowledgeType.RELEASE);
        assertThat(recoverer.recover(record, new IllegalArgumentException("bad"))).isEqualTo(AcknowledgeType.REJECT);
    }

    @Test
    void ackModesThatWouldAcknowledgeRolledBackWorkAreRefused() {
        for (ContainerProperties.ShareAckMode mode : List.of(ContainerProperties.ShareAckMode.MANUAL,
                ContainerProperties.ShareAckMode.IMPLICIT)) {
            this.factory.getContainerProperties().setShareAckMode(mode);
            assertThatIllegalStateException().isThrownBy(() -> container(r -> { }))
                .withMessageContaining("ShareAckMode." + mode)
                .withMessageContaining("needs EXPLICIT");
        }
    }

    @Test
    void programmaticContainersAreRefusedBecauseTheirListenerCannotBeWrapped() {
        assertThatThrownBy(() -> this.factory.createContainer("tasks"))
            .isInstanceOf(UnsupportedOperationException.class)
            .hasMessageContaining("SessionShareListenerContainer");
        assertThatThrownBy(() -> this.factory.setTransientRetryTime(Duration.ofSeconds(-1)))
            .isInstanceOf(IllegalArgumentException.class);
    }

    /** An endpoint as {@code @KafkaListener} registers one: it sets up the container's listener. */
    private record Endpoint(MessageListener<String, String> listener) implements KafkaListenerEndpoint {

        @Override
        public String getId() {
            return "tasks-listener";
        }

        @Override
        public String getGroupId() {
            return "workers";
        }

        @Override
        public @Nullable String getGroup() {
            return null;
        }

        @Override
        public Collection<String> getTopics() {
            return List.of("tasks");
        }

        @Override
        public TopicPartitionOffset @Nullable [] getTopicPartitionsToAssign() {
            return null;
        }

        @Override
        public @Nullable Pattern getTopicPattern() {
            return null;
        }

        @Override
        public @Nullable String getClientIdPrefix() {
            return null;
        }

        @Override
        public @Nullable Integer getConcurrency() {
            return null;
        }

        @Override
        public @Nullable Boolean getAutoStartup() {
            return null;
        }

        @Override
        public void setupListenerContainer(MessageListenerContainer container, @Nullable MessageConverter converter) {
            container.setupMessageListener(this.listener);
        }

        @Override
        public boolean isSplitIterables() {
            return false;
        }

        @Override
        public @Nullable String getAckMode() {
            return null;
        }
    }

    /** Counts commits and rollbacks; holds no resource. */
    private static final class CountingTransactionManager extends AbstractPlatformTransactionManager {

        private static final long serialVersionUID = 1L;
        final AtomicInteger commits = new AtomicInteger();
        final AtomicInteger rollbacks = new AtomicInteger();

        @Override
        protected Object doGetTransaction() {
            return new Object();
        }

        @Override
        protected void doBegin(Object transaction, TransactionDefinition definition) {
        }

        @Override
        protected void doCommit(DefaultTransactionStatus status) {
            this.commits.incrementAndGet();
        }

        @Override
        protected void doRollback(DefaultTransactionStatus status) {
            this.rollbacks.incrementAndGet();
        }
    }
}
