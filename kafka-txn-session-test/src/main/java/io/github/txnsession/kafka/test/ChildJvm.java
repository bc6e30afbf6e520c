package io.github.txnsession.kafka.test;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

import org.jspecify.annotations.Nullable;

/**
 * A separate JVM running a main class from the current classpath, for crash tests: the victim runs in the child and
 * dies for real ({@code Runtime.halt} in the child, or {@link #kill()} from the test), so nothing of its in-memory
 * state can help the survivors.
 *
 * <p>The child's stdout is read line by line: tests wait for a line with {@link #awaitLine(String, Duration)}.
 * Stderr goes to the parent's stderr.
 */
public final class ChildJvm implements AutoCloseable {

    /** children still running: killed when this JVM exits, so none outlives a test run that failed midway */
    private static final java.util.Set<Process> RUNNING = java.util.concurrent.ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> RUNNING.forEach(Process::destroyForcibly),
                "child-jvm-reaper"));
    }

    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
    private final List<String> seen = new ArrayList<>();

    private ChildJvm(Process process) {
        this.process = process;
        RUNNING.add(process);
        process.onExit().thenRun(() -> RUNNING.remove(process));
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    this.lines.add(line);
                }
            }
            catch (IOException ex) {
                // the child died; what it printed so far is in the queue
            }
        }, "child-jvm-stdout-" + process.pid());
        reader.setDaemon(true);
        reader.start();
    }

    /**
     * Starts {@code mainClass} in a new JVM with this JVM's classpath and a small heap.
     *
     * @param mainClass a class with a {@code public static void main(String[])}
     * @param args its arguments
     * @return the running child, its stdout already being read
     * @throws IllegalStateException if the process cannot be started
     */
    public static ChildJvm start(Class<?> mainClass, String... args) {
        Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
        List<String> command = new ArrayList<>();
        command.add(java.toString());
        command.add("-Xmx256m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.add("-XX:+ExitOnOutOfMemoryError"); // not a half-dead child that only times out
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass.getName());
        command.addAll(List.of(args));
        try {
            Process p = new ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.INHERIT).start();
            return new ChildJvm(p);
        }
        catch (IOException ex) {
            throw new IllegalStateException("Could not start a child JVM for " + mainClass.getName(), ex);
        }
    }

    /**
     * Waits for the next output line that starts with {@code prefix}; lines before it are kept in
     * {@link #output()}.
     *
     * @param prefix the text the awaited line starts with (case-sensitive)
     * @param timeout how long to wait for that line
     * @return the line
     * @throws AssertionError if the child exits or the timeout passes first
     */
    public String awaitLine(String prefix, Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (true) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new AssertionError("Child JVM printed no line starting with '" + prefix + "' within " + timeout
                        + "; output so far: " + this.seen + (this.process.isAlive() ? "" : ", exit code "
                                + this.process.exitValue()));
            }
            String line;
            try {
                line = this.lines.poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(200)), TimeUnit.NANOSECONDS);
            }
            catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                throw new AssertionError("Interrupted while waiting for the child JVM", ex);
            }
            if (line == null) {
                if (!this.process.isAlive() && this.lines.isEmpty()) {
                    throw new AssertionError("Child JVM exited with code " + this.process.exitValue()
                            + " before printing a line starting with '" + prefix + "'; output: " + this.seen);
                }
                continue;
            }
            this.seen.add(line);
            if (line.startsWith(prefix)) {
                return line;
            }
        }
    }

    /**
     * @param prefix the text the awaited line starts with, as for {@link #awaitLine(String, Duration)}
     * @param timeout how long to wait for that line
     * @return the text after {@code prefix} on the next line that starts with it, leading and trailing whitespace
     *         removed
     * @throws AssertionError if the child exits or the timeout passes first
     */
    public String awaitValue(String prefix, Duration timeout) {
        return awaitLine(prefix, timeout).substring(prefix.length()).trim();
    }

    /**
     * Waits for the child to exit.
     *
     * @param timeout how long to wait (millisecond resolution)
     * @return its exit code
     * @throws AssertionError if the child is still running when the timeout passes
     */
    public int awaitExit(Duration timeout) {
        try {
            if (!this.process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError("Child JVM did not exit within " + timeout + "; output: " + this.seen);
            }
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new AssertionError("Interrupted while waiting for the child JVM", ex);
        }
        return this.process.exitValue();
    }

    /** Kills the child at once (SIGKILL) and waits until it is gone. */
    public void kill() {
        this.process.destroyForcibly();
        awaitExit(Duration.ofSeconds(30));
    }

    /**
     * Freezes the child (SIGSTOP), as a long GC pause or a suspended VM would: every thread stops, its connections stay
     * open and nothing is sent. POSIX systems only.
     */
    public void pause() {
        signal("STOP");
    }

    /**
     * Writes a line to the child's standard input, for a child that waits for the test's go-ahead.
     *
     * @param line the line, without its line end
     */
    public void send(String line) {
        try {
            this.process.getOutputStream().write((line + "\n").getBytes(StandardCharsets.UTF_8));
            this.process.getOutputStream().flush();
        }
        catch (IOException ex) {
            throw new AssertionError("Could not write to the child JVM's standard input", ex);
        }
    }

    /** Lets a child frozen by {@link #pause()} run again (SIGCONT). */
    public void resume() {
        signal("CONT");
    }

    private void signal(String name) {
        try {
            // the shell's kill builtin: no separate kill binary needed
            Process kill = new ProcessBuilder("sh", "-c", "kill -" + name + " " + this.process.pid())
                .redirectErrorStream(true).start();
            if (!kill.waitFor(10, TimeUnit.SECONDS)) {
                kill.destroyForcibly();
                throw new AssertionError("kill -" + name + " " + this.process.pid() + " did not finish");
            }
            if (kill.exitValue() != 0) {
                throw new AssertionError("kill -" + name + " " + this.process.pid() + " failed");
            }
        }
        catch (IOException ex) {
            throw new AssertionError("Could not send SIG" + name + " to the child JVM", ex);
        }
        catch (InterruptedException ex) {
            Thread.currentThread().interrupt();
            throw new AssertionError("Interrupted while signalling the child JVM", ex);
        }
    }

    /** @return whether the child is still running */
    public boolean isAlive() {
        return this.process.isAlive();
    }

    /** @return the lines read so far by {@link #awaitLine} */
    public List<String> output() {
        return List.copyOf(this.seen);
    }

    /** @return the last line the child printed, if any was read */
    public @Nullable String lastLine() {
        return this.seen.isEmpty() ? null : this.seen.get(this.seen.size() - 1);
    }

    /** Kills the child if it is still running. */
    @Override
    public void close() {
        if (this.process.isAlive()) {
            kill();
        }
    }
}
