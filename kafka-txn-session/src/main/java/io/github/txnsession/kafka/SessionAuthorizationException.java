package io.github.txnsession.kafka;

import org.apache.kafka.common.errors.AuthenticationException;
import org.jspecify.annotations.Nullable;

/**
 * The brokers refused the session's principal: authentication failed (wrong credentials, unknown user), or the
 * principal may not use the transactional id ({@code Write} and {@code Describe} on the {@code TransactionalId}
 * resource) or the cluster. Nothing was written in the call that failed. The cause is Kafka's own error
 * ({@code TransactionalIdAuthorizationException}, {@code ClusterAuthorizationException}, an
 * {@code AuthenticationException}).
 *
 * <p>A live session is in {@link SessionState#FATAL_ERROR} afterwards (kafka-clients does not let its producer go on
 * after these errors): fix the credentials or ACLs and create a new session. A resumed session or a
 * {@link TransactionCommitter} call changed nothing at the coordinator: the prepared transaction is as it was, and the
 * call can be made again once the principal may use the id.
 *
 * <p>Not this exception: a principal that may use the transactional id but not write to a topic (or commit offsets for
 * a group) gets a {@link SessionAbortableException}; abort the transaction and the session goes on.
 */
public class SessionAuthorizationException extends TransactionSessionException {

    private static final long serialVersionUID = 1L;

    /**
     * @param transactionalId the session's transactional id
     * @param call the call that was refused
     * @param cause Kafka's authorization or authentication error
     */
    public SessionAuthorizationException(String transactionalId, String call, @Nullable Throwable cause) {
        super(transactionalId, call + " was refused by the brokers: " + withoutFinalPeriod(cause) + ". "
                + advice(transactionalId, cause), cause);
    }

    private static String withoutFinalPeriod(@Nullable Throwable cause) {
        String text = String.valueOf(cause);
        return text.endsWith(".") ? text.substring(0, text.length() - 1) : text;
    }

    private static String advice(String transactionalId, @Nullable Throwable cause) {
        if (cause instanceof AuthenticationException) {
            return "Check the client's security settings (security.protocol, sasl.mechanism, sasl.jaas.config, "
                    + "ssl.*).";
        }
        return "Grant the principal Write and Describe on TransactionalId '" + transactionalId + "' (for example "
                + "kafka-acls.sh --add --allow-principal User:<name> --operation Write --operation Describe "
                + "--transactional-id " + transactionalId + "), then try again with a new session.";
    }

    /**
     * @param ex an error of a call to the brokers
     * @return whether it, or the cause kafka-clients wrapped it in, is an authentication error or an authorization
     *         error on the transactional id or the cluster (not on a topic or a group: those are abortable)
     */
    static boolean isSessionAuthorizationError(Throwable ex) {
        for (Throwable t = ex; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof AuthenticationException
                    || t instanceof org.apache.kafka.common.errors.TransactionalIdAuthorizationException
                    || t instanceof org.apache.kafka.common.errors.ClusterAuthorizationException) {
                return true;
            }
        }
        return false;
    }
}
