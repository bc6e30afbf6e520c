package io.github.txnsession.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import io.github.txnsession.kafka.test.KafkaClusterExtension;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static io.github.txnsession.kafka.TestClients.sessionConfigs;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A ledger transaction left open (a worker that died between writing its entry and committing) keeps the ledger's
 * last stable offset where it is until it is aborted. Meanwhile: a lookup of records that transaction does not name
 * answers at once; one of a record it names waits for its outcome; reading a session's own entry waits only for an
 * open transaction writing that entry; and each lookup reads only what was written since the previous one, not the
 * whole open range again (which grows with everything written after the open transaction).
 */
class ShareOutcomeLedgerOpenRangeTest {

    private static final String GROUP = "open-range-group";
    /** long enough for a lookup that must not wait to read the open range on a slow machine (each wait costs it) */
    private static final Duration LOOKUP_TIMEOUT = Duration.ofSeconds(3);

    @RegisterExtension
    static final KafkaClusterExtension kafka = KafkaClusterExtension.withBrokers(1);

    @Test
    void anOpenLedgerTransactionHoldsUpOnlyLookupsOfItsOwnRecordsAndIsReadOnce() throws Exception {
        String topic = EmbeddedKafkaCluster.uniqueName("open-range-ledger");
        ShareRecordId held = new ShareRecordId("tasks", 0, 7);
        ShareRecordId other = new ShareRecordId("tasks", 0, 8);
        try (ShareOutcomeLedger ledger = new ShareOutcomeLedger(kafka.cluster().clientConfigs(), topic,
                LOOKUP_TIMEOUT);
                TransactionSession dead = session("open-range-dead");
                TransactionSession live = session("open-range-live");
                TransactionSession late = session("open-range-late")) {
            SessionProducer<byte[], byte[]> deadOut = producer(dead);
            dead.beginTransaction();
            deadOut.send(entry(topic, "dead-writer", Map.of(held, AcknowledgeType.ACCEPT)));
            deadOut.flush(); // written, never committed: the dead worker's transaction pins the last stable offset

            commitEntries(live, topic, 0, 20);
            // (a lookup that waited would reach the lookup timeout: the open transaction never ends by itself here)
            assertThat(ledger.lookup(GROUP, List.of(other))).as("a record no entry names").isEmpty();
            long afterFirst = ledger.openRecordsRead();
            assertThat(afterFirst).as("the open range read: the open entry and the 20 committed after it")
                .isGreaterThanOrEqualTo(21);

            assertThat(ledger.lookup(GROUP, List.of(other))).isEmpty();
            assertThat(ledger.openRecordsRead()).as("nothing new written: nothing read again").isEqualTo(afterFirst);

            commitEntries(live, topic, 20, 5);
            assertThat(ledger.lookup(GROUP, List.of(other))).isEmpty();
            assertThat(ledger.openRecordsRead() - afterFirst)
                .as("only what was written since the previous lookup is read (5 entries), not the whole open range")
                .isEqualTo(5);

            // would reach the lookup timeout if reading a session's own entry waited for the open 'dead-writer' one
            ledger.warm(GROUP, "another-writer", (KafkaTransactionSession) live);

            assertWaits(ledger, held, "a record the open transaction names: its outcome decides");
            assertWaits(ledger, committedId(22), "a record named by an entry committed above the pinned last stable "
                    + "offset: a read_committed reader cannot read it yet");

            // a second transaction left open, written after the range was read: found in what is read next
            ShareRecordId lateHeld = new ShareRecordId("tasks", 0, 9);
            SessionProducer<byte[], byte[]> lateOut = producer(late);
            late.beginTransaction();
            lateOut.send(entry(topic, "late-writer", Map.of(lateHeld, AcknowledgeType.ACCEPT)));
            lateOut.flush();
            assertWaits(ledger, lateHeld, "a record named in the part of the range read last");

            dead.abortTransaction();
            assertThat(ledger.lookup(GROUP, List.of(held)))
                .as("the last stable offset moved: the range is read again, and the aborted entry names nothing")
                .isEmpty();
            late.abortTransaction();
            assertThat(ledger.lookup(GROUP, List.of(committedId(3), committedId(22), lateHeld)))
                .as("entries committed while the range was open are read once it closed")
                .containsOnlyKeys(committedId(3), committedId(22))
                .containsEntry(committedId(3), AcknowledgeType.ACCEPT);
        }
    }

    private static void assertWaits(ShareOutcomeLedger ledger, ShareRecordId id, String why) {
        assertThatThrownBy(() -> ledger.lookup(GROUP, List.of(id)))
            .as("the lookup waits for the open transaction (%s)", why)
            .isInstanceOf(TimeoutException.class)
            .hasMessageContaining("stayed open");
    }

    private static ShareRecordId committedId(int i) {
        return new ShareRecordId("tasks", 1, i);
    }

    /** Commits {@code count} entries of writers {@code live-<i>}, each naming {@link #committedId}(i). */
    private static void commitEntries(TransactionSession live, String topic, int from, int count) {
        SessionProducer<byte[], byte[]> out = producer(live);
        live.beginTransaction();
        for (int i = from; i < from + count; i++) {
            out.send(entry(topic, "live-" + i, Map.of(committedId(i), AcknowledgeType.ACCEPT)));
        }
        live.commitTransaction();
    }

    private static ProducerRecord<byte[], byte[]> entry(String topic, String writer,
            Map<ShareRecordId, AcknowledgeType> outcomes) {
        return new ProducerRecord<>(topic, ShareOutcomeLedger.key(GROUP, writer).getBytes(StandardCharsets.UTF_8),
                ShareOutcomeLedger.encode(outcomes).getBytes(StandardCharsets.UTF_8));
    }

    private static SessionProducer<byte[], byte[]> producer(TransactionSession session) {
        return new SessionProducer<>(session, new ByteArraySerializer(), new ByteArraySerializer());
    }

    private static TransactionSession session(String prefix) {
        TransactionSession session = TransactionSession.open(sessionConfigs(kafka.cluster(),
                EmbeddedKafkaCluster.uniqueName(prefix)));
        session.initialize();
        return session;
    }
}
