package io.github.txnsession.boot;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import io.github.txnsession.spring.SessionTransactionCounters;
import io.github.txnsession.spring.jdbc.TwoPhaseRecovery;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Runs one application of {@link AllPathsChaosSoakTest} in a JVM of its own, so that the soak can kill it
 * ({@code kill -9}) or freeze it ({@code SIGSTOP}) as a crashed or paused client, not only close it.
 *
 * <p>Arguments: the {@code @Configuration} class, then the application's properties ({@code name=value}). Standard
 * output carries the protocol only (the logs go to standard error): {@code READY <lost> <in doubt>} once started; on
 * the line {@code stop} from standard input it closes the application, prints
 * {@code STOPPED <commits> <rollbacks> <lost> <in doubt>} and exits. Lost and in doubt: the two-phase transactions the
 * application's recovery reported so far (0 without two-phase commit).
 */
public final class SoakApplicationMain {

    private SoakApplicationMain() {
    }

    public static void main(String[] args) throws ClassNotFoundException, IOException {
        PrintStream protocol = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
        System.setOut(System.err); // the logs (Boot's console appender) must not mix with the protocol
        Class<?> configuration = Class.forName(args[0]);
        ConfigurableApplicationContext context = new SpringApplicationBuilder(configuration)
            .web(WebApplicationType.NONE)
            .properties(Arrays.copyOfRange(args, 1, args.length))
            .run();
        protocol.println("READY " + twoPhaseProblems(context.getBeanProvider(TwoPhaseRecovery.class)
            .getIfAvailable()));
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = commands.readLine()) != null) {
            if (line.equals("stop")) {
                break;
            }
        }
        SessionTransactionCounters counters = context.getBeanProvider(SessionTransactionCounters.class)
            .getIfAvailable();
        TwoPhaseRecovery recovery = context.getBeanProvider(TwoPhaseRecovery.class).getIfAvailable();
        context.close(); // (completions still running in the background end here, and may report)
        String problems = twoPhaseProblems(recovery);
        protocol.println("STOPPED " + (counters == null ? 0 : counters.commits()) + " "
                + (counters == null ? 0 : counters.rollbacks()) + " " + problems);
        System.exit(0);
    }

    /** @return the lost and in-doubt counts of the application's two-phase recovery, "0 0" without one */
    private static String twoPhaseProblems(@Nullable TwoPhaseRecovery recovery) {
        return recovery == null ? "0 0"
                : recovery.lostTransactions().size() + " " + recovery.inDoubtTransactions().size();
    }
}
