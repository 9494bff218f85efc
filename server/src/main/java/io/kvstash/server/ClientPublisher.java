package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ResponseSink;
import io.kvstash.server.codec.ResponseEncoder;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;

/**
 * The publish stage's sink: encodes each response straight into its client's response ring. Never waits:
 * the receiver admitted the request only when the ring had room for its response bound, so a write fails
 * only for a session that is gone or was replaced, and then the response is dropped and counted. A request sent
 * with {@link RequestFlags#NO_REPLY} is answered to no one: its admitted bound is given back unused, and a failure
 * of it is counted ({@link CountersDescriptor#NO_REPLY_FAILURES}) since that count is all anyone will see of it.
 * <p>
 * Owner: the publish stage thread.
 */
final class ClientPublisher implements ResponseSink
{
    private final ClientSession[] sessions;
    private final ResponseEncoder encoder;
    private final StoreCounters counters;
    private final ResponseObserver observer;

    ClientPublisher(
        final ClientSession[] sessions,
        final StoreCounters counters,
        final byte[] registerExtra,
        final ResponseObserver observer)
    {
        this.sessions = sessions;
        this.observer = observer;
        this.encoder = new ResponseEncoder(counters, registerExtra);
        this.counters = counters;
    }

    @Override
    public void onResponse(final RequestEvent event)
    {
        final int index = event.clientIndex;
        if (index < 0 || index >= sessions.length)
        {
            return;
        }
        final ClientSession session = sessions[index];
        final StoreCommand command = event.command;
        final boolean answered = RequestFlags.isAnswered(command.type, command.flags);
        if (!answered && Status.OK != command.status)
        {
            counters.addAtomic(CountersDescriptor.NO_REPLY_FAILURES, 1);
        }
        if (ClientSession.FREE == session.state() || session.sessionId() != event.clientSession)
        {
            if (answered)
            {
                counters.addAtomic(CountersDescriptor.WIRE_RESPONSES_DROPPED, 1);
            }
            return;
        }
        if (!answered)
        {
            session.release(event.producerTag);
            if (null != observer)
            {
                observer.onResponse(command, event.clientSession);
            }
            return;
        }
        final boolean waitingLookup = null != observer && RequestType.LOOKUP == command.type &&
            (command.flags & RequestFlags.LOOKUP_ONLY) != 0;
        final boolean written;
        if (waitingLookup)
        {
            // The observer first, so the answer carries the ticket of the work it started (a read-through of the
            // second tier) and the highest ticket over at this moment.
            final long ticket = observer.onWaitingLookup(command, event.clientSession);
            written = encoder.encode(command, session.responses, true, ticket, observer.completedTicket());
        }
        else
        {
            written = encoder.encode(command, session.responses);
        }
        if (!written)
        {
            counters.addAtomic(CountersDescriptor.WIRE_RESPONSES_DROPPED, 1);
        }
        session.release(event.producerTag);
        if (null != observer && !waitingLookup)
        {
            // After the answer: the observer never delays any other response.
            observer.onResponse(command, event.clientSession);
        }
    }
}
