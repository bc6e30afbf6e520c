package io.github.txnsession.spring.jdbc;

import java.util.List;
import java.util.Map;

import io.github.txnsession.spring.CommitPhase;

/**
 * Child JVM of the crash matrix: places {@code okCount} orders, then dies with {@code Runtime.halt} when the commit
 * of the next order reaches {@code phase}.
 * <p>Arguments: BOOTSTRAP JDBC_URL PREFIX TOPIC PHASE OK_COUNT FIRST_ID [TRANSACTION_TIMEOUT_MS]
 */
public final class TwoPhaseCrashChild {

    private TwoPhaseCrashChild() {
    }

    public static void main(String[] args) {
        CommitPhase crashAt = CommitPhase.valueOf(args[4]);
        int okCount = Integer.parseInt(args[5]);
        int firstId = Integer.parseInt(args[6]);
        Map<String, Object> overrides = args.length > 7 ? Map.of("transaction.timeout.ms", args[7]) : Map.of();
        OrderFlow flow = new OrderFlow(args[0], args[1], args[2], args[3], overrides, null);
        int[] committed = { 0 };
        flow.transactionManager.setCommitPhaseListeners(List.of((phase, txnId) -> {
            if (committed[0] == okCount && phase == crashAt) {
                System.out.println("CRASH " + phase + " " + txnId);
                System.out.flush();
                Runtime.getRuntime().halt(137);
            }
        }));
        for (int i = 0; i <= okCount; i++) {
            String id = "order-" + (firstId + i);
            flow.placeOrder(id);
            committed[0]++;
            System.out.println("OK " + id);
            System.out.flush();
        }
        System.out.println("NO-CRASH");
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
