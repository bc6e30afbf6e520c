package io.github.txnsession.boot.compat;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import javax.sql.DataSource;

import org.apache.kafka.clients.consumer.ConsumerRecord;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.context.ApplicationEventPublisher;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.core.simple.JdbcClient;
import org.springframework.kafka.annotation.KafkaListener;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.annotation.Propagation;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.event.TransactionPhase;
import org.springframework.transaction.event.TransactionalEventListener;

/**
 * The application of one cell of the compatibility matrix, written the way spring-kafka users write it: Boot's
 * auto-configured {@code JdbcTemplate}/{@code JdbcClient} or a Spring Data JPA repository, Boot's
 * {@code KafkaTemplate}, {@code @Transactional} and a {@code @KafkaListener}; nothing from this library.
 */
@Configuration(proxyBeanMethods = false)
@EnableAutoConfiguration
public class CompatApp {

    /** How the cell's application writes its rows. */
    public enum Access {
        JDBC_TEMPLATE, JDBC_CLIENT, JPA
    }

    @Bean
    Orders orders(@Value("${compat.access}") Access access, DataSource dataSource, JdbcClient jdbcClient,
            ObjectProvider<CompatOrders> repository, KafkaTemplate<Object, Object> template,
            @Value("${compat.topic}") String topic) {
        new JdbcTemplate(dataSource).execute("CREATE TABLE IF NOT EXISTS compat_order (id VARCHAR(255) PRIMARY KEY)");
        return new Orders(access, new JdbcTemplate(dataSource), jdbcClient, repository, template, topic);
    }

    @Bean
    PlacedEvents placedEvents(KafkaTemplate<Object, Object> template, @Value("${compat.topic}") String topic) {
        return new PlacedEvents(template, topic);
    }

    @Bean
    NewOrders newOrders(Orders orders) {
        return new NewOrders(orders);
    }

    @Bean
    Listener listener(Orders orders, KafkaTemplate<Object, Object> template, @Value("${compat.out}") String out) {
        return new Listener(orders, template, out);
    }

    /** Writes an order row with the cell's access technology and publishes its event. */
    public static class Orders {

        private final Access access;
        private final JdbcTemplate jdbc;
        private final JdbcClient client;
        private final ObjectProvider<CompatOrders> repository;
        private final KafkaTemplate<Object, Object> template;
        private final String topic;

        Orders(Access access, JdbcTemplate jdbc, JdbcClient client, ObjectProvider<CompatOrders> repository,
                KafkaTemplate<Object, Object> template, String topic) {
            this.access = access;
            this.jdbc = jdbc;
            this.client = client;
            this.repository = repository;
            this.template = template;
            this.topic = topic;
        }

        /** Inserts the row (not flushed, for JPA: Hibernate flushes at commit) and sends the event. */
        public void write(String id) {
            insert(id);
            this.template.send(this.topic, id, "OrderPlaced");
        }

        public void insert(String id) {
            switch (this.access) {
                case JDBC_TEMPLATE -> this.jdbc.update("INSERT INTO compat_order (id) VALUES (?)", id);
                case JDBC_CLIENT -> this.client.sql("INSERT INTO compat_order (id) VALUES (:id)").param("id", id)
                    .update();
                case JPA -> this.repository.getObject().save(new CompatOrder(id));
            }
        }

        @Transactional
        public void place(String id) {
            write(id);
        }

        @Transactional
        public void placeThenFail(String id) {
            write(id);
            throw new IllegalStateException("the method throws after writing " + id);
        }

        /** Writes {@code outer}, has {@link NewOrders} write {@code inner} in a new transaction, then fails. */
        @Transactional
        public void placeAroundNewThenFail(String outer, String inner, NewOrders newOrders) {
            write(outer);
            newOrders.place(inner);
            throw new IllegalStateException("the outer transaction fails after the inner one committed");
        }

        /** Writes the row and publishes an application event; {@link PlacedEvents} sends it before the commit. */
        @Transactional
        public void placeViaEvent(String id, boolean fail, ApplicationEventPublisher events) {
            insert(id);
            events.publishEvent(new Placed(id));
            if (fail) {
                throw new IllegalStateException("the method throws after publishing " + id);
            }
        }

        /** Writes the row, then sends the event through {@code executeInTransaction}, then fails. */
        @Transactional
        public void placeWithExecuteInTransactionThenFail(String id) {
            insert(id);
            this.template.executeInTransaction(t -> t.send(this.topic, id, "OrderPlaced"));
            throw new IllegalStateException("the method throws after executeInTransaction returned");
        }
    }

    /** The application event of {@link Orders#placeViaEvent}. */
    public record Placed(String id) {
    }

    /** Sends the event of an order when its transaction is about to commit: the transactional outbox shape. */
    public static class PlacedEvents {

        private final KafkaTemplate<Object, Object> template;
        private final String topic;

        PlacedEvents(KafkaTemplate<Object, Object> template, String topic) {
            this.template = template;
            this.topic = topic;
        }

        @TransactionalEventListener(phase = TransactionPhase.BEFORE_COMMIT)
        public void onPlaced(Placed placed) {
            this.template.send(this.topic, placed.id(), "OrderPlaced");
        }
    }

    /** Writes in a transaction of its own ({@code REQUIRES_NEW}). */
    public static class NewOrders {

        private final Orders orders;

        NewOrders(Orders orders) {
            this.orders = orders;
        }

        @Transactional(propagation = Propagation.REQUIRES_NEW)
        public void place(String id) {
            this.orders.write(id);
        }
    }

    /** Consume-process-produce: a row and an event per record; a "poison" record fails once after both writes. */
    public static class Listener {

        private final Orders orders;
        private final KafkaTemplate<Object, Object> template;
        private final String out;
        private final Map<String, Integer> attempts = new ConcurrentHashMap<>();

        Listener(Orders orders, KafkaTemplate<Object, Object> template, String out) {
            this.orders = orders;
            this.template = template;
            this.out = out;
        }

        @KafkaListener(id = "compat", topics = "${compat.in}", groupId = "${compat.group}")
        public void onRecord(ConsumerRecord<String, String> record) {
            this.orders.insert(record.key());
            this.template.send(this.out, record.key(), "processed");
            if ("poison".equals(record.value()) && this.attempts.merge(record.key(), 1, Integer::sum) == 1) {
                throw new IllegalStateException("fails once after writing both: " + record.key());
            }
        }

        int failedRecords() {
            return this.attempts.size();
        }
    }
}
