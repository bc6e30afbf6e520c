package io.github.txnsession.autoconfigure;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

import io.github.txnsession.spring.SessionAfterRollbackProcessor;
import io.github.txnsession.spring.SessionProducerFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import org.springframework.context.ApplicationListener;
import org.springframework.context.event.ContextRefreshedEvent;
import org.springframework.kafka.config.KafkaListenerEndpointRegistry;
import org.springframework.kafka.listener.AbstractMessageListenerContainer;
import org.springframework.kafka.listener.AfterRollbackProcessor;
import org.springframework.kafka.listener.CommonContainerStoppingErrorHandler;
import org.springframework.kafka.listener.CommonErrorHandler;
import org.springframework.kafka.listener.DefaultAfterRollbackProcessor;
import org.springframework.kafka.listener.MessageListenerContainer;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * Warns, once the context is refreshed, about listener containers running in session transactions whose failures
 * would not reach {@link SessionAfterRollbackProcessor}, so a record could be given up (its output lost) during an
 * outage:
 * <ul>
 * <li>a container with a {@link CommonErrorHandler}: with a transaction manager spring-kafka hands a listener's
 * exception to that handler inside the transaction, so the handler's retry limit applies to outages too;</li>
 * <li>a container on spring-kafka's own {@link DefaultAfterRollbackProcessor} while the starter's processor is
 * defined: its factory was built without Boot's configurer, so the starter's processor never reached it.</li>
 * </ul>
 * These are warnings, not startup failures: both can be deliberate (a dead-letter policy), and neither breaks the
 * atomicity of a transaction; they bound how long an outage may last before a record is skipped.
 */
final class ListenerFailureHandlingCheck implements ApplicationListener<ContextRefreshedEvent> {

    private static final Logger log = LoggerFactory.getLogger(ListenerFailureHandlingCheck.class);

    @Override
    public void onApplicationEvent(ContextRefreshedEvent event) {
        try {
            var context = event.getApplicationContext();
            boolean startersProcessor = context.getBeanNamesForType(SessionAfterRollbackProcessor.class).length > 0;
            // the registries' containers and singleton container beans: never instantiates a prototype
            Set<MessageListenerContainer> containers = Collections.newSetFromMap(new IdentityHashMap<>());
            for (KafkaListenerEndpointRegistry registry : context
                .getBeansOfType(KafkaListenerEndpointRegistry.class, false, false).values()) {
                containers.addAll(registry.getListenerContainers());
            }
            containers.addAll(context.getBeansOfType(MessageListenerContainer.class, false, false).values());
            for (String warning : warnings(new ArrayList<>(containers), startersProcessor)) {
                log.warn(warning);
            }
        }
        catch (RuntimeException ex) {
            // a check that only warns must never fail the application's start
            log.debug("Could not check the listener containers' failure handling", ex);
        }
    }

    /**
     * @param containers the application's listener containers
     * @param startersProcessor whether the starter's {@link SessionAfterRollbackProcessor} bean is defined
     * @return one message per container whose failures would not reach the starter's processor
     */
    static List<String> warnings(List<MessageListenerContainer> containers, boolean startersProcessor) {
        List<String> warnings = new ArrayList<>();
        for (MessageListenerContainer candidate : containers) {
            if (!(candidate instanceof AbstractMessageListenerContainer<?, ?> container)
                    || !runsInSessionTransactions(container)) {
                continue;
            }
            String id = container.getListenerId();
            CommonErrorHandler handler = container.getCommonErrorHandler();
            AfterRollbackProcessor<?, ?> processor = container.getAfterRollbackProcessor();
            if (handler != null && !(handler instanceof CommonContainerStoppingErrorHandler)) {
                warnings.add("Listener container '" + id + "' runs in Kafka transaction sessions and has a "
                        + "CommonErrorHandler (" + handler.getClass().getName() + "): with transactions spring-kafka "
                        + "hands listener exceptions to it inside the transaction, so its retry limit applies to "
                        + "broker and database outages too, and a record it gives up loses its output. Remove the "
                        + "CommonErrorHandler bean (or the error handler set on the container factory, or by "
                        + "@RetryableTopic) to let SessionAfterRollbackProcessor redeliver outages without limit; keep "
                        + "it only if that limit is intended.");
            }
            else if (startersProcessor && processor.getClass() == DefaultAfterRollbackProcessor.class) {
                warnings.add("Listener container '" + id + "' runs in Kafka transaction sessions with spring-kafka's "
                        + "DefaultAfterRollbackProcessor, which skips a record after 10 failed transactions, outages "
                        + "included (its output is then lost): its container factory was not built with Boot's "
                        + "ConcurrentKafkaListenerContainerFactoryConfigurer. Configure the factory with that "
                        + "configurer, or call factory.setAfterRollbackProcessor(...) with the "
                        + "SessionAfterRollbackProcessor bean.");
            }
        }
        return warnings;
    }

    private static boolean runsInSessionTransactions(AbstractMessageListenerContainer<?, ?> container) {
        KafkaAwareTransactionManager<?, ?> kafkaAware = container.getContainerProperties()
            .getKafkaAwareTransactionManager();
        if (kafkaAware != null) {
            return kafkaAware.getProducerFactory() instanceof SessionProducerFactory<?, ?>;
        }
        PlatformTransactionManager plain = container.getContainerProperties().getTransactionManager();
        return plain instanceof KafkaAwareTransactionManager<?, ?> aware
                && aware.getProducerFactory() instanceof SessionProducerFactory<?, ?>;
    }
}
