package io.github.txnsession.benchmarks;

import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.time.LocalDate;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import io.github.txnsession.kafka.test.EmbeddedKafkaCluster;

/**
 * Runs the benchmark scenarios P1-P5 of this project against its anchors on one embedded Kafka broker, in one JVM,
 * and writes {@code <out>/<date>.md} and {@code .json}.
 *
 * <pre>
 * java -jar benchmarks/target/kafka-txn-session-benchmarks.jar [--profile quick|full] [--only P1,P3] [--out DIR]
 * </pre>
 *
 * Guarantees: every competitor of a scenario runs against the same broker with the same client settings; the order
 * of competitors rotates between repetitions; warm-up repetitions are not recorded. Not guaranteed: absolute
 * figures; the broker shares the machine's cores with the clients, so only ratios measured in one run compare.
 */
public final class BenchmarkMain {

    private BenchmarkMain() {
    }

    public static void main(String[] args) throws Exception {
        String profileName = "quick";
        Set<String> only = new TreeSet<>(List.of("P1", "P2", "P3", "P4", "P5"));
        Path out = Path.of("benchmarks", "results");
        String name = LocalDate.now(ZoneOffset.UTC).toString();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--profile" -> profileName = value(args, ++i);
                case "--only" -> only = new TreeSet<>(Arrays.asList(value(args, ++i).toUpperCase().split(",")));
                case "--out" -> out = Path.of(value(args, ++i));
                case "--name" -> name = value(args, ++i);
                case "-h", "--help" -> {
                    System.out.println("usage: [--profile quick|full] [--only P1,P2,P3,P4,P5] [--out DIR] [--name BASE]");
                    return;
                }
                default -> throw new IllegalArgumentException("Unknown argument '" + args[i] + "'; see --help");
            }
        }
        Profile profile = Profile.of(profileName);
        Results results = new Results();
        long started = System.nanoTime();
        Bench.log("profile %s, scenarios %s", profile, only);
        try (EmbeddedKafkaCluster kafka = EmbeddedKafkaCluster.builder().start()) {
            Bench bench = new Bench(kafka, profile, results);
            if (only.contains("P1")) {
                runScenario(results, "P1", () -> new P1ProducerTransactions(bench).run());
            }
            if (only.contains("P2")) {
                runScenario(results, "P2", () -> new P2ConsumeProcessProduce(bench).run());
            }
            if (only.contains("P3")) {
                runScenario(results, "P3", () -> new P3ExternalCommit(bench).run());
            }
            if (only.contains("P4")) {
                runScenario(results, "P4", () -> new P4JdbcKafka(bench).run());
            }
            if (only.contains("P5")) {
                runScenario(results, "P5", () -> new P5ShareGroups(bench).run());
            }
        }
        Map<String, String> meta = new LinkedHashMap<>();
        meta.put("date", LocalDate.now(ZoneOffset.UTC).toString());
        meta.put("profile", profile.name() + " (" + profile.warmups() + " warm-up + " + profile.repetitions()
                + " measured repetitions per competitor, order rotated each repetition)");
        meta.put("machine", Runtime.getRuntime().availableProcessors() + " cores, JVM "
                + System.getProperty("java.vm.name") + " " + System.getProperty("java.version") + ", max heap "
                + Runtime.getRuntime().maxMemory() / (1024 * 1024) + " MB, args "
                + ManagementFactory.getRuntimeMXBean().getInputArguments());
        meta.put("broker", "one embedded KRaft broker (EmbeddedKafkaCluster) in the same JVM, kafka-clients "
                + org.apache.kafka.common.utils.AppInfoParser.getVersion());
        meta.put("producer settings (all competitors)", "linger.ms=5, batch.size=16384, acks=all, idempotence on");
        meta.put("wall time", String.format(java.util.Locale.ROOT, "%.0f s", (System.nanoTime() - started) / 1e9));
        results.write(out, name, meta);
        System.out.println(results.markdown(meta));
        Bench.log("wrote %s/%s.md and .json", out, name);
        System.exit(0); // non-daemon client threads of a failed run must not keep the JVM alive
    }

    interface Scenario {
        void run() throws Exception;
    }

    /** Runs one scenario; a failure is printed and noted in the results, and the other scenarios still run. */
    private static void runScenario(Results results, String name, Scenario scenario) {
        try {
            scenario.run();
        }
        catch (Exception ex) {
            Bench.log("%s FAILED: %s", name, ex);
            ex.printStackTrace(System.out);
            results.note(name, "**" + name + " failed:** " + ex);
        }
    }

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException("Missing value after " + args[i - 1]);
        }
        return args[i];
    }
}
