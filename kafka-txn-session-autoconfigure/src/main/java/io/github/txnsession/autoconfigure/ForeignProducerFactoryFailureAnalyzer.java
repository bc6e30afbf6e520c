package io.github.txnsession.autoconfigure;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/** Explains a {@link ForeignProducerFactoryException} at startup: what happened and the three ways out. */
class ForeignProducerFactoryFailureAnalyzer extends AbstractFailureAnalyzer<ForeignProducerFactoryException> {

    @Override
    protected FailureAnalysis analyze(Throwable rootFailure, ForeignProducerFactoryException cause) {
        return new FailureAnalysis("The application defines ProducerFactory bean(s) " + cause.beanNames()
                + " that do not write into the Kafka transaction sessions of kafka-txn-session. The starter's "
                + "session-backed factory backs off when a ProducerFactory exists, so KafkaTemplate would send "
                + "outside every transaction and rolled-back records would be visible.",
                "Do one of: (1) remove the ProducerFactory bean and configure serializers and producer settings with "
                        + "spring.kafka.producer.* (the starter's factory uses them); (2) define a "
                        + "io.github.txnsession.spring.SessionProducerFactory bean over the TransactionSessionPool "
                        + "instead; (3) if that factory is deliberately non-transactional, set "
                        + "kafka.txn-session.allow-non-session-producer-factories=true.",
                cause);
    }
}
