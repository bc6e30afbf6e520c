package io.github.txnsession.benchmarks;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.jspecify.annotations.Nullable;

/**
 * The CPU time a timed run used, divided by what it did, in four parts: the client's threads in this JVM (the
 * application thread, the Kafka clients' I/O threads, the library's background threads, and an in-process database
 * such as H2), the embedded broker's threads (every other Java thread of this JVM), the JVM's own threads (garbage
 * collection and JIT compilation, for both), and, optionally, the other processes with a given command name (the
 * embedded PostgreSQL's server processes).
 *
 * <p>Why: on a machine where the broker, the database and the client share few cores, every step of a competitor's
 * path costs CPU on one of them, so the work per operation says which extra work a gap comes with, and whose it is.
 * It is an accounting of work, not a cause: whether a competitor's rate or latency is limited by that work (or by
 * waiting) these figures alone do not say. Threads are read with
 * {@code ThreadMXBean}, the client's by name prefix (an idle competitor's threads count as client too; a thread that
 * ends during the run is counted with the JVM's own). Other processes are read from {@code /proc/<pid>/stat}: every
 * live process with that command name on the machine (run benchmarks on a quiet machine) with the CPU time of the
 * children it reaped, in clock ticks of 10 ms (Linux only; over a run of a second or more that is within a few
 * percent). Where a figure cannot be read it is {@code NaN}, shown as "-".
 */
final class CpuMeter {

    /** Linux's USER_HZ, the unit of /proc/[pid]/stat's utime and stime, on every common architecture. */
    private static final long NANOS_PER_TICK = 10_000_000L;
    /** Name prefixes of the client's threads; every other thread of this JVM is the embedded broker's. */
    private static final List<String> CLIENT_THREADS = List.of("main", "kafka-producer-network-thread",
            "consumer_background_thread", "kafka-admin-client-thread", "kafka-coordinator-heartbeat-thread",
            "txn-session-", "txn-fleet-", "HikariPool");

    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private final @Nullable String otherCommand;
    private final Map<Long, Long> threadStart;
    private final long processStart;
    private final long otherStart;
    private long clientNanos = -1;
    private long brokerNanos = -1;
    private long vmNanos = -1;
    private long otherNanos = -1;

    private CpuMeter(@Nullable String otherCommand) {
        this.otherCommand = otherCommand;
        this.processStart = processCpuNanos();
        this.threadStart = threadCpu();
        this.otherStart = otherCommand == null ? -1 : otherCpuNanos(otherCommand);
    }

    /**
     * @param otherCommand the command name of other processes to count (as in /proc/[pid]/stat, for example
     *        {@code postgres}), or null for this JVM only
     * @return a meter counting from now
     */
    static CpuMeter start(@Nullable String otherCommand) {
        return new CpuMeter(otherCommand);
    }

    /** Ends the count: the figures below are the CPU time between the start and now. */
    CpuMeter stop() {
        String command = this.otherCommand;
        long other = command == null ? -1 : otherCpuNanos(command);
        this.otherNanos = other < 0 || this.otherStart < 0 || other < this.otherStart ? -1 : other - this.otherStart;
        if (!THREADS.isThreadCpuTimeSupported() || !THREADS.isThreadCpuTimeEnabled()) {
            return this;
        }
        long client = 0;
        long broker = 0;
        for (ThreadInfo info : THREADS.getThreadInfo(THREADS.getAllThreadIds())) {
            if (info == null) {
                continue; // ended meanwhile
            }
            long now = THREADS.getThreadCpuTime(info.getThreadId());
            if (now < 0) {
                continue;
            }
            long used = now - this.threadStart.getOrDefault(info.getThreadId(), 0L);
            if (isClient(info.getThreadName())) {
                client += used;
            }
            else {
                broker += used;
            }
        }
        this.clientNanos = client;
        this.brokerNanos = broker;
        long process = processCpuNanos();
        this.vmNanos = process < 0 || this.processStart < 0 ? -1
                : Math.max(0, process - this.processStart - client - broker);
        return this;
    }

    /** @return the client threads' CPU time, in microseconds per operation ({@code NaN} if unknown) */
    double clientMicrosPer(long operations) {
        return per(this.clientNanos, operations);
    }

    /** @return the embedded broker's CPU time, in microseconds per operation ({@code NaN} if unknown) */
    double brokerMicrosPer(long operations) {
        return per(this.brokerNanos, operations);
    }

    /**
     * @return the CPU time of the JVM's own threads (garbage collection, JIT compilation), in microseconds per
     *         operation ({@code NaN} if unknown)
     */
    double vmMicrosPer(long operations) {
        return per(this.vmNanos, operations);
    }

    /** @return the other processes' CPU time, in microseconds per operation ({@code NaN} if unknown or not asked) */
    double otherMicrosPer(long operations) {
        return per(this.otherNanos, operations);
    }

    private static double per(long nanos, long operations) {
        return nanos < 0 || operations <= 0 ? Double.NaN : nanos / 1e3 / operations;
    }

    static boolean isClient(String threadName) {
        for (String prefix : CLIENT_THREADS) {
            if (threadName.startsWith(prefix)) {
                return true;
            }
        }
        return false;
    }

    private static long processCpuNanos() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getProcessCpuTime();
        }
        return -1;
    }

    private static Map<Long, Long> threadCpu() {
        Map<Long, Long> cpu = new HashMap<>();
        if (THREADS.isThreadCpuTimeSupported() && THREADS.isThreadCpuTimeEnabled()) {
            for (long id : THREADS.getAllThreadIds()) {
                long t = THREADS.getThreadCpuTime(id);
                if (t >= 0) {
                    cpu.put(id, t);
                }
            }
        }
        return cpu;
    }

    /** @return the CPU time (user + system) of the live processes named {@code command}, or -1 without /proc */
    private static long otherCpuNanos(String command) {
        Path proc = Path.of("/proc");
        if (!Files.isDirectory(proc)) {
            return -1;
        }
        try (Stream<Path> pids = Files.list(proc)) {
            return pids.filter(p -> p.getFileName().toString().chars().allMatch(Character::isDigit))
                .mapToLong(p -> ticks(p.resolve("stat"), command))
                .sum() * NANOS_PER_TICK;
        }
        catch (IOException | RuntimeException ex) {
            return -1;
        }
    }

    /** @return utime + stime of the process whose stat file this is, if its command is {@code command}; else 0 */
    private static long ticks(Path stat, String command) {
        try {
            String line = Files.readString(stat);
            int open = line.indexOf('(');
            int close = line.lastIndexOf(')');
            if (open < 0 || close < open || !line.substring(open + 1, close).equals(command)) {
                return 0;
            }
            // after "pid (comm) ": state is field 3, utime/stime fields 14/15 of the whole line, and cutime/cstime
            // (16/17) what its exited children used: a short-lived worker the server forked and reaped counts too
            String[] fields = line.substring(close + 2).split(" ");
            return Long.parseLong(fields[11]) + Long.parseLong(fields[12]) + Long.parseLong(fields[13])
                    + Long.parseLong(fields[14]);
        }
        catch (IOException | RuntimeException ex) {
            return 0; // the process ended between the listing and the read
        }
    }
}
