package io.github.txnsession.boot.docs;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import com.jayway.jsonpath.JsonPath;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Keeps README.md and the guide in {@code docs/} from rotting:
 * <ul>
 * <li>every Java block is preceded by {@code <!-- snippet: PATH#ID -->} and shows exactly the region between
 * {@code // tag::ID[]} and {@code // end::ID[]} of that test source file, which the build compiles and runs;</li>
 * <li>{@code docs/properties.md} is the configuration metadata that Boot's processor generates from the properties
 * classes.</li>
 * </ul>
 * Run with {@code -Ddocs.update=true} to rewrite the documents from the sources instead of checking them.
 */
class DocsTest {

    private static final Pattern SNIPPET = Pattern.compile("<!-- snippet: (\\S+)#(\\S+) -->");
    private static final boolean UPDATE = Boolean.getBoolean("docs.update");

    /** the repository root: the tests run in the starter module's directory */
    private static final Path ROOT = Path.of("").toAbsolutePath().getParent();

    @Test
    void everyJavaBlockIsASnippetOfCodeThatTheBuildCompilesAndRuns() throws IOException {
        List<String> problems = new ArrayList<>();
        int snippets = 0;
        for (Path doc : documents()) {
            List<String> lines = Files.readAllLines(doc, StandardCharsets.UTF_8);
            List<String> out = new ArrayList<>();
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i);
                out.add(line);
                Matcher m = SNIPPET.matcher(line.trim());
                if (line.trim().equals("```java") && (i == 0 || !SNIPPET.matcher(lines.get(i - 1).trim()).matches())) {
                    problems.add(where(doc, i) + ": a Java block without a snippet marker (its code is not compiled "
                            + "by any test); add <!-- snippet: PATH#ID --> above it");
                }
                if (!m.matches()) {
                    continue;
                }
                snippets++;
                if (i + 1 >= lines.size() || !lines.get(i + 1).trim().equals("```java")) {
                    problems.add(where(doc, i) + ": the snippet marker must be followed by a ```java block");
                    continue;
                }
                int end = i + 2;
                while (end < lines.size() && !lines.get(end).trim().equals("```")) {
                    end++;
                }
                List<String> shown = lines.subList(i + 2, Math.min(end, lines.size()));
                List<String> source;
                try {
                    source = region(ROOT.resolve(m.group(1)), m.group(2));
                }
                catch (IllegalArgumentException ex) {
                    problems.add(where(doc, i) + ": " + ex.getMessage());
                    continue;
                }
                if (!shown.equals(source)) {
                    problems.add(where(doc, i) + ": the block differs from " + m.group(1) + "#" + m.group(2)
                            + " (run DocsTest with -Ddocs.update=true)\n--- shown\n" + String.join("\n", shown)
                            + "\n--- source\n" + String.join("\n", source));
                }
                out.add(lines.get(i + 1));
                out.addAll(source);
                i = end - 1; // the closing fence is copied next
            }
            if (UPDATE && !out.equals(lines)) {
                Files.write(doc, out, StandardCharsets.UTF_8);
            }
        }
        assertThat(snippets).as("snippet markers in README.md and docs/").isPositive();
        if (!UPDATE) {
            assertThat(problems).as("documents out of step with their sources").isEmpty();
        }
    }

    @Test
    void thePropertiesReferenceIsTheConfigurationMetadata() throws IOException {
        Path reference = ROOT.resolve("docs/properties.md");
        String expected = propertiesReference();
        if (UPDATE) {
            Files.createDirectories(reference.getParent());
            Files.writeString(reference, expected, StandardCharsets.UTF_8);
        }
        assertThat(reference).as("docs/properties.md (run DocsTest with -Ddocs.update=true)").exists();
        assertThat(Files.readString(reference, StandardCharsets.UTF_8))
            .as("docs/properties.md is generated from the configuration metadata (run DocsTest with "
                    + "-Ddocs.update=true)")
            .isEqualTo(expected);
    }

    private static List<Path> documents() throws IOException {
        List<Path> docs = new ArrayList<>();
        docs.add(ROOT.resolve("README.md"));
        Path dir = ROOT.resolve("docs");
        if (Files.isDirectory(dir)) {
            try (Stream<Path> files = Files.walk(dir)) {
                files.filter(p -> p.toString().endsWith(".md")).sorted().forEach(docs::add);
            }
        }
        return docs;
    }

    private static String where(Path doc, int index) {
        return ROOT.relativize(doc) + ":" + (index + 1);
    }

    /** @return the lines between the tag comments, without the indentation they share */
    static List<String> region(Path file, String id) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        }
        catch (IOException ex) {
            throw new IllegalArgumentException("cannot read " + ROOT.relativize(file) + " (" + ex + ")");
        }
        int start = -1;
        int end = -1;
        for (int i = 0; i < lines.size(); i++) {
            String t = lines.get(i).trim();
            if (t.equals("// tag::" + id + "[]")) {
                start = i + 1;
            }
            else if (t.equals("// end::" + id + "[]")) {
                end = i;
            }
        }
        if (start < 0 || end < start) {
            throw new IllegalArgumentException("no region '" + id + "' (// tag::" + id + "[] ... // end::" + id
                    + "[]) in " + ROOT.relativize(file));
        }
        List<String> region = lines.subList(start, end);
        int indent = region.stream()
            .filter(l -> !l.isBlank())
            .mapToInt(l -> l.length() - l.stripLeading().length())
            .min()
            .orElse(0);
        return region.stream().map(l -> l.isBlank() ? "" : l.substring(indent)).toList();
    }

    private static String propertiesReference() throws IOException {
        String json = null;
        for (URL url : Collections.list(DocsTest.class.getClassLoader()
            .getResources("META-INF/spring-configuration-metadata.json"))) {
            try (InputStream in = url.openStream()) {
                String one = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                if (one.contains("\"kafka.txn-session.pool-size\"")) {
                    json = one;
                }
            }
            catch (IOException ex) {
                throw new UncheckedIOException(ex);
            }
        }
        assertThat(json).as("the starter's configuration metadata on the classpath").isNotNull();
        List<Map<String, Object>> properties = JsonPath.read(json, "$.properties[*]");
        StringBuilder md = new StringBuilder();
        md.append("# Configuration properties\n\n");
        md.append("<!-- generated from the configuration metadata by DocsTest; do not edit. Regenerate with\n");
        md.append("     ./mvnw -pl kafka-txn-session-spring-boot-starter test -Dtest=DocsTest -Ddocs.update=true -->\n\n");
        md.append("Every `kafka.txn-session.*` property of the starter, from the metadata that Spring Boot's ");
        md.append("configuration processor generates (IDEs show the same). Connection settings come from ");
        md.append("`spring.kafka.*`; see [Spring Boot](spring-boot.md).\n\n");
        md.append("| property | type | default | description |\n|---|---|---|---|\n");
        properties.stream()
            .sorted(Comparator.comparing(p -> (String) p.get("name")))
            .forEach(p -> md.append("| `").append(p.get("name")).append("` | ")
                .append(simpleType((String) p.get("type"))).append(" | ")
                .append(p.get("defaultValue") == null ? "" : "`" + p.get("defaultValue") + "`").append(" | ")
                .append(cell((String) p.get("description"))).append(" |\n"));
        return md.toString();
    }

    private static String simpleType(String type) {
        if (type == null) {
            return "";
        }
        return "`" + type.replaceAll("(?:[a-z0-9_]+\\.)+([A-Z])", "$1") + "`";
    }

    private static String cell(String text) {
        return text == null ? "" : text.replace("|", "\\|").replace("\n", " ");
    }
}
