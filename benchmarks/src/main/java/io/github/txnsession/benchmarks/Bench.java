package io.github.txnsession.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * What every scenario shares: the one embedded broker, the profile, the results, and the client settings that
 * every competitor gets alike (the same linger, batch size and acks for all producers).
 */
final class Bench {

    /** A 100-byte record value. */
    static final String VALUE = "v".repeat(100);

    final EmbeddedKafkaCluster kafka;
    final Profile profile;
    final Results results;

    Bench(EmbeddedKafkaCluster kafka, Profile profile, Results results) {
        this.kafka = kafka;
        this.profile = profile;
        this.results = results;
    }

    /**
     * Producer settings for every competitor: Kafka's defaults, written out so that they are visibly the same
     * (linger.ms=5, batch.size=16384, acks=all, idempotence on), with String serializers.
     */
    Map<String, Object> producerConfigs() {
        Map<String, Object> c = this.kafka.clientConfigs();
        c.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        c.put(ProducerConfig.BATCH_SIZE_CONFIG, 16384);
        c.put(ProducerConfig.ACKS_CONFIG, "all");
        c.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
        c.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        c.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        return c;
    }

    /** Exactly-once consumer settings: read_committed, no auto commit, from the beginning, String deserializers. */
    Map<String, Object> consumerConfigs(String group) {
        Map<String, Object> c = this.kafka.clientConfigs();
        c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        return c;
    }

    /** Writes {@code count} records (keys k0..k(count-1), 100-byte values) and waits until all are acknowledged. */
    void preload(String topic, int count) {
        Map<String, Object> c = producerConfigs();
        // one request in flight: a just-created partition can refuse the first request (KAFKA-15591)
        c.put(ProducerConfig.MAX_IN_FLIGHT_REQUESTS_PER_CONNECTION, 1);
        try (KafkaProducer<String, String> p = new KafkaProducer<>(c)) {
            List<Future<?>> sent = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                sent.add(p.send(new ProducerRecord<>(topic, "k" + i, VALUE)));
            }
            p.flush();
            for (Future<?> f : sent) {
                f.get(60, TimeUnit.SECONDS);
            }
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not preload " + topic, ex);
        }
    }

    /** Makes a new share group read from the beginning (share.auto.offset.reset=earliest). */
    void shareGroupFromEarliest(String group) {
        try {
            this.kafka.admin().incrementalAlterConfigs(Map.of(new ConfigResource(ConfigResource.Type.GROUP, group),
                    List.of(new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                            AlterConfigOp.OpType.SET)))).all().get(30, TimeUnit.SECONDS);
        }
        catch (Exception ex) {
            throw new IllegalStateException("Could not configure share group " + group, ex);
        }
    }

    /** The competitors in the order of repetition {@code rep}: rotated by one each time, to cancel drift. */
    static <T> List<T> rotated(List<T> competitors, int rep) {
        int n = competitors.size();
        int shift = Math.floorMod(rep, n);
        List<T> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(competitors.get((i + shift) % n));
        }
        return out;
    }

    /** Repetition indexes: negative ones are warm-ups (not recorded). */
    int firstRep() {
        return -this.profile.warmups();
    }

    static void log(String format, Object... args) {
        String line = String.format(java.util.Locale.ROOT, format, args);
        System.out.printf(java.util.Locale.ROOT, "[bench %tT] %s%n", System.currentTimeMillis(), line);
        System.out.flush();
    }
}
