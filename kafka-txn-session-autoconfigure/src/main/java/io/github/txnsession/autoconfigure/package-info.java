/**
 * Spring Boot auto-configuration for transaction sessions.
 */
@NullMarked
package io.github.txnsession.autoconfigure;

import org.jspecify.annotations.NullMarked;
