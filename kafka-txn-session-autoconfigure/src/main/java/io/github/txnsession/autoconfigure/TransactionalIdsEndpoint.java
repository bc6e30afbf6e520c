package io.github.txnsession.autoconfigure;

import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import io.github.txnsession.kafka.TransactionSession;
import io.github.txnsession.spring.TransactionSessionPool;
import io.github.txnsession.spring.jdbc.DecisionRecord;
import io.github.txnsession.spring.jdbc.RecoveryReport;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.errors.TransactionalIdNotFoundException;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * Actuator endpoint {@code txnsessionids}: the in-doubt transaction view. GET lists every transactional id of the
 * application (in fleet mode every id of every slot, whichever instance owns it) with its coordinator state, the age
 * of its open transaction against its timeout, whether this instance owns it, and its decision row (two-phase commit).
 * POST {@code /txnsessionids/<id>} resolves one: with two-phase commit it completes the id's decision row if it has
 * one (in fleet mode under the id's decision-log key) and otherwise aborts its open transaction, except in fleet mode,
 * where only the slot's owner ends an id's transaction (by initializing it under the key: a missing row does not prove
 * that a running transaction may be aborted); without two-phase commit it aborts the open transaction, then (outside
 * a fleet, unless a session of this instance lives on the id) fences the id's producer ({@code fenced} in the answer:
 * with transaction version 1 an abort alone lets a paused producer go on).
 *
 * <p>Guarantees: it never resolves an id a session of this instance has lent right now (it answers so instead), and it
 * never aborts a transaction whose decision row says commit. Not guaranteed: resolving an id another instance is using
 * aborts that instance's running transaction (it fails and is retried there); the list is one Admin call, a snapshot.
 * Exposed only if the application exposes it ({@code management.endpoints.web.exposure.include}).
 */
@Endpoint(id = "txnsessionids")
public class TransactionalIdsEndpoint {

    private static final Duration TIMEOUT = Duration.ofSeconds(15);

    private final TransactionSessionPool pool;
    private final @Nullable TwoPhaseRecovery recovery;

    /**
     * @param pool the application's session pool
     * @param recovery its two-phase recovery, or null without two-phase commit
     */
    public TransactionalIdsEndpoint(TransactionSessionPool pool, @Nullable TwoPhaseRecovery recovery) {
        this.pool = pool;
        this.recovery = recovery;
    }

    /** @return every id of the application with what the coordinator and the decision log say about it */
    @ReadOperation
    public Map<String, Object> ids() {
        List<String> ids = this.pool.transactionalIds();
        Set<String> owned = this.pool.isFleet() ? this.pool.ownedFleetTransactionalIds() : Set.copyOf(ids);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("prefix", this.pool.transactionalIdPrefix());
        out.put("fleet", this.pool.isFleet());
        Map<String, Object> entries = new LinkedHashMap<>();
        try (Admin admin = admin()) {
            org.apache.kafka.clients.admin.DescribeTransactionsResult found = admin.describeTransactions(ids);
            long now = System.currentTimeMillis();
            for (String id : ids) {
                Map<String, Object> e = new LinkedHashMap<>();
                e.put("ownedHere", owned.contains(id));
                describe(found.description(id), now, e);
                if (this.recovery != null) {
                    Optional<DecisionRecord> row = this.recovery.decisionOf(id);
                    e.put("decision", row.map(r -> Map.of("producerId", r.producerId(), "epoch", r.producerEpoch(),
                            "decidedAt", r.decidedAt().toString())).orElse(null));
                }
                entries.put(id, e);
            }
        }
        out.put("ids", entries);
        return out;
    }

    private static void describe(KafkaFuture<TransactionDescription> future, long now, Map<String, Object> e) {
        try {
            TransactionDescription d = future.get(TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
            e.put("state", d.state().toString());
            e.put("producerId", d.producerId());
            e.put("epoch", d.producerEpoch());
            e.put("timeoutMs", d.transactionTimeoutMs());
            if (d.transactionStartTimeMs().isPresent()) {
                long age = now - d.transactionStartTimeMs().getAsLong();
                e.put("openForMs", age);
                e.put("pastTimeout", age > d.transactionTimeoutMs());
            }
        }
        catch (ExecutionException ex) {
            e.put("state", ex.getCause() instanceof TransactionalIdNotFoundException ? "NOT_FOUND"
                    : "UNKNOWN (" + ex.getCause() + ")");
        }
        catch (TimeoutException ex) {
            e.put("state", "UNKNOWN (no answer within " + TIMEOUT.toSeconds() + " s)");
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            e.put("state", "UNKNOWN (interrupted)");
        }
    }

    /**
     * @param transactionalId one of the application's ids
     * @return what was done
     * @throws IllegalArgumentException if the id is not one of the application's
     */
    @WriteOperation
    public Map<String, Object> resolve(@Selector String transactionalId) {
        if (!this.pool.transactionalIds().contains(transactionalId)) {
            throw new IllegalArgumentException("'" + transactionalId + "' is not a transactional id of this "
                    + "application (see GET txnsessionids)");
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("transactionalId", transactionalId);
        boolean ran = this.pool.runIfIdle(transactionalId, () -> {
            if (this.recovery != null) {
                RecoveryReport r = this.recovery.recoverTransactionalId(transactionalId);
                out.put("committed", !r.committed().isEmpty() || !r.alreadyCommitted().isEmpty());
                out.put("aborted", !r.aborted().isEmpty());
                out.put("lost", !r.lost().isEmpty());
                out.put("inDoubt", !r.inDoubt().isEmpty());
            }
            else {
                Optional<TransactionSession> open = TransactionSession.resumeOpen(transactionalId, configs());
                open.ifPresent(s -> {
                    try (s) {
                        s.abortTransaction();
                    }
                    if (!this.pool.isFleet() && !this.pool.hasSession(transactionalId)) {
                        // with transaction version 1 the abort keeps the epoch: fence a paused producer of the id
                        // (not in a fleet: another instance may own the id; its next owner's initialization fences)
                        try {
                            TransactionSession.fence(transactionalId, configs());
                            out.put("fenced", true);
                        }
                        catch (RuntimeException ex) {
                            out.put("fenced", false);
                            out.put("fenceFailure", ex.toString());
                        }
                    }
                });
                out.put("aborted", open.isPresent());
            }
        });
        if (!ran) {
            out.put("resolved", false);
            out.put("reason", "a session of this instance is using it right now");
            return out;
        }
        out.put("resolved", true);
        return out;
    }

    private Admin admin() {
        Map<String, Object> configs = configs();
        configs.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) TIMEOUT.toMillis());
        configs.keySet().retainAll(AdminClientConfig.configNames());
        return Admin.create(configs);
    }

    private Map<String, Object> configs() {
        Map<String, Object> configs = new HashMap<>(this.pool.sessionConfigs());
        configs.remove("transactional.id");
        return configs;
    }
}
