package io.github.txnsession.kafka;

import java.util.Map;

import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * A producer interceptor that holds up every acknowledgement for {@link #DELAY_MS} on the producer's I/O thread: a
 * flush (which waits for the acknowledgements' callbacks) then takes at least that long, as against a slow broker.
 * The pause is the behaviour under test, not a wait for something else to happen.
 */
public final class SlowAcknowledgementInterceptor implements ProducerInterceptor<byte[], byte[]> {

    /** how long each acknowledgement is held up, longer than the look-during-flush cap of 20 ms */
    static final long DELAY_MS = 30;

    @Override
    public ProducerRecord<byte[], byte[]> onSend(ProducerRecord<byte[], byte[]> record) {
        return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
        try {
            Thread.sleep(DELAY_MS);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
        }
    }

    @Override
    public void close() {
    }

    @Override
    public void configure(Map<String, ?> configs) {
    }
}
