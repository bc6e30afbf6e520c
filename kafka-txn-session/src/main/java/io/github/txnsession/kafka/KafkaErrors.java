package io.github.txnsession.kafka;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.InvalidTxnStateException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.apache.kafka.common.errors.UnsupportedForMessageFormatException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.jspecify.annotations.Nullable;

/**
 * Classifies what kafka-clients' transactional producer throws. It throws either the error itself, or a plain
 * {@link KafkaException} ("Cannot execute transactional method because we are in an error state") whose direct cause
 * is the error that put it in that state. So only those two levels are looked at: an abortable error that wraps a
 * fatal-looking cause deeper down stays abortable.
 *
 * <ul>
 * <li>Fenced: {@link ProducerFencedException} (a newer producer with the same transactional.id). Not
 * {@code InvalidProducerEpochException}: with transaction version 2 that means the coordinator moved past the epoch
 * (e.g. a timeout-abort), which kafka-clients treats as abortable.</li>
 * <li>Fatal (the producer cannot go on): transactional-id or cluster authorization, authentication, unsupported
 * version or message format, and an invalid transaction state answered by the coordinator.</li>
 * <li>Everything else is abortable, topic and group authorization included (kafka-clients lets those abort).</li>
 * </ul>
 */
final class KafkaErrors {

    private KafkaErrors() {
    }

    static boolean isFenced(Throwable ex) {
        return ex instanceof ProducerFencedException || wrappedCause(ex) instanceof ProducerFencedException;
    }

    static boolean isFatal(Throwable ex) {
        return isFatalType(ex) || isFatalType(wrappedCause(ex));
    }

    private static boolean isFatalType(@Nullable Throwable t) {
        return t instanceof ProducerFencedException || t instanceof TransactionalIdAuthorizationException
                || t instanceof ClusterAuthorizationException || t instanceof AuthenticationException
                || t instanceof UnsupportedVersionException || t instanceof UnsupportedForMessageFormatException
                || t instanceof InvalidTxnStateException;
    }

    /** The cause of kafka-clients' plain wrapper, else null. */
    private static @Nullable Throwable wrappedCause(Throwable ex) {
        return ex.getClass() == KafkaException.class ? ex.getCause() : null;
    }
}
