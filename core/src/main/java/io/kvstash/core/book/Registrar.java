package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.Status;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.layout.Layout;

import java.util.Arrays;

/**
 * The lifecycle of instances: REGISTER (the layout checked against the registry and the slot size, the pool
 * re-cut while empty when a layout needs bigger slots), UNREGISTER, and REAP of every instance a dead or
 * departed client session owned; with them the namespace of an instance's keys under a salt.
 * <p>
 * Every refusal of a REGISTER comes before its first change, so a refused one leaves the book as it was.
 * Unregistering ends the instance's pending transfers (stores aborted, pins released).
 * <p>
 * Owner: the reserve stage thread (via {@link ChunkBook}). Not thread safe.
 */
final class Registrar
{
    private final StoreContext context;
    private final StoreCounters counters;
    private final InstanceTable instances;
    private final SlotStates slots;
    private final ChunkIndex index;
    private final TransferLeases leases;
    private final ChunkHasher hasher;

    Registrar(
        final StoreContext context,
        final StoreCounters counters,
        final InstanceTable instances,
        final SlotStates slots,
        final ChunkIndex index,
        final TransferLeases leases,
        final ChunkHasher hasher)
    {
        this.context = context;
        this.counters = counters;
        this.instances = instances;
        this.slots = slots;
        this.index = index;
        this.leases = leases;
        this.hasher = hasher;
    }

    void onRegister(final StoreCommand command)
    {
        if (command.modelLength <= 0 || command.modelLength > Layout.MAX_MODEL_LENGTH)
        {
            command.fail(Status.INVALID_LAYOUT, "model name must be 1 to 255 UTF-8 bytes");
            return;
        }
        final Layout layout = new Layout(
            Arrays.copyOf(command.model, command.modelLength),
            command.worldSize,
            command.rank,
            command.layers,
            command.hidden,
            command.dtypeCode,
            command.mla);
        final String invalid = layout.invalidReason(context.chunkTokens(), context.poolSizeBytes());
        if (null != invalid)
        {
            command.fail(Status.INVALID_LAYOUT, invalid);
            return;
        }
        final long chunkBytes = layout.chunkBytes(context.chunkTokens());
        final int existing = instances.indexOf(command.instanceId);
        if (existing >= 0)
        {
            if (!instances.layout(existing).equals(layout))
            {
                command.fail(Status.LAYOUT_MISMATCH, "instance already registered with another layout");
                return;
            }
            // A worker that re-registers through a new session (it reconnected) takes its instance over.
            instances.owner(existing, command.session);
            answerRegister(command, chunkBytes);
            return;
        }
        final Layout registered = instances.registered(layout);
        if (null != registered && !registered.equals(layout))
        {
            command.fail(Status.LAYOUT_MISMATCH, "this model, world size and rank were registered with another layout");
            return;
        }
        if (null == registered && instances.isRegistryFull())
        {
            command.fail(Status.BUSY, "layout registry full (65,536 model, world size and rank identities)");
            return;
        }
        final long neededSlotBytes = alignUp(chunkBytes);
        if (neededSlotBytes > context.poolSizeBytes())
        {
            // The chunk fits the pool but its aligned slot does not: the pool would have no slot at all.
            command.fail(Status.INVALID_LAYOUT, "chunk slot (chunk rounded up to the alignment) larger than the pool");
            return;
        }
        if (neededSlotBytes > SlotGeometry.SEGMENT_BYTES)
        {
            command.fail(Status.INVALID_LAYOUT, "chunk slot larger than a pool segment (1 GiB): a chunk must fit one");
            return;
        }
        if (neededSlotBytes > slots.slotBytes())
        {
            if (context.slotBytes() > 0)
            {
                command.fail(Status.INVALID_LAYOUT, "chunk larger than the fixed slot size (--slot-bytes)");
                return;
            }
            if (slots.readableChunks() + slots.reservedChunks() > 0)
            {
                command.fail(Status.INVALID_LAYOUT, "chunk larger than the slot size of the layouts registered first, and the pool is not empty");
                return;
            }
        }
        // Every refusal comes before the first change: a refused REGISTER leaves the slots as they were.
        if (instances.isFull())
        {
            command.fail(Status.BUSY, "instance limit reached");
            return;
        }
        if (neededSlotBytes > slots.slotBytes())
        {
            cutSlots(neededSlotBytes);
        }
        final long ns = hasher.namespace(command.model, command.modelLength, command.worldSize, command.rank, 0);
        final int instance = instances.add(command.instanceId, layout, chunkBytes, ns);
        instances.owner(instance, command.session);
        answerRegister(command, chunkBytes);
    }

    void onUnregister(final StoreCommand command)
    {
        final int instance = instances.indexOf(command.instanceId);
        command.done = true;
        if (instance < 0)
        {
            counters.increment(StoreCounters.UNREGISTER_UNKNOWN);
            command.status = Status.OK;
            return;
        }
        final long ended = unregister(instance);
        if ((command.flags & RequestFlags.REAPED) != 0)
        {
            counters.increment(StoreCounters.DEAD_CLIENTS);
        }
        command.removedCount = ended;
        command.status = Status.OK;
    }

    /**
     * REAP: a client session ended; every instance it owns is unregistered as by UNREGISTER. With
     * RequestFlags.REAPED: the session's process died, counted once as a dead client.
     */
    void onReap(final StoreCommand command)
    {
        final long session = command.session;
        long reaped = 0;
        if (0 != session)
        {
            for (int i = instances.nextOwned(session, 0); i >= 0; i = instances.nextOwned(session, i))
            {
                unregister(i);
                reaped++;
            }
        }
        if ((command.flags & RequestFlags.REAPED) != 0)
        {
            counters.increment(StoreCounters.DEAD_CLIENTS);
        }
        command.removedCount = reaped;
        command.status = Status.OK;
        command.done = true;
    }

    /**
     * The namespace of an instance's keys under a salt; the last salt's namespace is cached per instance.
     *
     * @param instance instance index.
     * @param salt     the request's salt, 0 for none.
     * @return namespace.
     */
    long namespace(final int instance, final long salt)
    {
        if (0 == salt)
        {
            return instances.namespace(instance);
        }
        if (instances.lastSalt(instance) == salt)
        {
            return instances.lastSaltNamespace(instance);
        }
        // The table's own copy of the model name: Layout.modelBytes() would allocate a copy per request.
        final Layout layout = instances.layout(instance);
        final byte[] model = instances.model(instance);
        final long ns = hasher.namespace(model, model.length, layout.worldSize(), layout.rank(), salt);
        instances.lastSalt(instance, salt, ns);
        return ns;
    }

    /**
     * Cuts the (empty) pool into slots of a new size and sizes the index for them. Only called while no chunk
     * is reserved or readable.
     *
     * @param newSlotBytes slot size, already aligned.
     */
    void cutSlots(final long newSlotBytes)
    {
        slots.cut(newSlotBytes);
        index.resize(slots.slotCapacity());
    }

    long alignUp(final long bytes)
    {
        final long mask = context.alignment() - 1L;
        return (bytes + mask) & ~mask;
    }

    /**
     * Ends every pending transfer of an instance (stores aborted, pins released) and forgets it.
     *
     * @return transfers ended.
     */
    private long unregister(final int instance)
    {
        final long ended = leases.endAllOf(instance);
        instances.remove(instance);
        return ended;
    }

    private void answerRegister(final StoreCommand command, final long chunkBytes)
    {
        command.status = Status.OK;
        command.chunkBytes = chunkBytes;
        command.slotBytes = slots.slotBytes();
        command.slotCapacity = slots.slotCapacity();
        command.done = true;
    }
}
