package io.github.txnsession.boot.containers;

import java.util.List;

import io.github.txnsession.boot.CommittedReader;
import io.github.txnsession.spring.TransactionSessionPool;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.testcontainers.junit.jupiter.Container;
import org.testcontainers.junit.jupiter.Testcontainers;
import org.testcontainers.kafka.KafkaContainer;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.testcontainers.service.connection.ServiceConnection;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The starter with Testcontainers' {@code @ServiceConnection}: the session pool connects to the container Boot's
 * {@code KafkaConnectionDetails} describe (not to {@code spring.kafka.bootstrap-servers}), and a transaction commits
 * or rolls back there. Skipped where no Docker engine is available (the embedded KRaft cluster is the default of
 * every other test).
 */
@Testcontainers(disabledWithoutDocker = true)
@SpringBootTest(properties = { "spring.main.banner-mode=off", "kafka.txn-session.pool-size=1",
        "spring.autoconfigure.exclude=org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration,"
                + "org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration" })
class ServiceConnectionTest {

    static final String TOPIC = "containers";

    @Container
    @ServiceConnection
    static final KafkaContainer kafka = new KafkaContainer("apache/kafka:4.1.1");

    @Autowired
    TransactionSessionPool pool;

    @Autowired
    KafkaTemplate<Object, Object> template;

    @Autowired
    PlatformTransactionManager transactionManager;

    @Test
    void sessionsUseTheContainerOfTheServiceConnection() {
        assertThat(this.pool.sessionConfigs().get(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG).toString())
            .contains(kafka.getBootstrapServers());
        TransactionTemplate tx = new TransactionTemplate(this.transactionManager);
        tx.executeWithoutResult(status -> this.template.send(TOPIC, "kept", "committed"));
        assertThatThrownBy(() -> tx.executeWithoutResult(status -> {
            this.template.send(TOPIC, "dropped", "rolled back");
            throw new IllegalStateException("rolls back");
        })).isInstanceOf(IllegalStateException.class);
        List<ConsumerRecord<String, String>> read = CommittedReader.readToEnd(kafka.getBootstrapServers(), TOPIC,
                true);
        assertThat(read).extracting(ConsumerRecord::key).containsExactly("kept");
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class App {
    }
}
