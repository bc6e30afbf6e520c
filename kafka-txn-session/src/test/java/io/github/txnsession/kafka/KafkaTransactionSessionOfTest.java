package io.github.txnsession.kafka;

import java.lang.reflect.Proxy;
import java.util.Map;

import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatNullPointerException;

/**
 * Producers and consumers bind to the sessions {@link TransactionSession#open} and {@link TransactionSession#resume}
 * create, and refuse other implementations of the interface (a proxy) with a message that says what to bind instead.
 * No broker is needed: nothing connects.
 */
class KafkaTransactionSessionOfTest {

    /** Another implementation of the interface, as a transaction-scoped proxy would be. */
    private static TransactionSession foreign() {
        return (TransactionSession) Proxy.newProxyInstance(TransactionSession.class.getClassLoader(),
                new Class<?>[] { TransactionSession.class }, (proxy, method, args) -> {
                    if (method.getName().equals("toString")) {
                        return "ForeignSession";
                    }
                    throw new UnsupportedOperationException(method.getName());
                });
    }

    @Test
    void aForeignImplementationIsRefusedSayingWhatToBindInstead() {
        TransactionSession foreign = foreign();
        assertThatIllegalArgumentException().isThrownBy(() -> KafkaTransactionSession.of(foreign))
            .withMessageContaining("'ForeignSession'")
            .withMessageContaining("was not created by TransactionSession.open(...) or TransactionSession.resume(...)")
            .withMessageContaining("a proxy?")
            .withMessageContaining("Bind the session itself, e.g. CurrentTransactionSession.get() in Spring");
        assertThatNullPointerException().isThrownBy(() -> KafkaTransactionSession.of(null));
    }

    @Test
    void producersAndConsumersRefuseAForeignImplementationBeforeTouchingIt() {
        TransactionSession foreign = foreign();
        assertThatIllegalArgumentException()
            .isThrownBy(() -> new SessionProducer<>(foreign, new StringSerializer(), new StringSerializer()))
            .withMessageContaining("a proxy?");
        @SuppressWarnings("unchecked")
        Consumer<String, String> untouched = (Consumer<String, String>) Proxy.newProxyInstance(
                Consumer.class.getClassLoader(), new Class<?>[] { Consumer.class }, (proxy, method, args) -> {
                    throw new AssertionError("the consumer was used: " + method.getName());
                });
        TransactionalConsumer<String, String> consumer = new TransactionalConsumer<>(untouched);
        assertThatIllegalArgumentException().isThrownBy(() -> consumer.bindTransactionSession(foreign))
            .withMessageContaining("a proxy?");
        assertThat(consumer.transactionSession()).isNull();
    }

    @Test
    void aSessionFromOpenIsItsOwnImplementation() {
        try (TransactionSession session = TransactionSession.open(Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "localhost:1",
                ProducerConfig.TRANSACTIONAL_ID_CONFIG, "of-test"))) {
            assertThat(KafkaTransactionSession.of(session)).isSameAs(session);
            assertThat(session.state()).isEqualTo(SessionState.UNINITIALIZED);
        }
    }
}
