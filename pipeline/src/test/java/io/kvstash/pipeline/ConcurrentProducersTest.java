package io.kvstash.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Several producer threads issue a random mix of every request concurrently, on chunks they share (one
 * model, world size and rank), with a small pool and short leases so eviction, NO_SPACE, pins held by
 * others and expired leases all happen; a timer thread publishes SWEEP ticks. Forbidden outcomes: a request
 * without exactly one response, a response delivered to another producer, a broken invariant of the book,
 * anything reserved or pinned after every instance unregistered.
 */
@Timeout(120)
class ConcurrentProducersTest
{
    static final int PRODUCERS = 3;
    static final long RUN_NS = TimeUnit.MILLISECONDS.toNanos(1500);
    /** Each producer goes on past the run's time until it has made this many calls (a loaded machine). */
    static final long MIN_CALLS_PER_PRODUCER = 60;
    static final Layout LAYOUT = Layout.of("shared-model", 1, 0, 1, 4, Dtype.FLOAT16, false);

    @ParameterizedTest
    @EnumSource(ThreadingMode.class)
    void shouldAnswerEveryRequestOnceAndKeepInvariantsWhenProducersRace(final ThreadingMode mode) throws Exception
    {
        final StoreContext storeContext = new StoreContext()
            .poolSizeBytes(48 * 4096L)
            .alignment(4096)
            .leaseNs(TimeUnit.MILLISECONDS.toNanos(20))
            .conclude();
        final PipelineCaller.Router router = new PipelineCaller.Router(PRODUCERS, storeContext);
        final AtomicLong misrouted = new AtomicLong();
        final ResponseSink sink = event ->
        {
            if (event.clientIndex >= 0 && (event.command.correlationId >>> 40) != event.clientIndex)
            {
                misrouted.incrementAndGet();
            }
            router.onResponse(event);
        };
        final PipelineContext context = new PipelineContext()
            .storeContext(storeContext)
            .threadingMode(ThreadingMode.SHARED == mode ? ThreadingMode.DEDICATED : mode)
            .waitMode(WaitMode.YIELDING)
            .multiProducer(true)
            .responseSink(sink);
        final long[] calls = new long[PRODUCERS];
        final AtomicLong sweeps = new AtomicLong();
        try (Pipeline pipeline = new Pipeline(context).start())
        {
            race(pipeline, router, calls, sweeps);
            unregisterAll(new PipelineCaller(pipeline, router, 0));
            while (!pipeline.isDrained())
            {
                Thread.onSpinWait();
            }
            // Each producer made at least MIN_CALLS_PER_PRODUCER calls (its loop fails otherwise).
            long total = 0;
            for (int p = 0; p < PRODUCERS; p++)
            {
                total += calls[p];
                final long extra = 0 == p ? 2L * PRODUCERS : 0;
                assertEquals(calls[p] + extra, router.mailboxes[p].deliveries.get(), "producer " + p);
            }
            assertEquals(total + 2L * PRODUCERS + sweeps.get(), router.responses.get());
            assertEquals(0, misrouted.get());
            assertNull(pipeline.book().verifyInvariants());
            assertEquals(0, pipeline.book().reservedChunks());
            assertEquals(0, pipeline.book().pinnedChunks());
            assertEquals(0, pipeline.book().pendingTransfers());
            assertEquals(pipeline.book().slotCapacity(),
                pipeline.book().freeSlots() + pipeline.book().readableChunks());
        }
    }

