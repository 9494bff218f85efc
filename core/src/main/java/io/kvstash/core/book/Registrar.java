package io.kvstash.core.book;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.SlotGeometry;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.hash.ChunkHasher;
import io.kvstash.wire.layout.Layout;

import java.util.Arrays;

/**
 * The lifecycle of instances: REGISTER (the layout checked against the registry, its size class found or
 * created: its chunk rounded up to the alignment, or the fixed slot size of --slot-bytes), UNREGISTER, and REAP of every instance a dead or
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
    private final SlotRegions regions;
    private final ChunkIndex index;
    private final TransferLeases leases;
    private final ChunkHasher hasher;
    private final ChainLearner learner;

    Registrar(
        final StoreContext context,
        final StoreCounters counters,
        final InstanceTable instances,
        final SlotRegions regions,
        final ChunkIndex index,
        final TransferLeases leases,
        final ChunkHasher hasher,
        final ChainLearner learner)
    {
        this.context = context;
        this.counters = counters;
        this.instances = instances;
        this.regions = regions;
        this.index = index;
        this.leases = leases;
        this.hasher = hasher;
        this.learner = learner;
    }

    void onRegister(final StoreCommand command)
    {
        if (command.modelLength <= 0 || command.modelLength > Layout.MAX_MODEL_LENGTH)
        {
            command.fail(Status.INVALID_LAYOUT, "model name must be 1 to 255 UTF-8 bytes");
            return;
        }
        final Layout layout = layoutOf(command);
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
            answerRegister(command, chunkBytes, instances.slotClass(existing));
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
        final long fixedSlotBytes = context.slotBytes() > 0 ? alignUp(context.slotBytes()) : 0;
        final String slotRefusal = slotRefusal(neededSlotBytes, fixedSlotBytes);
        if (null != slotRefusal)
        {
            command.fail(Status.INVALID_LAYOUT, slotRefusal);
            return;
        }
        // Every refusal comes before the first change: a refused REGISTER leaves the slots as they were.
        if (instances.isFull())
        {
            command.fail(Status.BUSY, "instance limit reached");
            return;
        }
        final int slotClass = classFor(fixedSlotBytes > 0 ? fixedSlotBytes : neededSlotBytes);
        if (slotClass < 0)
        {
            command.fail(Status.BUSY, "the pool already holds " + SlotRegions.MAX_CLASSES + " slot sizes");
            return;
        }
        final long ns = hasher.namespace(command.model, command.modelLength, command.worldSize, command.rank, 0);
        final int instance = instances.add(command.instanceId, layout, chunkBytes, slotClass, ns);
        instances.owner(instance, command.session);
        answerRegister(command, chunkBytes, slotClass);
    }

    private static Layout layoutOf(final StoreCommand command)
    {
        return new Layout(
            Arrays.copyOf(command.model, command.modelLength),
            command.worldSize,
            command.rank,
            command.layers,
            command.hidden,
            command.dtypeCode,
            command.mla);
    }

    /**
     * Why a chunk's slot (the chunk rounded up to the alignment) cannot be given: it must fit the pool, a pool
     * segment and the fixed slot size when there is one.
     *
     * @return the reason, or null when the slot fits.
     */
    private String slotRefusal(final long neededSlotBytes, final long fixedSlotBytes)
    {
        if (neededSlotBytes > context.poolSizeBytes())
        {
            // The chunk fits the pool but its aligned slot does not: the pool would have no slot at all.
            return "chunk slot (chunk rounded up to the alignment) larger than the pool";
        }
        if (neededSlotBytes > SlotGeometry.SEGMENT_BYTES)
        {
            return "chunk slot larger than a pool segment (1 GiB): a chunk must fit one";
        }
        if (fixedSlotBytes > 0 && neededSlotBytes > fixedSlotBytes)
        {
            return "chunk larger than the fixed slot size (--slot-bytes)";
        }
        return null;
    }

    void onUnregister(final StoreCommand command)
    {
        final int instance = instances.indexOf(command.instanceId);
        command.done = true;
        if (instance < 0)
        {
            counters.increment(CountersDescriptor.UNREGISTER_UNKNOWN);
            command.status = Status.OK;
            return;
        }
        final long ended = unregister(instance);
        if ((command.flags & RequestFlags.REAPED) != 0)
        {
            counters.increment(CountersDescriptor.DEAD_CLIENTS);
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
            counters.increment(CountersDescriptor.DEAD_CLIENTS);
        }
        command.removedCount = reaped;
        command.status = Status.OK;
        command.done = true;
    }

    /**
     * The registered instance a command names.
     *
     * @param command the request; failed with UNKNOWN_INSTANCE when its instance is not registered.
     * @return the instance's index, or -1 when the command was failed.
     */
    int instanceOrFail(final StoreCommand command)
    {
        final int instance = instances.indexOf(command.instanceId);
        if (instance < 0)
        {
            command.fail(Status.UNKNOWN_INSTANCE, "instance not registered");
        }
        return instance;
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
     * The size class of a slot size, created when new: the id space, the index and the learner's per-chunk room
     * grow so that every region can hold slots of the smallest class (REGISTER only; allocates).
     *
     * @param slotBytes slot size, already aligned.
     * @return class, or -1 when the pool holds as many slot sizes as it can.
     */
    int classFor(final long slotBytes)
    {
        final int slotClass = regions.classFor(slotBytes);
        if (slotClass >= 0)
        {
            final int ids = regions.slots().idCapacity();
            index.grow(ids);
            learner.grow(ids);
        }
        return slotClass;
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

    private void answerRegister(final StoreCommand command, final long chunkBytes, final int slotClass)
    {
        command.status = Status.OK;
        command.chunkBytes = chunkBytes;
        command.slotBytes = regions.classSlotBytes(slotClass);
        command.slotCapacity = regions.classCapacity(slotClass);
        command.done = true;
    }
}
