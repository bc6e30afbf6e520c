package io.github.txnsession.spring;

/**
 * A consistent view of a {@link TransactionSessionPool} at one moment, for health checks and metrics.
 *
 * @param size the bound: at most this many sessions exist
 * @param initialized sessions created and initialized so far (idle or in use)
 * @param inUse sessions handed out now
 * @param waiting threads waiting for a session now
 * @param exhausted how many acquires failed because the pool stayed exhausted for the whole acquire timeout
 * @param replaced how many sessions were closed and dropped because they were fenced or broken
 * @param closed whether the pool was closed
 */
public record SessionPoolSnapshot(int size, int initialized, int inUse, int waiting, long exhausted, long replaced,
        boolean closed) {
}
