package io.github.txnsession.spring;

import java.util.Map;
import java.util.concurrent.Future;

import io.github.txnsession.kafka.SessionProducer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.jspecify.annotations.Nullable;

import org.springframework.transaction.TransactionException;

/**
 * The producer that spring-kafka finds for a session transaction ({@code KafkaResourceHolder#getProducer()}): it sends
 * and adds offsets into the session that {@link SessionTransactionManager} bound to the thread, and checks the
 * transaction's deadline first. Its transaction methods do nothing, because the transaction manager begins, commits
 * and aborts the session; {@code close} does nothing either, because the session goes back to the pool at the end of
 * the transaction.
 */
final class BoundSessionProducer<K, V> extends DelegatingSessionProducer<K, V> {

    private final SessionResourceHolder holder;

    BoundSessionProducer(SessionProducer<K, V> delegate, SessionResourceHolder holder) {
        super(delegate);
        this.holder = holder;
    }

    @Override
    public void beginTransaction() {
        // SessionTransactionManager began the session's transaction
    }

    @Override
    public void commitTransaction() {
        // SessionTransactionManager commits the session's transaction when the Spring transaction commits
    }

    /**
     * The transaction manager aborts the session's transaction when the Spring transaction rolls back; an abort asked
     * for here (by {@code KafkaTemplate.executeInTransaction} whose callback failed inside a running transaction) makes
     * that transaction roll back as a whole: the records already sent cannot be undone on their own, and committing
     * them after the caller caught the failure would publish what the callback meant to abort.
     */
    @Override
    public void abortTransaction() {
        this.holder.requestAbort("abortTransaction() was called on the producer of the transaction (a "
                + "KafkaTemplate.executeInTransaction callback failed)");
    }

    @Override
    public void sendOffsetsToTransaction(Map<TopicPartition, OffsetAndMetadata> offsets,
            ConsumerGroupMetadata groupMetadata) {
        checkDeadline();
        super.sendOffsetsToTransaction(offsets, groupMetadata);
    }

    @Override
    public Future<RecordMetadata> send(ProducerRecord<K, V> record, @Nullable Callback callback) {
        checkDeadline();
        return super.send(record, callback);
    }

    private void checkDeadline() {
        try {
            this.holder.checkDeadline();
        }
        catch (TransactionException ex) {
            throw SessionCommitPoint.duringCommit(ex);
        }
    }

    @Override
    public void close() {
        // the session stays with the transaction; the transaction manager returns it to the pool
    }
}
