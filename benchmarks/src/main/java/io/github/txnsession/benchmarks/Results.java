package io.github.txnsession.benchmarks;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

import org.jspecify.annotations.Nullable;

/**
 * Every measured repetition of every competitor, the goals of the issue, and their rendering as Markdown and JSON.
 * Medians, minima and maxima are taken across repetitions; a ratio is ours / anchor of the medians.
 */
final class Results {

    /** One competitor in one case of a scenario, with the metrics of each measured repetition. */
    static final class Series {
        final String scenario;
        final String caseName;
        final String key;
        final String competitor;
        final List<Map<String, Double>> reps = new ArrayList<>();

        Series(String scenario, String caseName, String key, String competitor) {
            this.scenario = scenario;
            this.caseName = caseName;
            this.key = key;
            this.competitor = competitor;
        }

        double median(String metric) {
            return stat(metric, 0.5);
        }

        double min(String metric) {
            return stat(metric, 0.0);
        }

        double max(String metric) {
            return stat(metric, 1.0);
        }

        private double stat(String metric, double q) {
            double[] v = this.reps.stream().map(m -> m.get(metric)).filter(x -> x != null && !x.isNaN())
                .mapToDouble(Double::doubleValue).sorted().toArray();
            if (v.length == 0) {
                return Double.NaN;
            }
            if (q == 0.5) {
                return v.length % 2 == 1 ? v[v.length / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
            }
            return q == 0.0 ? v[0] : v[v.length - 1];
        }
    }

    /**
     * A goal of the issue: median(metric of ours) / median(metric of anchor) must be at least (higherIsBetter) or at
     * most (otherwise) {@code target}.
     */
    record Goal(String scenario, String caseName, String metric, String oursKey, String anchorKey, double target,
            boolean atLeast) {
    }

    /** What a scenario measures, for the table header. */
    record Layout(String scenario, String title, List<String> metrics) {
    }

    private final Map<String, Series> series = new LinkedHashMap<>();
    private final List<Goal> goals = new ArrayList<>();
    private final Map<String, Layout> layouts = new LinkedHashMap<>();
    private final Map<String, String> notes = new LinkedHashMap<>();

    synchronized Series series(String scenario, String caseName, String key, String competitor) {
        return this.series.computeIfAbsent(scenario + "|" + caseName + "|" + key,
                k -> new Series(scenario, caseName, key, competitor));
    }

    synchronized void record(String scenario, String caseName, String key, String competitor,
            Map<String, Double> metrics) {
        series(scenario, caseName, key, competitor).reps.add(new LinkedHashMap<>(metrics));
    }

    void layout(String scenario, String title, String... metrics) {
        this.layouts.put(scenario, new Layout(scenario, title, List.of(metrics)));
    }

    void goal(String scenario, String caseName, String metric, String ours, String anchor, double target,
            boolean atLeast) {
        this.goals.add(new Goal(scenario, caseName, metric, ours, anchor, target, atLeast));
    }

    void note(String scenario, String text) {
        this.notes.merge(scenario, text, (a, b) -> a + " " + b);
    }

    private @Nullable Series find(String scenario, String caseName, String key) {
        return this.series.get(scenario + "|" + caseName + "|" + key);
    }

    double ratio(Goal g) {
        Series ours = find(g.scenario(), g.caseName(), g.oursKey());
        Series anchor = find(g.scenario(), g.caseName(), g.anchorKey());
        if (ours == null || anchor == null) {
            return Double.NaN;
        }
        return ours.median(g.metric()) / anchor.median(g.metric());
    }

    boolean met(Goal g) {
        double r = ratio(g);
        return !Double.isNaN(r) && (g.atLeast() ? r >= g.target() : r <= g.target());
    }

    // ------------------------------------------------------------------ Markdown

    String markdown(Map<String, String> meta) {
        StringBuilder md = new StringBuilder();
        md.append("# Benchmark results ").append(meta.getOrDefault("date", "")).append("\n\n");
        meta.forEach((k, v) -> md.append("- ").append(k).append(": ").append(v).append('\n'));
        md.append("\nEach cell: median across measured repetitions, [min - max] in brackets. Latencies in ms: the ")
            .append("median across repetitions of each repetition's p50 / p99.\n");
        for (Layout layout : this.layouts.values()) {
            md.append("\n## ").append(layout.scenario()).append(": ").append(layout.title()).append("\n\n");
            md.append("| case | competitor |");
            layout.metrics().forEach(m -> md.append(' ').append(m).append(" |"));
            md.append("\n|---|---|");
            layout.metrics().forEach(m -> md.append("---:|"));
            md.append('\n');
            for (Series s : this.series.values()) {
                if (!s.scenario.equals(layout.scenario())) {
                    continue;
                }
                md.append("| ").append(s.caseName).append(" | ").append(s.key).append(") ").append(s.competitor)
                    .append(" |");
                for (String m : layout.metrics()) {
                    md.append(' ').append(cell(s, m)).append(" |");
                }
                md.append('\n');
            }
            List<Goal> scenarioGoals = this.goals.stream().filter(g -> g.scenario().equals(layout.scenario())).toList();
            if (!scenarioGoals.isEmpty()) {
                md.append("\n| case | ratio | value | goal | met |\n|---|---|---:|---|---|\n");
                for (Goal g : scenarioGoals) {
                    md.append("| ").append(g.caseName()).append(" | ").append(g.metric()).append(' ')
                        .append(g.oursKey()).append('/').append(g.anchorKey()).append(" | ")
                        .append(fmt(ratio(g))).append(" | ").append(g.atLeast() ? ">= " : "<= ")
                        .append(fmt(g.target())).append(" | ").append(met(g) ? "yes" : "**no**").append(" |\n");
                }
            }
            String note = this.notes.get(layout.scenario());
            if (note != null) {
                md.append('\n').append(note).append('\n');
            }
        }
        return md.toString();
    }

