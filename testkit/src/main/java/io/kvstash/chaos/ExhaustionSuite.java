package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.ChunkSeal;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static io.kvstash.chaos.ChaosRunner.CHUNK_BYTES;
import static io.kvstash.chaos.ChaosRunner.check;
import static io.kvstash.chaos.ChaosRunner.round;

/**
 * Pool exhaustion: a flood demands several times the pool's capacity while another client holds pinned and
 * reserved chunks; prepares answer NO_SPACE without a long tail, and the held chunks stay intact.
 */
final class ExhaustionSuite implements ChaosSuite
{
    private static final long HOLDER_INSTANCE = 1;
    private static final long FLOOD_INSTANCE = 2;

    @Override
    public String name()
    {
        return "exhaustion";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final Map<String, Object> report = chaos.report();
        final Path dir = chaos.newDirectory("exhaustion");
        final int slots = 128;
        final Flood flood = new Flood();
        final boolean pinnedIntact;
        final boolean reservedIntact;
        // One server thread (receiver and stages together) beside the two client threads: on this 2-core
        // machine a receiver thread of its own competes with the flood for a core and its wake-ups set the tail.
        try (KvStashServer server = KvStashServer.launch(ChaosRunner.serverContext(dir, slots, 30_000)
                .threadingMode(ThreadingMode.SHARED));
            KvStashClient holder = KvStashClient.connect(new ClientContext().directory(dir));
            KvStashClient floodClient = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            check(holder.register(HOLDER_INSTANCE, LoadWorker.layout(CHUNK_BYTES)));
            check(floodClient.register(FLOOD_INSTANCE, LoadWorker.layout(CHUNK_BYTES)));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);
            final Held held = hold(holder, seal, view);
            flood.run(floodClient, options.exhaustionFactor * slots, options.exhaustionRounds);
            pinnedIntact = pinnedIntact(holder, held, seal, view);
            reservedIntact = holder.commitStore(HOLDER_INSTANCE, held.reservation()).isOk() &&
                16 == holder.lookup(HOLDER_INSTANCE, LoadWorker.ids(1_000, 16), false).hitChunks();
            report.put("exhaustion_evictions", server.counters().get(CountersDescriptor.EVICTIONS));
            if (null != server.latency())
            {
                server.latency().poll(System.currentTimeMillis());
                final Histogram serverSide = server.latency().copyRequestTotal(RequestType.PREPARE_STORE);
                report.put("exhaustion_server_prepare_p999_us", round(serverSide.getValueAtPercentile(99.9) / 1e3));
                report.put("exhaustion_server_prepare_max_us", round(serverSide.getMaxValue() / 1e3));
            }
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
        final Histogram prepareNs = flood.prepareNs;
        report.put("exhaustion_demand_chunks", (long)options.exhaustionFactor * slots * options.exhaustionRounds);
        report.put("exhaustion_prepares", flood.prepares);
        report.put("exhaustion_no_space", flood.noSpace);
        report.put("exhaustion_prepares_measured", prepareNs.getTotalCount());
        report.put("exhaustion_warmup_prepare_max_us", round(flood.warmUpMaxNs / 1e3));
        report.put("exhaustion_prepare_p50_us", round(prepareNs.getValueAtPercentile(50) / 1e3));
        report.put("exhaustion_prepare_p999_us", round(prepareNs.getValueAtPercentile(99.9) / 1e3));
        report.put("exhaustion_prepare_max_us", round(prepareNs.getMaxValue() / 1e3));
        report.put("exhaustion_pinned_intact", pinnedIntact);
        report.put("exhaustion_reserved_intact", reservedIntact);
        chaos.progress("exhaustion done: " + flood.prepares + " prepares, " + flood.noSpace + " NO_SPACE, p99.9 " +
            round(prepareNs.getValueAtPercentile(99.9) / 1e3) + " us");
    }

    /** What the holder keeps through the flood: pins on 32 readable chunks and 16 chunks reserved. */
    private record Held(long pins, long reservation, int[] pinnedGeneration)
    {
    }

