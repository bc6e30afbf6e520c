package io.github.txnsession.spring;

import java.util.Objects;

import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.transaction.KafkaAwareTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.TransactionException;
import org.springframework.transaction.TransactionStatus;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The application's own transaction manager (JDBC, JPA, jOOQ, ...) as spring-kafka's listener containers need it:
 * every transaction is the application manager's transaction, with a Kafka session enlisted in it from the start
 * ({@link SessionEnlistment}), so that the container sends the consumed offsets into the session and a
 * {@code @KafkaListener} that writes to the database and sends to Kafka commits all three, or none.
 *
 * <p>It adds nothing else: propagation, isolation, timeouts and rollback rules are the application manager's. It is
 * meant for listener containers only; {@code @Transactional} methods keep using the application's manager directly
 * and enlist a session on their first send.
 *
 * <p>Not guaranteed: more than {@link SessionEnlistment} guarantees (best effort or two-phase, as configured there).
 */
public class DatabaseSessionTransactionManager implements KafkaAwareTransactionManager<Object, Object> {

    private final PlatformTransactionManager database;
    private final SessionEnlistment enlistment;
    private final SessionProducerFactory<Object, Object> producerFactory;

    /**
     * @param database the application's transaction manager
     * @param enlistment enlists sessions of the producer factory's pool
     * @param producerFactory the factory whose producer the containers use for the offsets
     */
    public DatabaseSessionTransactionManager(PlatformTransactionManager database, SessionEnlistment enlistment,
            SessionProducerFactory<Object, Object> producerFactory) {
        this.database = Objects.requireNonNull(database, "database");
        this.enlistment = Objects.requireNonNull(enlistment, "enlistment");
        this.producerFactory = Objects.requireNonNull(producerFactory, "producerFactory");
        if (enlistment.getPool() != producerFactory.getPool()) {
            throw new IllegalArgumentException("The enlistment and the producer factory use different pools");
        }
    }

    /** @return the application's transaction manager this one runs on */
    public PlatformTransactionManager getDatabaseTransactionManager() {
        return this.database;
    }

    @Override
    public TransactionStatus getTransaction(TransactionDefinition definition) throws TransactionException {
        TransactionStatus status = this.database.getTransaction(definition);
        if (SessionEnlistment.canEnlist() && TransactionSynchronizationManager.isActualTransactionActive()) {
            try {
                this.enlistment.enlistWithProducer(this.producerFactory);
            }
            catch (RuntimeException ex) {
                this.database.rollback(status);
                throw ex;
            }
        }
        return status;
    }

    @Override
    public void commit(TransactionStatus status) throws TransactionException {
        this.database.commit(status);
    }

    @Override
    public void rollback(TransactionStatus status) throws TransactionException {
        this.database.rollback(status);
    }

    @Override
    public ProducerFactory<Object, Object> getProducerFactory() {
        return this.producerFactory;
    }

    @Override
    public String toString() {
        return "DatabaseSessionTransactionManager[" + this.database + ", " + this.enlistment + "]";
    }
}
