package io.github.txnsession.samples.paymentservice;

import java.io.IOException;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A real PostgreSQL server (zonky embedded binaries) for one test class. Declare it with {@code @ExtendWith} above
 * {@code @SpringBootTest}: it then starts before the application context and stops after it closed.
 */
final class EmbeddedPostgresExtension implements BeforeAllCallback, AfterAllCallback {

    private static @Nullable EmbeddedPostgres postgres;

    @Override
    public void beforeAll(ExtensionContext context) throws IOException {
        postgres = EmbeddedPostgres.builder().start();
    }

    @Override
    public void afterAll(ExtensionContext context) throws IOException {
        EmbeddedPostgres running = postgres;
        postgres = null;
        if (running != null) {
            running.close();
        }
    }

    /** @return the JDBC URL of the running server's {@code postgres} database */
    static String jdbcUrl() {
        EmbeddedPostgres running = postgres;
        if (running == null) {
            throw new IllegalStateException("PostgreSQL is not running: declare @ExtendWith("
                    + "EmbeddedPostgresExtension.class) on the test class, above @SpringBootTest");
        }
        return running.getJdbcUrl("postgres", "postgres");
    }
}
