package io.github.txnsession.kafka;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.ClusterAuthorizationException;
import org.apache.kafka.common.errors.TransactionalIdAuthorizationException;
import org.jspecify.annotations.Nullable;

/**
 * {@link TransactionSession#initialize()} was refused: authentication failed (wrong credentials, unknown user), or the
 * principal may not use the transactional id ({@code Write} and {@code Describe} on the {@code TransactionalId}
 * resource) or the cluster. Nothing was registered or written. The cause is Kafka's own error
 * ({@code TransactionalIdAuthorizationException}, {@code ClusterAuthorizationException}, an
 * {@code AuthenticationException}).
 *
 * <p>The session is {@link SessionState#FATAL_ERROR} afterwards: kafka-clients leaves its producer in an error state
 * after these errors, so fix the credentials or grant the ACL, then create a new session.
 *
 * <p>Not this exception: once initialized, a principal that may not write to a topic (or commit offsets for a group)
 * gets a {@link SessionAbortableException}; abort the transaction and the session goes on. Authorization errors of
 * later calls, and of resumed sessions and {@link TransactionCommitter} (whose requests may have reached the
 * coordinator before the refusal), are reported as they were before this type existed: Kafka's error from
 * {@code resume()}, a {@link TransactionSessionException} with it as the cause from a completion, whose outcome is
 * then unknown.
 */
public class SessionAuthorizationException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the session's transactional id
     * @param call the call that was refused
     * @param cause Kafka's authorization or authentication error
     */
    public SessionAuthorizationException(String transactionalId, String call, @Nullable Throwable cause) {
        super(transactionalId, call + " was refused by the brokers: " + withoutFinalPeriod(kafkaError(cause)) + ". "
                + advice(transactionalId, kafkaError(cause)), cause);
    }

    private static String withoutFinalPeriod(@Nullable Throwable cause) {
        String text = String.valueOf(cause);
        return text.endsWith(".") ? text.substring(0, text.length() - 1) : text;
    }

    private static String advice(String transactionalId, @Nullable Throwable cause) {
        if (cause instanceof AuthenticationException) {
            return "Check the client's security settings (security.protocol, sasl.mechanism, sasl.jaas.config, "
                    + "ssl.*), then create a new session.";
        }
        if (cause instanceof ClusterAuthorizationException) {
            return "Grant the principal the cluster permission it lacks (IdempotentWrite on the cluster for "
                    + "transactional producers on older brokers), then create a new session.";
        }
        return "Grant the principal Write and Describe on TransactionalId '" + transactionalId + "' (for example "
                + "kafka-acls.sh --add --allow-principal User:<name> --operation Write --operation Describe "
                + "--transactional-id " + transactionalId + "), then create a new session.";
    }

    /** Kafka's error itself, or the one kafka-clients' plain {@code KafkaException} wraps (as {@link KafkaErrors}). */
    private static @Nullable Throwable kafkaError(@Nullable Throwable ex) {
        if (ex != null && ex.getClass() == KafkaException.class && ex.getCause() != null) {
            return ex.getCause();
        }
        return ex;
    }

    /** @return whether {@code ex} is an authentication error or an authorization error on the id or the cluster */
    static boolean isAuthorizationError(Throwable ex) {
        Throwable e = kafkaError(ex);
        return e instanceof AuthenticationException || e instanceof TransactionalIdAuthorizationException
                || e instanceof ClusterAuthorizationException;
    }
}
