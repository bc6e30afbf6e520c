package io.github.txnsession.autoconfigure;

import java.util.List;

/**
 * The application defines its own {@code ProducerFactory} that does not write into the transaction sessions: the
 * starter's session-backed factory backed off, so {@code KafkaTemplate} would send outside every transaction (its
 * records visible even when the transaction rolls back). Startup stops instead; {@link
 * ForeignProducerFactoryFailureAnalyzer} says what to change.
 */
public class ForeignProducerFactoryException extends IllegalStateException {

    private static final long serialVersionUID = 1L;

    /** The names of the application's producer factory beans that are not session-backed (an unmodifiable copy). */
    private final List<String> beanNames;

    /** @param beanNames the application's producer factory beans that are not session-backed */
    public ForeignProducerFactoryException(List<String> beanNames) {
        super("The ProducerFactory bean(s) " + beanNames + " do not write into the Kafka transaction sessions, so "
                + "KafkaTemplate sends would bypass every transaction");
        this.beanNames = List.copyOf(beanNames);
    }

    /** @return the offending bean names */
    public List<String> beanNames() {
        return this.beanNames;
    }
}
