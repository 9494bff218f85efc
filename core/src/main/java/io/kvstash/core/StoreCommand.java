package io.kvstash.core;

import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.RequestFlags;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.layout.Layout;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * One request and everything its response needs, pre-allocated and reused: the Disruptor event of the
 * pipeline and the scratch of the synchronous facade. A mutable record: whichever stage currently holds
 * the command owns all of it; stages hand it on through the sequence barrier, never share it.
 * <p>
 * Request fields are filled by the producer. The reserve stage ({@link io.kvstash.core.book.ChunkBook})
 * writes the outcome and the decision fields (slot chunk ids, generations, offsets in the data region); the
 * slot-assign stage ({@link SlotAssigner}) checks the offsets lie in the pool; the commit stage
 * ({@link DataMover}) moves copy-transport bytes. {@link #done} set by reserve means the outcome is final and later stages only pass it through.
 */
public final class StoreCommand
{
    // ---------------------------------------------------------------- request, filled by the producer

    /** {@link RequestType} code. */
    public int type;
    /** Client's correlation id, echoed in the response. */
    public long correlationId;
    /** Instance the request acts for. */
    public long instanceId;
    /** Transfer the request acts on (COMMIT, ABORT, RELEASE, COMMIT_RETRIEVE, data, from-lookup). */
    public long transferId;
    /** Request flags: {@link RequestFlags#PIN}, {@link RequestFlags#FORCE}, {@link RequestFlags#FROM_LOOKUP}. */
    public int flags;
    /** Cache salt value ({@link io.kvstash.wire.hash.ChunkHasher#salt(String)}), 0 for none. */
    public long salt;
    /**
     * Client session the request came through (0 for embedded callers); REGISTER makes it the instance's
     * owner and REAP names the session whose instances go.
     */
    public long session;
    /** Time of the request on the server's clock, nanoseconds; leases are judged against it. */
    public long timestampNs;
    /** Number of chunk keys in {@link #keyHi} / {@link #keyLo}. */
    public int chunkCount;
    /** High halves of the chunk hashes of the key range, in range order. */
    public final long[] keyHi;
    /** Low halves of the chunk hashes of the key range, in range order. */
    public final long[] keyLo;
    /** Model name (REGISTER, LOOKUP_ALL_RANKS), UTF-8 in {@code model[0, modelLength)}. */
    public final byte[] model = new byte[255];
    /** Bytes used in {@link #model}. */
    public int modelLength;
    /** World size (REGISTER, LOOKUP_ALL_RANKS). */
    public int worldSize;
    /** Rank (REGISTER). */
    public int rank;
    /** Layers (REGISTER). */
    public int layers;
    /** Hidden size (REGISTER). */
    public int hidden;
    /** Dtype code (REGISTER). */
    public int dtypeCode;
    /** MLA flag (REGISTER). */
    public boolean mla;
    /** Copy transport: index in the transfer's slot list of the chunk to write or read. */
    public int dataChunkIndex;
    /** Copy transport: byte offset inside the chunk. */
    public long dataOffset;
    /** Copy transport: bytes to write (in {@link #data}) or to read. */
    public int dataLength;
    /** Copy transport payload: the bytes to write, or the bytes read. */
    public final UnsafeBuffer data;

    // ---------------------------------------------------------------- outcome, written by the stages

    /** {@link Status} code of the response. */
    public int status;
    /** A readable reason for an error status, a constant string; null when OK. */
    public String message;
    /** Set by reserve when the outcome is final and later stages pass the command through. */
    public boolean done;
    /** Transfer issued by the request, 0 for none. */
    public long outTransferId;
    /** Hit chunks of LOOKUP / LOOKUP_ALL_RANKS. */
    public int hitChunks;
    /** Chunks removed by CLEAR, or transfers reclaimed by SWEEP and UNREGISTER. */
    public long removedCount;
    /** Bytes of one chunk of the instance's layout (REGISTER and every slot list). */
    public long chunkBytes;
    /** Bytes of one pool slot. */
    public long slotBytes;
    /** Slots in the pool at the current slot size (REGISTER). */
    public int slotCapacity;
    /** Number of entries in the slot list. */
    public int slotCount;
    /** Slot list: chunk (slot) index in the pool, written by reserve. */
    public final int[] slotChunkId;
    /** Slot list: index of the chunk in the request's key range, written by reserve. */
    public final int[] slotRangeIndex;
    /** Slot list: slot generation the client checks before writing and after reading, written by reserve. */
    public final int[] slotGeneration;
    /** Slot list: byte offset of the slot from the start of the pool's data region, written by reserve. */
    public final long[] slotOffset;

    /**
     * A command sized for a store configuration.
     *
     * @param maxChunksPerRequest capacity of the key range and slot list.
     * @param maxInlineBytes      capacity of the copy-transport payload.
     */
    public StoreCommand(final int maxChunksPerRequest, final int maxInlineBytes)
    {
        keyHi = new long[maxChunksPerRequest];
        keyLo = new long[maxChunksPerRequest];
        slotChunkId = new int[maxChunksPerRequest];
        slotRangeIndex = new int[maxChunksPerRequest];
        slotGeneration = new int[maxChunksPerRequest];
        slotOffset = new long[maxChunksPerRequest];
        data = new UnsafeBuffer(new byte[maxInlineBytes]);
    }

    /**
     * A command sized for a store context.
     *
     * @param context concluded store configuration.
     */
    public StoreCommand(final StoreContext context)
    {
        this(context.maxChunksPerRequest(), context.maxInlineBytes());
    }

    /**
     * Largest key range this command holds.
     *
     * @return chunk capacity.
     */
    public int maxChunks()
    {
        return keyHi.length;
    }

    /**
     * Clears the request and outcome for reuse; arrays are left as they are (their counts bound them).
     *
     * @return this.
     */
    public StoreCommand reset()
    {
        type = 0;
        correlationId = 0;
        instanceId = 0;
        transferId = 0;
        flags = 0;
        salt = 0;
        session = 0;
        timestampNs = 0;
        chunkCount = 0;
        modelLength = 0;
        worldSize = 0;
        rank = 0;
        layers = 0;
        hidden = 0;
        dtypeCode = 0;
        mla = false;
        dataChunkIndex = 0;
        dataOffset = 0;
        dataLength = 0;
        clearOutcome();
        return this;
    }

    /**
     * Clears only the outcome fields, keeping the request (used before a replay or a retry).
     */
    public void clearOutcome()
    {
        status = Status.OK;
        message = null;
        done = false;
        outTransferId = 0;
        hitChunks = 0;
        removedCount = 0;
        chunkBytes = 0;
        slotBytes = 0;
        slotCapacity = 0;
        slotCount = 0;
    }

    /**
     * Copies the request fields of another command (sized alike) into this one, outcome untouched.
     *
     * @param from source command.
     * @return this.
     */
    public StoreCommand copyRequestFrom(final StoreCommand from)
    {
        type = from.type;
        correlationId = from.correlationId;
        instanceId = from.instanceId;
        transferId = from.transferId;
        flags = from.flags;
        salt = from.salt;
        session = from.session;
        timestampNs = from.timestampNs;
        chunkCount = from.chunkCount;
        final int chunks = Math.max(0, Math.min(from.chunkCount, Math.min(from.maxChunks(), maxChunks())));
        System.arraycopy(from.keyHi, 0, keyHi, 0, chunks);
        System.arraycopy(from.keyLo, 0, keyLo, 0, chunks);
        modelLength = from.modelLength;
        System.arraycopy(from.model, 0, model, 0, Math.max(0, Math.min(from.modelLength, model.length)));
        worldSize = from.worldSize;
        rank = from.rank;
        layers = from.layers;
        hidden = from.hidden;
        dtypeCode = from.dtypeCode;
        mla = from.mla;
        dataChunkIndex = from.dataChunkIndex;
        dataOffset = from.dataOffset;
        dataLength = from.dataLength;
        if (RequestType.WRITE_DATA == from.type)
        {
            data.putBytes(0, from.data, 0, Math.max(0, Math.min(from.dataLength, Math.min(data.capacity(),
                from.data.capacity()))));
        }
        return this;
    }

    /**
     * Copies the outcome fields of another command (sized alike) into this one, with READ_DATA bytes.
     *
     * @param from source command.
     * @return this.
     */
    public StoreCommand copyOutcomeFrom(final StoreCommand from)
    {
        status = from.status;
        message = from.message;
        done = from.done;
        outTransferId = from.outTransferId;
        hitChunks = from.hitChunks;
        removedCount = from.removedCount;
        chunkBytes = from.chunkBytes;
        slotBytes = from.slotBytes;
        slotCapacity = from.slotCapacity;
        slotCount = from.slotCount;
        final int slots = Math.max(0, Math.min(from.slotCount, slotChunkId.length));
        System.arraycopy(from.slotChunkId, 0, slotChunkId, 0, slots);
        System.arraycopy(from.slotRangeIndex, 0, slotRangeIndex, 0, slots);
        System.arraycopy(from.slotGeneration, 0, slotGeneration, 0, slots);
        System.arraycopy(from.slotOffset, 0, slotOffset, 0, slots);
        if (RequestType.READ_DATA == from.type && Status.OK == from.status)
        {
            data.putBytes(0, from.data, 0, Math.max(0, Math.min(from.dataLength, data.capacity())));
        }
        return this;
    }

    /**
     * Finishes the command with an error; later stages pass it through.
     *
     * @param status  error status.
     * @param message readable reason, a constant.
     */
    public void fail(final int status, final String message)
    {
        this.status = status;
        this.message = message;
        this.done = true;
        this.outTransferId = 0;
        this.slotCount = 0;
    }

    /**
     * Sets the request's key range and salt from a client-side key range.
     *
     * @param keys the range.
     * @return false when the range is longer than the command holds.
     */
    public boolean copyKeys(final ChunkKeys keys)
    {
        if (keys.count() > maxChunks())
        {
            return false;
        }
        keys.copyTo(keyHi, keyLo);
        chunkCount = keys.count();
        salt = keys.salt();
        return true;
    }

    /**
     * Sets a REGISTER request's layout fields from a client-side layout.
     *
     * @param layout the layout.
     * @return false when the model name is longer than the command holds (nothing is set).
     */
    public boolean copyLayout(final Layout layout)
    {
        final byte[] modelBytes = layout.modelBytes();
        if (modelBytes.length > model.length)
        {
            return false;
        }
        System.arraycopy(modelBytes, 0, model, 0, modelBytes.length);
        modelLength = modelBytes.length;
        worldSize = layout.worldSize();
        rank = layout.rank();
        layers = layout.layers();
        hidden = layout.hidden();
        dtypeCode = layout.dtypeCode();
        mla = layout.mla();
        return true;
    }
}
