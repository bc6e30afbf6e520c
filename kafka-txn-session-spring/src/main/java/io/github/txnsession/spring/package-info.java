/**
 * Spring integration of transaction sessions: transaction management over sessions.
 */
@NullMarked
package io.github.txnsession.spring;

import org.jspecify.annotations.NullMarked;
