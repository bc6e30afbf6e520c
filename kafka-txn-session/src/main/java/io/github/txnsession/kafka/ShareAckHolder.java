package io.github.txnsession.kafka;

/**
 * A bound share consumer as the session sees it when acknowledgements are added to a transaction: it says whether it
 * delivered a record and keeps the acknowledgement until the transaction ends.
 */
interface ShareAckHolder {

    /** @return the share group the consumer belongs to */
    String groupId();

    /** @return whether this consumer delivered the record and has not acknowledged it yet */
    boolean holds(ShareAcknowledgement ack);

    /** Keeps {@code ack} until the transaction ends: applied after commit, turned into RELEASE after abort. */
    void hold(ShareAcknowledgement ack);
}