    private static long produce(final PipelineCaller caller, final int index, final long end)
    {
        final SplittableRandom random = new SplittableRandom(7919L * (index + 1));
        final long instance = 100 + index;
        long calls = 0;
        StoreCommand response = caller.register(instance, LAYOUT);
        calls++;
        assertEquals(Status.OK, response.status);
        final long giveUp = end + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() - end < 0 || calls < MIN_CALLS_PER_PRODUCER)
        {
            if (System.nanoTime() - giveUp > 0)
            {
                throw new AssertionError("producer " + index + " made only " + calls + " calls in a minute");
            }
            final int from = random.nextInt(40);
            final ChunkKeys keys = ids(from, 1 + random.nextInt(12));
            switch (random.nextInt(7))
            {
                case 0, 1 -> calls += store(caller, random, instance, keys);
                case 2 -> calls += lookup(caller, random, instance, keys);
                case 3, 4 -> calls += retrieve(caller, random, instance, keys);
                case 5 ->
                {
                    caller.onTransfer(RequestType.COMMIT_STORE, instance, random.nextLong());
                    calls++;
                }
                default ->
                {
                    final int type = random.nextInt(50) == 0 ? RequestType.CLEAR : RequestType.PING;
                    caller.call(c -> c.type = type);
                    calls++;
                }
            }
        }
        return calls;
    }

    /** Runs the producers against the pipeline until the run's end, with a sweeper beside them; rethrows a failure. */
    private static void race(
        final Pipeline pipeline, final PipelineCaller.Router router, final long[] calls, final AtomicLong sweeps)
        throws InterruptedException
    {
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final Thread[] threads = new Thread[PRODUCERS + 1];
        final long end = System.nanoTime() + RUN_NS;
        for (int p = 0; p < PRODUCERS; p++)
        {
            final int index = p;
            threads[p] = new Thread(() ->
            {
                try
                {
                    calls[index] = produce(new PipelineCaller(pipeline, router, index), index, end);
                }
                catch (final Throwable ex)
                {
                    failure.compareAndSet(null, ex);
                }
            }, "producer-" + p);
        }
        final AtomicBoolean producing = new AtomicBoolean(true);
        threads[PRODUCERS] = new Thread(() ->
        {
            while (producing.get())
            {
                if (pipeline.tryPublishSweep(pipeline.context().clock().nanoTime()))
                {
                    sweeps.incrementAndGet();
                }
                sleepMs(5);
            }
        }, "sweeper");
        for (final Thread thread : threads)
        {
            thread.start();
        }
        for (int p = 0; p < PRODUCERS; p++)
        {
            threads[p].join();
        }
        producing.set(false);
        threads[PRODUCERS].join();
        if (null != failure.get())
        {
            throw new AssertionError("producer failed", failure.get());
        }
    }

    /** Unregisters the shared instance and each producer's own, as the cleaner (client 0). */
    private static void unregisterAll(final PipelineCaller cleaner)
    {
        for (int p = 0; p < PRODUCERS; p++)
        {
            assertEquals(Status.OK, cleaner.call(c ->
            {
                c.type = RequestType.UNREGISTER;
                c.instanceId = 100;
            }).status);
            final long instance = 100 + p;
            assertEquals(Status.OK, cleaner.call(c ->
            {
                c.type = RequestType.UNREGISTER;
                c.instanceId = instance;
            }).status);
        }
    }
    /** A PREPARE_STORE, then its COMMIT_STORE or (one in five) ABORT_STORE; returns the calls made. */
    private static int store(
        final PipelineCaller caller, final SplittableRandom random, final long instance, final ChunkKeys keys)
    {
        final long transfer = caller.keyed(RequestType.PREPARE_STORE, instance, keys, 0).outTransferId;
        if (0 == transfer)
        {
            return 1;
        }
        caller.onTransfer(random.nextInt(5) == 0 ? RequestType.ABORT_STORE : RequestType.COMMIT_STORE, instance, transfer);
        return 2;
    }

    /** A pinning LOOKUP, then a RELEASE or a PREPARE_RETRIEVE from it and its COMMIT_RETRIEVE; returns the calls. */
    private static int lookup(
        final PipelineCaller caller, final SplittableRandom random, final long instance, final ChunkKeys keys)
    {
        final long transfer = caller.keyed(RequestType.LOOKUP, instance, keys, RequestFlags.PIN).outTransferId;
        if (0 == transfer)
        {
            return 1;
        }
        if (random.nextBoolean())
        {
            caller.onTransfer(RequestType.RELEASE, instance, transfer);
            return 2;
        }
        final long retrieve = caller.call(c ->
        {
            c.type = RequestType.PREPARE_RETRIEVE;
            c.instanceId = instance;
            c.transferId = transfer;
            c.flags = RequestFlags.FROM_LOOKUP;
        }).outTransferId;
        if (0 == retrieve)
        {
            return 2;
        }
        caller.onTransfer(RequestType.COMMIT_RETRIEVE, instance, retrieve);
        return 3;
    }

    /** A PREPARE_RETRIEVE by keys, then (nine in ten) its COMMIT_RETRIEVE; returns the calls made. */
    private static int retrieve(
        final PipelineCaller caller, final SplittableRandom random, final long instance, final ChunkKeys keys)
    {
        final long transfer = caller.keyed(RequestType.PREPARE_RETRIEVE, instance, keys, 0).outTransferId;
        if (0 != transfer && random.nextInt(10) != 0)
        {
            caller.onTransfer(RequestType.COMMIT_RETRIEVE, instance, transfer);
            return 2;
        }
        return 1;
    }

    private static ChunkKeys ids(final int from, final int count)
    {
        final long[] ids = new long[count];
        for (int i = 0; i < count; i++)
        {
            ids[i] = from + i;
        }
        return ChunkKeys.ofIds(ids);
    }

    private static void sleepMs(final long ms)
    {
        try
        {
            Thread.sleep(ms);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
