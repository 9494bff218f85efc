package io.kvstash.client;

import io.kvstash.wire.Status;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;

/**
 * The chunk bytes of a client's transfers ({@link KvStashClient#chunks()}): each call takes the PREPARE_STORE or
 * PREPARE_RETRIEVE answer and a slot entry of it, so no caller computes where a chunk lies. With the shared-memory
 * transport the bytes move in place in the mapped pool ({@link PoolSlots}) and the slot words fence them; with the
 * copy transport they move in WRITE_DATA / READ_DATA messages ({@link BlockingCalls}) and the server checks.
 * <p>
 * Not thread safe: owned by one client, used on the client's thread.
 */
public final class Chunks
{
    private final PoolSlots slots;
    private final BlockingCalls calls;

    Chunks(final PoolSlots slots, final BlockingCalls calls)
    {
        this.slots = slots;
        this.calls = calls;
    }

    /**
     * Points a view at slot {@code i} of a PREPARE_STORE or PREPARE_RETRIEVE response: the chunk's bytes in
     * the mapped pool, {@link ClientResponse#chunkBytes()} long. Writes through it are the store; reads are
     * the retrieve. Check {@link #isStillReserved} / {@link #isStillReadable} around them for fencing.
     *
     * @param r    the response.
     * @param i    slot entry.
     * @param view buffer to re-wrap.
     * @return the view.
     */
    public UnsafeBuffer slotView(final ClientResponse r, final int i, final UnsafeBuffer view)
    {
        return slots.slotView(r, i, view);
    }

    /**
     * Points a view at a slot by its offset (as a PREPARE response gave it, relative to the pool's data region).
     *
     * @param slotOffset the slot's offset in the pool's data region.
     * @param length     bytes of the view (the chunk's length).
     * @param view       buffer to re-wrap.
     * @return the view.
     */
    public UnsafeBuffer slotView(final long slotOffset, final int length, final UnsafeBuffer view)
    {
        return slots.slotView(slotOffset, length, view);
    }

    /**
     * A {@link ByteBuffer} over a slot by its pool offset, for APIs that take one (a checksum, a network write)
     * rather than an {@link UnsafeBuffer}. A new view object per call; the bytes are the pool's, not copied.
     *
     * @param slotOffset the slot's offset in the pool's data region (as a PREPARE response gave it).
     * @param length     bytes of the view (the chunk's length).
     * @return the view, position 0, limit {@code length}.
     */
    public ByteBuffer slotBuffer(final long slotOffset, final int length)
    {
        return slots.slotBuffer(slotOffset, length);
    }

    /**
     * Whether slot {@code i} of a PREPARE_STORE is still reserved under its generation (the lease holds):
     * check before writing.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still reserved for this transfer.
     */
    public boolean isStillReserved(final ClientResponse r, final int i)
    {
        return slots.isStillReserved(r, i);
    }

    /**
     * Whether slot {@code i} of a PREPARE_RETRIEVE is still readable under its generation: check after
     * reading; false means the pin was reclaimed while reading and the bytes may be torn.
     *
     * @param r the response.
     * @param i slot entry.
     * @return true when still readable under the same generation.
     */
    public boolean isStillReadable(final ClientResponse r, final int i)
    {
        return slots.isStillReadable(r, i);
    }

    /**
     * Writes a whole chunk for slot {@code i} of a PREPARE_STORE answer ({@link ClientResponse#chunkBytes()} bytes):
     * straight into the mapped pool, or in WRITE_DATA messages with the copy transport (whose answers never
     * overwrite the prepare's response). The slot's place comes from the response; check
     * {@link #isStillReserved} first for fencing.
     *
     * @param instanceId   instance the store was prepared for.
     * @param prepared     the PREPARE_STORE answer.
     * @param i            slot entry in it.
     * @param source       the chunk's bytes.
     * @param sourceOffset offset in the source.
     * @return OK, or the status of the failed WRITE_DATA (UNKNOWN_TRANSFER when the lease ended).
     */
    public int writeChunk(
        final long instanceId,
        final ClientResponse prepared,
        final int i,
        final DirectBuffer source,
        final int sourceOffset)
    {
        return writeChunk(instanceId, prepared, i, 0, (int)prepared.chunkBytes(), source, sourceOffset);
    }

