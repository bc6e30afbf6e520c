package io.github.txnsession.autoconfigure;

import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import io.github.txnsession.kafka.TransactionSession;

import static org.assertj.core.api.Assertions.assertThat;

class TransactionSessionAutoConfigurationTest {

    @Test
    void isRegisteredForBootToDiscover() throws Exception {
        var imports = getClass().getClassLoader().getResources(
                "META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports");
        StringBuilder all = new StringBuilder();
        while (imports.hasMoreElements()) {
            try (var in = imports.nextElement().openStream()) {
                all.append(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
            }
        }
        assertThat(all.toString()).contains(TransactionSessionAutoConfiguration.class.getName());
    }

    @Test
    void loadsInABootContext() {
        new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TransactionSessionAutoConfiguration.class))
            .run(context -> {
                assertThat(context).hasNotFailed();
                assertThat(context).hasSingleBean(TransactionSessionAutoConfiguration.class);
            });
    }

    @Test
    void backsOffWithoutTheCoreLibrary() {
        new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(TransactionSessionAutoConfiguration.class))
            .withClassLoader(new FilteredClassLoader(TransactionSession.class))
            .run(context -> assertThat(context).doesNotHaveBean(TransactionSessionAutoConfiguration.class));
    }
}
