package io.kvstash.server;

import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ResponseSink;
import io.kvstash.server.codec.ResponseEncoder;
import io.kvstash.server.l2.L2Tap;

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
            counters.addAtomic(StoreCounters.WIRE_RESPONSES_DROPPED, 1);
            return;
        }
        if (!encoder.encode(event.command, session.responses))
        {
            counters.addAtomic(StoreCounters.WIRE_RESPONSES_DROPPED, 1);
        }
        session.release(event.producerTag);
        if (null != l2Tap)
        {
            // After the answer: the second tier's notice never delays a response.
            l2Tap.onResponse(event.command, event.clientSession);
        }
    }
}
