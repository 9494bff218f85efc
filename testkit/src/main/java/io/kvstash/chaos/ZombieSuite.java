package io.kvstash.chaos;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.process.ChildJvm;
import io.kvstash.process.ShmDirectories;
import io.kvstash.server.KvStashServer;
import io.kvstash.testkit.ChunkSeal;
import io.kvstash.testkit.LoadWorker;
import io.kvstash.testkit.TestWorker;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.Map;

import static io.kvstash.chaos.ChaosRunner.CHUNK_BYTES;
import static io.kvstash.chaos.ChaosRunner.check;

/**
 * Zombie fencing: a worker prepares a store and is stopped (SIGSTOP) past its lease; the slot's new owner stores
 * the same key; the zombie, continued, must find its commit rejected and must not have written over the owner.
 */
final class ZombieSuite implements ChaosSuite
{
    @Override
    public String name()
    {
        return "zombie";
    }

    @Override
    public void run(final ChaosRunner chaos) throws Exception
    {
        final ChaosRunner.Options options = chaos.options();
        final Map<String, Object> report = chaos.report();
        final Path dir = chaos.newDirectory("zombie");
        final long leaseMs = 100;
        long total = 0;
        long rejected = 0;
        long wrote = 0;
        long ownerIntact = 0;
        long sameSlot = 0;
        try (KvStashServer server = KvStashServer.launch(ChaosRunner.serverContext(dir, 64, leaseMs));
            KvStashClient owner = KvStashClient.connect(new ClientContext().directory(dir));
            ChildJvm zombie = ChildJvm.start(TestWorker.class, "zombie", dir.toString(), "7",
                Integer.toString(CHUNK_BYTES)))
        {
            final long ownerInstance = 8;
            check(owner.register(ownerInstance, LoadWorker.layout(CHUNK_BYTES)));
            final ChunkSeal seal = new ChunkSeal(CHUNK_BYTES);
            final UnsafeBuffer view = new UnsafeBuffer(0, 0);
            zombie.await("READY", 30_000);
            for (int rep = 0; rep < options.zombieReps; rep++)
            {
                zombie.send("prepare");
                final String prepared = zombie.await("PREPARED", 10_000);
                final long key = Long.parseLong(field(prepared, "key"));
                final long zombieOffset = Long.parseLong(field(prepared, "offset"));
                zombie.signal("STOP");
                final long reclaimed = server.counters().get(CountersDescriptor.RECLAIMED_LEASES);
                Thread.sleep(leaseMs);
                final long waitUntil = System.currentTimeMillis() + 5_000;
                while (server.counters().get(CountersDescriptor.RECLAIMED_LEASES) == reclaimed &&
                    System.currentTimeMillis() < waitUntil)
                {
                    Thread.sleep(5);
                }

                // The slot's new owner stores the same key: most often into the very slot the zombie held.
                final ClientResponse r = owner.prepareStore(ownerInstance, LoadWorker.ids(key, 1));
                check(r);
                final long transfer = r.transferId();
                final int generation = r.slotGeneration(0);
                final long offset = r.slotOffset(0);
                sameSlot += offset == zombieOffset ? 1 : 0;
                owner.chunks().slotView(offset, CHUNK_BYTES, view).putBytes(0, seal.seal(0, key, generation, 1), 0, CHUNK_BYTES);
                check(owner.commitStore(ownerInstance, transfer));

                zombie.signal("CONT");
                zombie.send("go");
                final String commit = zombie.await("COMMIT", 10_000);
                total++;
                rejected += commit.contains("status=" + Status.name(Status.UNKNOWN_TRANSFER)) ? 1 : 0;
                wrote += commit.contains("wrote=true") ? 1 : 0;

                final ClientResponse read = owner.prepareRetrieve(ownerInstance, LoadWorker.ids(key, 1));
                check(read);
                seal.scratch().putBytes(0, owner.chunks().slotView(read.slotOffset(0), CHUNK_BYTES, view), 0, CHUNK_BYTES);
                ownerIntact += seal.verify(0, key, read.slotGeneration(0)) ? 1 : 0;
                check(owner.commitRetrieve(ownerInstance, read.transferId()));
                if (rep % 100 == 99)
                {
                    chaos.progress("zombie fencing: " + (rep + 1) + " repetitions, " + rejected +
                        " late commits rejected");
                }
            }
            zombie.send("end");
        }
        finally
        {
            ShmDirectories.delete(dir);
        }
        report.put("late_commits_total", total);
        report.put("late_commits_rejected", rejected);
        report.put("late_writes", wrote);
        report.put("late_slot_reused", sameSlot);
        report.put("new_owner_bytes_intact", ownerIntact);
        chaos.progress("zombie fencing done: " + rejected + " of " + total + " late commits rejected, " + ownerIntact +
            " owners intact");
    }

    private static String field(final String line, final String name)
    {
        for (final String part : line.split(" "))
        {
            if (part.startsWith(name + "="))
            {
                return part.substring(name.length() + 1);
            }
        }
        throw new IllegalStateException("no " + name + " in " + line);
    }
}
