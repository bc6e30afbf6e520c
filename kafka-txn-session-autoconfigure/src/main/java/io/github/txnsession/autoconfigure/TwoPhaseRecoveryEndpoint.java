package io.github.txnsession.autoconfigure;

import java.util.LinkedHashMap;
import java.util.Map;

import io.github.txnsession.spring.jdbc.LostTransaction;
import io.github.txnsession.spring.jdbc.RecoveryReport;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;

import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * Actuator endpoint {@code txnsessionrecovery}: GET shows the last recovery report and the unresolved lost
 * transactions; POST runs recovery now and returns its report. Exposed only if the application exposes it
 * ({@code management.endpoints.web.exposure.include}).
 */
@Endpoint(id = "txnsessionrecovery")
public class TwoPhaseRecoveryEndpoint {

    private final TwoPhaseRecovery recovery;

    /** @param recovery the recovery to run and report on */
    public TwoPhaseRecoveryEndpoint(TwoPhaseRecovery recovery) {
        this.recovery = recovery;
    }

    /** @return the last report and the lost transactions not yet cleared */
    @ReadOperation
    public Map<String, Object> status() {
        Map<String, Object> status = new LinkedHashMap<>();
        status.put("prefix", this.recovery.transactionalIdPrefix());
        status.put("lastReport", this.recovery.lastReport().map(TwoPhaseRecoveryEndpoint::describe).orElse(null));
        status.put("lost", this.recovery.lostTransactions().stream().map(LostTransaction::transactionalId).toList());
        status.put("inDoubt",
                this.recovery.inDoubtTransactions().stream().map(LostTransaction::transactionalId).toList());
        return status;
    }

    /** @return the report of a recovery run now */
    @WriteOperation
    public Map<String, Object> recover() {
        return describe(this.recovery.recover());
    }

    private static Map<String, Object> describe(RecoveryReport report) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("committed", report.committed());
        out.put("alreadyCommitted", report.alreadyCommitted());
        out.put("aborted", report.aborted());
        out.put("lost", report.lost().stream().map(l -> Map.of("transactionalId", l.transactionalId(),
                "reason", l.reason())).toList());
        out.put("failed", report.failed());
        out.put("inDoubt", report.inDoubt().stream().map(l -> Map.of("transactionalId", l.transactionalId(),
                "reason", l.reason())).toList());
        return out;
    }
}
