package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.ChunkSeal;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
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
        final Histogram prepareNs = new Histogram(1, TimeUnit.SECONDS.toNanos(10), 3);
        long prepares = 0;
        long warmUpMaxNs = 0;
        long noSpace = 0;
        boolean pinnedIntact = true;
        boolean reservedIntact;
        // One server thread (receiver and stages together) beside the two client threads: on this 2-core
        // machine a receiver thread of its own competes with the flood for a core and its wake-ups set the tail.
        try (KvStashServer server = KvStashServer.launch(ChaosRunner.serverContext(dir, slots, 30_000)
                .threadingMode(ThreadingMode.SHARED));
            KvStashClient holder = KvStashClient.connect(new ClientContext().directory(dir));
            KvStashClient flood = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            final long holderInstance = 1;
            final long floodInstance = 2;
            check(holder.register(holderInstance, LoadWorker.layout(CHUNK_BYTES)));
            check(flood.register(floodInstance, LoadWorker.layout(CHUNK_BYTES)));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);

            // 32 readable chunks pinned by a lookup, and 16 chunks reserved and never committed (yet).
            ClientResponse r = holder.prepareStore(holderInstance, LoadWorker.ids(0, 32));
            check(r);
            final long pinnedStore = r.transferId();
            final int[] pinnedGeneration = new int[32];
            for (int i = 0; i < r.slotCount(); i++)
            {
                pinnedGeneration[r.slotRangeIndex(i)] = r.slotGeneration(i);
                holder.slotView(r.slotOffset(i), CHUNK_BYTES, view)
                    .putBytes(0, seal.seal(0, r.slotRangeIndex(i), r.slotGeneration(i), 0), 0, CHUNK_BYTES);
            }
            check(holder.commitStore(holderInstance, pinnedStore));
            r = holder.lookup(holderInstance, LoadWorker.ids(0, 32), true);
            check(r);
            final long pins = r.transferId();
            r = holder.prepareStore(holderInstance, LoadWorker.ids(1_000, 16));
            check(r);
            final long reservation = r.transferId();

            // Demand at a multiple of the pool, in rounds, with reservations held across prepares (24 chunks of
            // 4 at a time, 96 with the 48 pinned and reserved) so the pool fills up and NO_SPACE happens.
            final int demand = options.exhaustionFactor * slots;
            final long firstKey = 10_000;
            final long[] held = new long[24];
            int heldCount = 0;
            // The first tenth of the rounds (at least one) warms the JIT on both sides and is not in the
            // percentiles; its worst prepare is reported on its own.
            final long warmUpChunks = (long)demand * Math.max(1, options.exhaustionRounds / 10);
            // Every key range is made before the clock starts so the flood allocates nothing while it is timed:
            // a young collection in this JVM (server and clients share it) would otherwise be the tail.
            final ChunkKeys[] ranges = new ChunkKeys[demand * options.exhaustionRounds / 4];
            for (int i = 0; i < ranges.length; i++)
            {
                ranges[i] = LoadWorker.ids(firstKey + 4L * i, 4);
            }
            for (int stored = 0; stored < demand * options.exhaustionRounds; stored += 4)
            {
                final long start = System.nanoTime();
                final ClientResponse p = flood.prepareStore(floodInstance, ranges[stored / 4]);
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
                        check(flood.commitStore(floodInstance, held[h]));
                    }
                    heldCount = 0;
                }
            }
            for (int h = 0; h < heldCount; h++)
            {
                check(flood.commitStore(floodInstance, held[h]));
            }

            r = holder.prepareRetrieveFromLookup(holderInstance, pins);
            check(r);
            for (int i = 0; i < r.slotCount(); i++)
            {
                seal.scratch().putBytes(0, holder.slotView(r.slotOffset(i), CHUNK_BYTES, view), 0, CHUNK_BYTES);
                pinnedIntact &= seal.verify(0, r.slotRangeIndex(i), pinnedGeneration[r.slotRangeIndex(i)]);
            }
            check(holder.commitRetrieve(holderInstance, r.transferId()));
            reservedIntact = holder.commitStore(holderInstance, reservation).isOk() &&
                16 == holder.lookup(holderInstance, LoadWorker.ids(1_000, 16), false).hitChunks();
            report.put("exhaustion_evictions", server.counters().get(StoreCounters.EVICTIONS));
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
        report.put("exhaustion_demand_chunks", (long)options.exhaustionFactor * slots * options.exhaustionRounds);
        report.put("exhaustion_prepares", prepares);
        report.put("exhaustion_no_space", noSpace);
        report.put("exhaustion_prepares_measured", prepareNs.getTotalCount());
        report.put("exhaustion_warmup_prepare_max_us", round(warmUpMaxNs / 1e3));
        report.put("exhaustion_prepare_p50_us", round(prepareNs.getValueAtPercentile(50) / 1e3));
        report.put("exhaustion_prepare_p999_us", round(prepareNs.getValueAtPercentile(99.9) / 1e3));
        report.put("exhaustion_prepare_max_us", round(prepareNs.getMaxValue() / 1e3));
        report.put("exhaustion_pinned_intact", pinnedIntact);
        report.put("exhaustion_reserved_intact", reservedIntact);
        chaos.progress("exhaustion done: " + prepares + " prepares, " + noSpace + " NO_SPACE, p99.9 " +
            round(prepareNs.getValueAtPercentile(99.9) / 1e3) + " us");
    }
}
