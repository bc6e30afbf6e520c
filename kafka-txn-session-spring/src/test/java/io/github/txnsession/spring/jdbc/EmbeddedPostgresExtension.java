package io.github.txnsession.spring.jdbc;

import java.io.IOException;

import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/** A real PostgreSQL server (zonky embedded binaries) per test class. */
final class EmbeddedPostgresExtension implements BeforeAllCallback, AfterAllCallback {

    private @Nullable EmbeddedPostgres postgres;

    @Override
    public void beforeAll(ExtensionContext context) throws IOException {
        this.postgres = EmbeddedPostgres.builder().start();
    }

    @Override
    public void afterAll(ExtensionContext context) throws IOException {
        if (this.postgres != null) {
            this.postgres.close();
            this.postgres = null;
        }
    }

    String jdbcUrl() {
        if (this.postgres == null) {
            throw new IllegalStateException("PostgreSQL is not running");
        }
        return this.postgres.getJdbcUrl("postgres", "postgres");
    }
}
