package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ResponseSink;
import io.kvstash.server.codec.ResponseEncoder;
import io.kvstash.server.l2.L2Tap;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.file.CountersDescriptor;

/**
 * The publish stage's sink: encodes each response straight into its client's response ring. Never waits:
 * the receiver admitted the request only when the ring had room for its response bound, so a write fails
 * only for a session that is gone or was replaced, and then the response is dropped and counted.
 * <p>
 * Owner: the publish stage thread.
 */
final class ClientPublisher implements ResponseSink
{
    private final ClientSession[] sessions;
    private final ResponseEncoder encoder;
    private final StoreCounters counters;
    private final L2Tap l2Tap;

    ClientPublisher(
        final ClientSession[] sessions, final StoreCounters counters, final byte[] registerExtra, final L2Tap l2Tap)
    {
        this.sessions = sessions;
        this.l2Tap = l2Tap;
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
        if (ClientSession.FREE == session.state() || session.sessionId() != event.clientSession)
        {
            counters.addAtomic(CountersDescriptor.WIRE_RESPONSES_DROPPED, 1);
            return;
        }
        final StoreCommand command = event.command;
        final boolean tierAnswer = null != l2Tap && RequestType.LOOKUP == command.type &&
            (command.flags & RequestFlags.LOOKUP_ONLY) != 0;
        final boolean written;
        if (tierAnswer)
        {
            // A waiting LOOKUP: the notice goes first, so the answer carries the ticket of the read-through it
            // started (none when the tier is not up) and the highest ticket over at this moment.
            l2Tap.onResponse(command, event.clientSession);
            final long ticket = l2Tap.isTierUp() ? l2Tap.lastTicket() : 0;
            written = encoder.encode(command, session.responses, true, ticket, l2Tap.completedTicket());
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
        if (null != l2Tap && !tierAnswer)
        {
            // After the answer: the second tier's notice never delays any other response.
            l2Tap.onResponse(command, event.clientSession);
        }
    }
}
