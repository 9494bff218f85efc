package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.layout.Layout;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

/**
 * A synchronous caller of a pipeline for tests: one request in flight per caller, answered through a
 * mailbox keyed by the caller's client index. Works in every threading mode (in SHARED mode it runs the
 * pipeline agent itself while waiting).
 */
final class PipelineCaller
{
    /** Responses routed by client index. */
    static final class Router implements ResponseSink
    {
        final Mailbox[] mailboxes;
        final AtomicLong responses = new AtomicLong();

        Router(final int callers, final StoreContext context)
        {
            mailboxes = new Mailbox[callers];
            for (int i = 0; i < callers; i++)
            {
                mailboxes[i] = new Mailbox(context);
            }
        }

        @Override
        public void onResponse(final RequestEvent event)
        {
            responses.incrementAndGet();
            if (event.clientIndex >= 0)
            {
                mailboxes[event.clientIndex].deliver(event.command);
            }
        }
    }

    static final class Mailbox
    {
        final StoreCommand copy;
        volatile long correlationId;
        final AtomicLong deliveries = new AtomicLong();

        Mailbox(final StoreContext context)
        {
            copy = new StoreCommand(context);
        }

        void deliver(final StoreCommand command)
        {
            copyOutcome(command, copy);
            copy.type = command.type;
            deliveries.incrementAndGet();
            correlationId = command.correlationId;
        }
    }

    private final Pipeline pipeline;
    private final int clientIndex;
    private final Mailbox mailbox;
    private long nextCorrelationId;

    PipelineCaller(final Pipeline pipeline, final Router router, final int clientIndex)
    {
        this.pipeline = pipeline;
        this.clientIndex = clientIndex;
        this.mailbox = router.mailboxes[clientIndex];
        this.nextCorrelationId = ((long)clientIndex << 40) + 1;
    }

    StoreCommand call(final Consumer<StoreCommand> filler)
    {
        final long sequence = pipeline.claim();
        final RequestEvent event = pipeline.event(sequence);
        final StoreCommand command = event.reset();
        event.clientIndex = clientIndex;
        final long correlationId = nextCorrelationId++;
        command.correlationId = correlationId;
        command.timestampNs = pipeline.context().clock().nanoTime();
        filler.accept(command);
        pipeline.publish(sequence);
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (mailbox.correlationId != correlationId)
        {
            pipeline.driveOnce();
            if (System.nanoTime() - deadline > 0)
            {
                throw new IllegalStateException("no response to correlation " + correlationId);
            }
        }
        return mailbox.copy;
    }

    StoreCommand register(final long instance, final Layout layout)
    {
        return call(c ->
        {
            c.type = RequestType.REGISTER;
            c.instanceId = instance;
            c.copyLayout(layout);
        });
    }

    StoreCommand keyed(final int type, final long instance, final ChunkKeys keys, final int flags)
    {
        return call(c ->
        {
            c.type = type;
            c.instanceId = instance;
            c.flags = flags;
            c.copyKeys(keys);
        });
    }

    StoreCommand onTransfer(final int type, final long instance, final long transferId)
    {
        return call(c ->
        {
            c.type = type;
            c.instanceId = instance;
            c.transferId = transferId;
        });
    }

    static void copyOutcome(final StoreCommand from, final StoreCommand to)
    {
        to.status = from.status;
        to.message = from.message;
        to.done = from.done;
        to.outTransferId = from.outTransferId;
        to.hitChunks = from.hitChunks;
        to.removedCount = from.removedCount;
        to.chunkBytes = from.chunkBytes;
        to.slotBytes = from.slotBytes;
        to.slotCapacity = from.slotCapacity;
        to.slotCount = from.slotCount;
        for (int i = 0; i < from.slotCount; i++)
        {
            to.slotChunkId[i] = from.slotChunkId[i];
            to.slotRangeIndex[i] = from.slotRangeIndex[i];
            to.slotGeneration[i] = from.slotGeneration[i];
            to.slotOffset[i] = from.slotOffset[i];
        }
    }
}
