package io.github.txnsession.boot;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.github.txnsession.kafka.PreparedTransaction;
import io.github.txnsession.kafka.SessionState;
import io.github.txnsession.spring.CurrentTransactionSession;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.transaction.annotation.Propagation;
import org.springframework.transaction.annotation.Transactional;

/** Application code as a user writes it: {@code @Transactional} methods and a plain {@code KafkaTemplate}. */
public class OrderService {

    private final KafkaTemplate<Object, Object> template;
    private final CurrentTransactionSession current;
    private final ObjectProvider<OrderService> self;
    private final Map<String, String> sessionsSeen = new ConcurrentHashMap<>();

    public OrderService(KafkaTemplate<Object, Object> template, CurrentTransactionSession current,
            ObjectProvider<OrderService> self) {
        this.template = template;
        this.current = current;
        this.self = self;
    }

    /** @return which session each step ran on (a method, so that it reads the target, not the proxy) */
    public Map<String, String> sessionsSeen() {
        return this.sessionsSeen;
    }

    /** A checked exception, which Spring commits on unless told otherwise. */
    public static class CheckedFailure extends Exception {

        private static final long serialVersionUID = 1L;

        CheckedFailure(String message) {
            super(message);
        }
    }

    /** What {@link #identityAndPrepare} saw. */
    public record Identity(String transactionalId, long producerId, short epoch, String prepared,
            SessionState stateAfterPrepare) {
    }

    @Transactional
    public String placeOrder(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        this.template.send(TransactionalKafkaTemplateTest.AUDIT, key, "audit " + key);
        return this.current.transactionalId();
    }

    @Transactional
    public void placeOrderThenFail(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        this.template.send(TransactionalKafkaTemplateTest.AUDIT, key, "audit " + key);
        this.template.flush(); // the records reached the broker; only the abort keeps them invisible
        throw new IllegalStateException("payment declined for " + key);
    }

    @Transactional
    public void outerFailsAfterRequiresNew(String key) {
        this.sessionsSeen.put("outer " + key, this.current.transactionalId());
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "outer " + key);
        this.self.getObject().innerRequiresNew(key);
        throw new IllegalStateException("outer fails after the inner transaction committed");
    }

    @Transactional(propagation = Propagation.REQUIRES_NEW)
    public void innerRequiresNew(String key) {
        this.sessionsSeen.put("inner " + key, this.current.transactionalId());
        this.template.send(TransactionalKafkaTemplateTest.AUDIT, key, "inner " + key);
    }

    @Transactional(rollbackFor = CheckedFailure.class)
    public void checkedWithRollbackFor(String key) throws CheckedFailure {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        throw new CheckedFailure("rolls back: rollbackFor names it");
    }

    @Transactional
    public void checkedWithoutRule(String key) throws CheckedFailure {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        throw new CheckedFailure("commits: checked exceptions do not roll back by default");
    }

    @Transactional(noRollbackFor = IllegalArgumentException.class)
    public void uncheckedWithNoRollbackFor(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        throw new IllegalArgumentException("commits: noRollbackFor names it");
    }

    @Transactional
    public List<String> outerWithSupportsAndNotSupported(String key) {
        List<String> seen = new ArrayList<>();
        seen.add(this.current.transactionalId());
        seen.add(this.self.getObject().supportsAlone());
        seen.add(this.self.getObject().notSupported());
        seen.add(this.current.transactionalId());
        return seen;
    }

    @Transactional(propagation = Propagation.SUPPORTS)
    public String supportsAlone() {
        return this.current.find().map(s -> s.transactionalId()).orElse("no session");
    }

    @Transactional(propagation = Propagation.NOT_SUPPORTED)
    public String notSupported() {
        return this.current.find().map(s -> s.transactionalId()).orElse("no session");
    }

    @Transactional(propagation = Propagation.NESTED)
    public void nestedAlone(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
    }

    @Transactional
    public void outerCallingNested(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        this.self.getObject().nestedAlone(key + "-inner");
    }

    @Transactional(timeout = 1)
    public void slowWithTimeout(String key) throws InterruptedException {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        Thread.sleep(1_200); // slow work: the timeout passes before the next send
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key + " (late)");
    }

    @Transactional
    public Identity identityAndPrepare(String key) {
        this.template.send(TransactionalKafkaTemplateTest.ORDERS, key, "order " + key);
        long producerId = this.current.producerId();
        short epoch = this.current.producerEpoch();
        PreparedTransaction prepared = this.current.prepareTransaction();
        return new Identity(this.current.transactionalId(), producerId, epoch,
                prepared.producerId() + ":" + prepared.epoch(), this.current.state());
    }
}
