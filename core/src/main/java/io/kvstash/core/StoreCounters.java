package io.kvstash.core;

import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.BufferUtil;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The store's counters: 64-bit values at fixed offsets of an {@link AtomicBuffer}, which the server maps
 * from its control file so {@code kvstash stat} reads them without the server's help. The ids, names, kinds and
 * regions are the contract's table, {@link CountersDescriptor}; this class holds the buffer and its writers. Each
 * counter has exactly one writer thread, named by its region; the writer stores with release semantics, readers
 * load with acquire.
 */
public final class StoreCounters
{
    private final AtomicBuffer buffer;

    /**
     * Counters over a buffer of at least {@link CountersDescriptor#LENGTH} bytes, 8-byte aligned.
     *
     * @param buffer the counters region (mapped by the server, a plain buffer in tests).
     */
    public StoreCounters(final AtomicBuffer buffer)
    {
        if (buffer.capacity() < CountersDescriptor.LENGTH)
        {
            throw new IllegalArgumentException("counters buffer needs " + CountersDescriptor.LENGTH + " bytes");
        }
        buffer.verifyAlignment();
        this.buffer = buffer;
    }

    /**
     * Counters on a fresh heap buffer (tests, embedded use).
     *
     * @return counters.
     */
    public static StoreCounters allocate()
    {
        return new StoreCounters(new UnsafeBuffer(BufferUtil.allocateDirectAligned(CountersDescriptor.LENGTH, 128)));
    }

    /**
     * The underlying buffer.
     *
     * @return buffer.
     */
    public AtomicBuffer buffer()
    {
        return buffer;
    }

    /**
     * Adds to a counter; only the counter's single writer thread may call this.
     *
     * @param id    counter id.
     * @param delta amount.
     */
    public void add(final int id, final long delta)
    {
        // Single writer: a plain read and a release store; no locked instruction is needed.
        final int offset = id * Long.BYTES;
        buffer.putLongRelease(offset, buffer.getLong(offset) + delta);
    }

    /**
     * Increments a counter; single writer only.
     *
     * @param id counter id.
     */
    public void increment(final int id)
    {
        add(id, 1);
    }

    /**
     * Sets a gauge; single writer only.
     *
     * @param id    counter id.
     * @param value value.
     */
    public void set(final int id, final long value)
    {
        buffer.putLongRelease(id * Long.BYTES, value);
    }

    /**
     * Adds to a counter written by several threads (atomic).
     *
     * @param id    counter id.
     * @param delta amount.
     */
    public void addAtomic(final int id, final long delta)
    {
        buffer.getAndAddLong(id * Long.BYTES, delta);
    }

    /**
     * Reads a counter with acquire semantics; any thread.
     *
     * @param id counter id.
     * @return value.
     */
    public long get(final int id)
    {
        return buffer.getLongAcquire(id * Long.BYTES);
    }

    /**
     * Copies every counter into an array.
     *
     * @param values array of at least {@link CountersDescriptor#COUNT} longs.
     */
    public void snapshot(final long[] values)
    {
        for (int i = 0; i < CountersDescriptor.COUNT; i++)
        {
            values[i] = get(i);
        }
    }
}