    private static String cell(Series s, String metric) {
        double med = s.median(metric);
        if (Double.isNaN(med)) {
            return "-";
        }
        if (metric.endsWith("_p50_ms") || metric.endsWith("_p99_ms")) {
            return fmt(med) + " [" + fmt(s.min(metric)) + " - " + fmt(s.max(metric)) + "]";
        }
        return fmt(med) + " [" + fmt(s.min(metric)) + " - " + fmt(s.max(metric)) + "]";
    }

    static String fmt(double v) {
        if (Double.isNaN(v)) {
            return "n/a";
        }
        double a = Math.abs(v);
        if (a >= 1000) {
            return String.format(Locale.ROOT, "%,.0f", v);
        }
        if (a >= 100) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        if (a >= 10) {
            return String.format(Locale.ROOT, "%.1f", v);
        }
        if (a >= 0.1) {
            return String.format(Locale.ROOT, "%.2f", v);
        }
        return String.format(Locale.ROOT, "%.3f", v);
    }

    // ------------------------------------------------------------------ JSON

    String json(Map<String, String> meta) {
        StringBuilder j = new StringBuilder("{\n  \"meta\": {");
        String sep = "";
        for (Map.Entry<String, String> e : meta.entrySet()) {
            j.append(sep).append("\n    ").append(str(e.getKey())).append(": ").append(str(e.getValue()));
            sep = ",";
        }
        j.append("\n  },\n  \"series\": [");
        sep = "";
        for (Series s : this.series.values()) {
            j.append(sep).append("\n    {\"scenario\": ").append(str(s.scenario)).append(", \"case\": ")
                .append(str(s.caseName)).append(", \"key\": ").append(str(s.key)).append(", \"competitor\": ")
                .append(str(s.competitor)).append(", \"repetitions\": ").append(s.reps.size())
                .append(", \"metrics\": {");
            String msep = "";
            for (String metric : metricNames(s)) {
                double[] values = s.reps.stream().map(m -> m.get(metric)).filter(x -> x != null)
                    .mapToDouble(Double::doubleValue).toArray();
                j.append(msep).append("\n      ").append(str(metric)).append(": {\"median\": ")
                    .append(num(s.median(metric))).append(", \"min\": ").append(num(s.min(metric)))
                    .append(", \"max\": ").append(num(s.max(metric))).append(", \"values\": ")
                    .append(Arrays.stream(values).mapToObj(Results::num).toList()).append('}');
                msep = ",";
            }
            j.append("\n    }}");
            sep = ",";
        }
        j.append("\n  ],\n  \"ratios\": [");
        sep = "";
        for (Goal g : this.goals) {
            j.append(sep).append("\n    {\"scenario\": ").append(str(g.scenario())).append(", \"case\": ")
                .append(str(g.caseName())).append(", \"metric\": ").append(str(g.metric())).append(", \"ours\": ")
                .append(str(g.oursKey())).append(", \"anchor\": ").append(str(g.anchorKey()))
                .append(", \"ratio\": ").append(num(ratio(g))).append(", \"goal\": ")
                .append(str((g.atLeast() ? ">= " : "<= ") + g.target())).append(", \"met\": ").append(met(g))
                .append('}');
            sep = ",";
        }
        j.append("\n  ]\n}\n");
        return j.toString();
    }

    private static List<String> metricNames(Series s) {
        List<String> names = new ArrayList<>();
        for (Map<String, Double> rep : s.reps) {
            for (String k : rep.keySet()) {
                if (!names.contains(k)) {
                    names.add(k);
                }
            }
        }
        return names;
    }

    private static String num(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? "null" : String.format(Locale.ROOT, "%.4f", v);
    }

    private static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                default -> {
                    if (c < 0x20) {
                        b.append(String.format(Locale.ROOT, "\\u%04x", (int) c));
                    }
                    else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    void write(Path dir, String baseName, Map<String, String> meta) throws IOException {
        Files.createDirectories(dir);
        Files.writeString(dir.resolve(baseName + ".md"), markdown(meta), StandardCharsets.UTF_8);
        Files.writeString(dir.resolve(baseName + ".json"), json(meta), StandardCharsets.UTF_8);
    }
}
