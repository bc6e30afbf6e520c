package io.github.txnsession.autoconfigure;

import io.github.txnsession.kafka.TransactionSession;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;

/**
 * Auto-configuration of transaction sessions for Spring Boot applications. Active when the core library is on the
 * classpath.
 *
 * <p>This release registers no beans yet: the session pool and the transaction manager arrive with the Spring
 * integration. The class exists so that the starter's wiring (registration in
 * {@code META-INF/spring/org.springframework.boot.autoconfigure.AutoConfiguration.imports}) is in place and tested.
 */
@AutoConfiguration
@ConditionalOnClass(TransactionSession.class)
public class TransactionSessionAutoConfiguration {
}