    /**
     * Writes bytes {@code [from, from + length)} of a chunk for slot {@code i} of a PREPARE_STORE answer (a chunk
     * written in parts, a layer at a time for example): straight into the mapped pool, or in WRITE_DATA messages
     * with the copy transport. The chunk becomes readable only at COMMIT_STORE, whatever parts were written.
     *
     * @param instanceId   instance the store was prepared for.
     * @param prepared     the PREPARE_STORE answer.
     * @param i            slot entry in it.
     * @param from         first byte of the chunk to write.
     * @param length       bytes to write.
     * @param source       the bytes.
     * @param sourceOffset offset in the source of the chunk's byte {@code from}.
     * @return OK, or the status of the failed WRITE_DATA (UNKNOWN_TRANSFER when the lease ended).
     */
    public int writeChunk(
        final long instanceId,
        final ClientResponse prepared,
        final int i,
        final int from,
        final int length,
        final DirectBuffer source,
        final int sourceOffset)
    {
        if (slots.isMapped())
        {
            slots.write(prepared.slotOffset(i), from, length, source, sourceOffset);
            return Status.OK;
        }
        return calls.writeData(instanceId, prepared.transferId(), i, from, length, source, sourceOffset);
    }

    /**
     * Reads a whole chunk for slot {@code i} of a PREPARE_RETRIEVE answer ({@link ClientResponse#chunkBytes()}
     * bytes): straight from the mapped pool, or in READ_DATA messages with the copy transport (whose answers never
     * overwrite the prepare's response). Check {@link #isStillReadable} afterwards for fencing; once every chunk is
     * read and checked, {@link KvStashClient#commitRetrieve(long, long, boolean)} without a reply ends the retrieve
     * without waiting for another answer.
     *
     * @param instanceId        instance the retrieve was prepared for.
     * @param prepared          the PREPARE_RETRIEVE answer.
     * @param i                 slot entry in it.
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination.
     * @return OK, or the status of the failed READ_DATA.
     */
    public int readChunk(
        final long instanceId,
        final ClientResponse prepared,
        final int i,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        return readChunk(instanceId, prepared, i, 0, (int)prepared.chunkBytes(), destination, destinationOffset);
    }

    /**
     * Reads bytes {@code [from, from + length)} of a chunk for slot {@code i} of a PREPARE_RETRIEVE answer:
     * straight from the mapped pool, or in READ_DATA messages with the copy transport.
     *
     * @param instanceId        instance the retrieve was prepared for.
     * @param prepared          the PREPARE_RETRIEVE answer.
     * @param i                 slot entry in it.
     * @param from              first byte of the chunk to read.
     * @param length            bytes to read.
     * @param destination       where the bytes go.
     * @param destinationOffset offset in the destination of the chunk's byte {@code from}.
     * @return OK, or the status of the failed READ_DATA.
     */
    public int readChunk(
        final long instanceId,
        final ClientResponse prepared,
        final int i,
        final int from,
        final int length,
        final MutableDirectBuffer destination,
        final int destinationOffset)
    {
        if (slots.isMapped())
        {
            slots.read(prepared.slotOffset(i), from, length, destination, destinationOffset);
            return Status.OK;
        }
        return calls.readData(instanceId, prepared.transferId(), i, from, length, destination, destinationOffset);
    }

    /**
     * Whether chunk bytes move in place: false with the copy transport (no pool mapping), and after the client
     * closed.
     *
     * @return true when the pool is mapped.
     */
    public boolean isMapped()
    {
        return slots.isMapped();
    }
}
