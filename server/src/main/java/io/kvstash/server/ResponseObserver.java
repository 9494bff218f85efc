package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;

/**
 * The publish side's hook for a component that follows what the server answers, set on
 * {@link ServerContext#responseObserver(ResponseObserver)} before the launch: the second tier attaches through it
 * the way Aeron's archive is a client of its media driver, so the server holds no code of it. The server calls it on
 * the publish stage's thread, once per answered request; it must never wait, allocate or throw there.
 * <p>
 * A waiting LOOKUP (a {@code LOOKUP_ONLY} lookup, whose answer carries tickets) is observed <em>before</em> its
 * answer is written, through {@link #onWaitingLookup(StoreCommand, long)}, so that the answer carries the ticket of
 * the work the observer started for it and the highest ticket over ({@link #completedTicket()}). Every other
 * request is observed <em>after</em> its answer is written, through {@link #onResponse(StoreCommand, long)}, so the
 * observer never delays an answer. With no observer, a waiting LOOKUP's answer carries no tickets.
 */
public interface ResponseObserver
{
    /**
     * The server is starting: its counters (mapped in its control file) are there for the observer to count into
     * and read. Called once, on the launching thread, before any response is observed.
     *
     * @param counters the server's counters.
     */
    void onStart(StoreCounters counters);

    /**
     * A request other than a waiting LOOKUP was answered. Publish stage thread.
     *
     * @param command       the answered request and its outcome.
     * @param clientSession the session of the client that sent it.
     */
    void onResponse(StoreCommand command, long clientSession);

    /**
     * A waiting LOOKUP is about to be answered. Publish stage thread.
     *
     * @param command       the LOOKUP and its outcome.
     * @param clientSession the session of the client that sent it.
     * @return the ticket of the work started for it, which the answer carries, or 0 for none worth waiting for.
     */
    long onWaitingLookup(StoreCommand command, long clientSession);

    /**
     * The highest ticket whose work is over, which a waiting LOOKUP's answer carries. Any thread.
     *
     * @return completed ticket.
     */
    long completedTicket();
}