    /**
     * The holder's chunks: 32 readable chunks pinned by a lookup, and 16 chunks reserved and never committed (yet).
     */
    private static Held hold(final KvStashClient holder, final ChunkSeal seal, final UnsafeBuffer view)
    {
        ClientResponse r = holder.prepareStore(HOLDER_INSTANCE, LoadWorker.ids(0, 32));
        check(r);
        final long pinnedStore = r.transferId();
        final int[] pinnedGeneration = new int[32];
        for (int i = 0; i < r.slotCount(); i++)
        {
            pinnedGeneration[r.slotRangeIndex(i)] = r.slotGeneration(i);
            holder.chunks().slotView(r.slotOffset(i), CHUNK_BYTES, view)
                .putBytes(0, seal.seal(0, r.slotRangeIndex(i), r.slotGeneration(i), 0), 0, CHUNK_BYTES);
        }
        check(holder.commitStore(HOLDER_INSTANCE, pinnedStore));
        r = holder.lookup(HOLDER_INSTANCE, LoadWorker.ids(0, 32), true);
        check(r);
        final long pins = r.transferId();
        r = holder.prepareStore(HOLDER_INSTANCE, LoadWorker.ids(1_000, 16));
        check(r);
        return new Held(pins, r.transferId(), pinnedGeneration);
    }

    /** Retrieves the pinned chunks and verifies each still holds what the holder wrote. */
    private static boolean pinnedIntact(
        final KvStashClient holder, final Held held, final ChunkSeal seal, final UnsafeBuffer view)
    {
        boolean intact = true;
        final ClientResponse r = holder.prepareRetrieveFromLookup(HOLDER_INSTANCE, held.pins());
        check(r);
        for (int i = 0; i < r.slotCount(); i++)
        {
            seal.scratch().putBytes(0, holder.chunks().slotView(r.slotOffset(i), CHUNK_BYTES, view), 0, CHUNK_BYTES);
            intact &= seal.verify(0, r.slotRangeIndex(i), held.pinnedGeneration()[r.slotRangeIndex(i)]);
        }
        check(holder.commitRetrieve(HOLDER_INSTANCE, r.transferId()));
        return intact;
    }

    /** The flood's prepares: how many, how many answered NO_SPACE, and how long each took. */
    private static final class Flood
    {
        final Histogram prepareNs = new Histogram(1, TimeUnit.SECONDS.toNanos(10), 3);
        long prepares;
        long warmUpMaxNs;
        long noSpace;

        /**
         * Demand at a multiple of the pool, in rounds, with reservations held across prepares (24 chunks of 4
         * at a time, 96 with the 48 pinned and reserved) so the pool fills up and NO_SPACE happens.
         */
        void run(final KvStashClient flood, final int demand, final int rounds)
        {
            final long firstKey = 10_000;
            final long[] held = new long[24];
            int heldCount = 0;
            // The first tenth of the rounds (at least one) warms the JIT on both sides and is not in the
            // percentiles; its worst prepare is reported on its own.
            final long warmUpChunks = (long)demand * Math.max(1, rounds / 10);
            // Every key range is made before the clock starts so the flood allocates nothing while it is timed:
            // a young collection in this JVM (server and clients share it) would otherwise be the tail.
            final ChunkKeys[] ranges = new ChunkKeys[demand * rounds / 4];
            for (int i = 0; i < ranges.length; i++)
            {
                ranges[i] = LoadWorker.ids(firstKey + 4L * i, 4);
            }
            for (int stored = 0; stored < demand * rounds; stored += 4)
            {
                final long start = System.nanoTime();
                final ClientResponse p = flood.prepareStore(FLOOD_INSTANCE, ranges[stored / 4]);
                final long elapsedNs = Math.max(1, System.nanoTime() - start);
                if (stored < warmUpChunks)
                {
                    warmUpMaxNs = Math.max(warmUpMaxNs, elapsedNs);
                }
                else
                {
                    prepareNs.recordValue(elapsedNs);
                }
                prepares++;
                if (Status.NO_SPACE == p.status())
                {
                    noSpace++;
                }
                else
                {
                    check(p);
                    held[heldCount++] = p.transferId();
                }
                if (heldCount == held.length || Status.NO_SPACE == p.status())
                {
                    for (int h = 0; h < heldCount; h++)
                    {
                        check(flood.commitStore(FLOOD_INSTANCE, held[h]));
                    }
                    heldCount = 0;
                }
            }
            for (int h = 0; h < heldCount; h++)
            {
                check(flood.commitStore(FLOOD_INSTANCE, held[h]));
            }
        }
    }
}
