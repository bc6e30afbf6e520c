package io.github.txnsession.kafka;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.GroupAuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.TransactionAbortableException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** How kafka-clients' errors are classified: only the error and kafka-clients' own wrapper are looked at. */
class KafkaErrorsTest {

    private static KafkaException wrapped(Throwable cause) {
        return new KafkaException("Cannot execute transactional method because we are in an error state", cause);
    }

    @Test
    void fencingIsTheProducerFencedErrorItselfOrInKafkaClientsWrapper() {
        assertThat(KafkaErrors.isFenced(new ProducerFencedException("fenced"))).isTrue();
        assertThat(KafkaErrors.isFenced(wrapped(new ProducerFencedException("fenced")))).isTrue();
        // with transaction version 2 an epoch the coordinator moved past is abortable, not fencing
        assertThat(KafkaErrors.isFenced(new InvalidProducerEpochException("epoch"))).isFalse();
        assertThat(KafkaErrors.isFatal(new InvalidProducerEpochException("epoch"))).isFalse();
    }

    @Test
    void topicAndGroupAuthorizationAreAbortableTransactionalIdAuthorizationIsFatal() {
        assertThat(KafkaErrors.isFatal(wrapped(new TopicAuthorizationException("topic")))).isFalse();
        assertThat(KafkaErrors.isFatal(wrapped(new GroupAuthorizationException("group")))).isFalse();
        assertThat(KafkaErrors.isFatal(wrapped(new TransactionalIdAuthorizationException("id")))).isTrue();
        assertThat(KafkaErrors.isFatal(new TransactionAbortableException("abortable"))).isFalse();
    }

    @Test
    void anAbortableErrorThatWrapsAFatalLookingCauseDeeperDownStaysAbortable() {
        KafkaException deep = new TransactionAbortableException("abortable",
                new KafkaException("inner", new ProducerFencedException("old")));
        assertThat(KafkaErrors.isFenced(deep)).isFalse();
        assertThat(KafkaErrors.isFatal(deep)).isFalse();
        assertThat(KafkaErrors.isFenced(wrapped(wrapped(new ProducerFencedException("two levels"))))).isFalse();
    }
}
