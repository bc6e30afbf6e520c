package io.github.txnsession.kafka;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The state diagram in {@code docs/concepts.md} is generated from {@link SessionStateMachine}'s table: this test fails
 * when the two disagree. Run with {@code -Ddocs.update=true} to rewrite the diagram from the table.
 */
class SessionStateDiagramTest {

    static final String MARKER = "<!-- generated: state-diagram (SessionStateMachine) -->";

    /** the repository root: the tests run in the core module's directory */
    private static final Path CONCEPTS = Path.of("").toAbsolutePath().getParent().resolve("docs/concepts.md");

    /**
     * The diagram: the calls each state allows inside its box, the moves between states as arrows. Moves to
     * FATAL_ERROR and CLOSED, which every state but CLOSED has, are one note instead of sixteen arrows.
     */
    static String mermaid() {
        EnumSet<SessionState> everywhere = EnumSet.of(SessionState.FATAL_ERROR, SessionState.CLOSED);
        List<String> lines = new ArrayList<>();
        lines.add("stateDiagram-v2");
        lines.add("    [*] --> " + SessionState.UNINITIALIZED);
        for (SessionState state : SessionState.values()) {
            lines.add("    " + state + " : " + SessionStateMachine.allowed(state).stream()
                .map(SessionStateDiagramTest::callName)
                .collect(Collectors.joining(", ")));
        }
        for (SessionState from : SessionState.values()) {
            for (SessionState to : SessionState.values()) {
                boolean shownByNote = everywhere.contains(to) && from != SessionState.FATAL_ERROR;
                if (SessionStateMachine.canMove(from, to) && !shownByNote) {
                    lines.add("    " + from + " --> " + to);
                }
            }
        }
        lines.add("    " + SessionState.CLOSED + " --> [*]");
        lines.add("    note right of " + SessionState.FATAL_ERROR);
        lines.add("        every state but CLOSED can also move to");
        lines.add("        FATAL_ERROR (fenced, fatal error) and CLOSED (close)");
        lines.add("    end note");
        return String.join("\n", lines);
    }

    private static String callName(SessionOperation operation) {
        String[] words = operation.name().toLowerCase(Locale.ROOT).split("_");
        StringBuilder name = new StringBuilder(words[0]);
        for (int i = 1; i < words.length; i++) {
            name.append(Character.toUpperCase(words[i].charAt(0))).append(words[i].substring(1));
        }
        return name.toString();
    }

    @Test
    void theNoteOfTheDiagramHoldsForTheTable() {
        for (SessionState state : SessionState.values()) {
            if (state == SessionState.CLOSED) {
                continue;
            }
            assertThat(SessionStateMachine.canMove(state, SessionState.CLOSED)).as(state + " -> CLOSED").isTrue();
            if (state != SessionState.FATAL_ERROR) {
                assertThat(SessionStateMachine.canMove(state, SessionState.FATAL_ERROR)).as(state + " -> FATAL_ERROR")
                    .isTrue();
            }
        }
    }

    @Test
    void theDiagramInTheGuideIsTheTable() throws IOException {
        assertThat(CONCEPTS).as("docs/concepts.md").exists();
        List<String> lines = new ArrayList<>(Files.readAllLines(CONCEPTS, StandardCharsets.UTF_8));
        int marker = lines.indexOf(MARKER);
        assertThat(marker).as("the line %s in docs/concepts.md", MARKER).isNotNegative();
        assertThat(lines.get(marker + 1)).as("a ```mermaid block after the marker").isEqualTo("```mermaid");
        int end = marker + 2;
        while (end < lines.size() && !lines.get(end).equals("```")) {
            end++;
        }
        String shown = String.join("\n", lines.subList(marker + 2, end));
        if (Boolean.getBoolean("docs.update") && !shown.equals(mermaid())) {
            lines.subList(marker + 2, end).clear();
            lines.addAll(marker + 2, List.of(mermaid().split("\n")));
            Files.write(CONCEPTS, lines, StandardCharsets.UTF_8);
            return;
        }
        assertThat(shown).as("the state diagram in docs/concepts.md (regenerate: -Ddocs.update=true)")
            .isEqualTo(mermaid());
    }
}
