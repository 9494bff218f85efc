package io.kvstash.tier;

import io.lettuce.core.output.CommandOutput;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.CRC32C;

/**
 * The output of one read-through GET: it checks the value's header and checksums where Lettuce decoded it (its
 * network buffer, on a Netty thread) and copies the payload from there straight into the pool slot the tier
 * reserved for it. No array or heap buffer per value: one copy, network buffer to slot.
 * <p>
 * <b>Who may write the slot, and when.</b> The slot is the tier's only while its store is pending: once the tier
 * commits or aborts it, the slot may hold another chunk. A GET that ran past the tier's deadline can still be
 * decoded later. So every value goes through one atomic state:
 * <pre>
 *   WAITING --(decoder)--> WRITING --> STORED | ABSENT | REJECTED
 *   WAITING --(tier, at its deadline or when it gives up)--> ABANDONED
 * </pre>
 * The decoder writes the slot only after it moved WAITING to WRITING; the tier gives the slot back only after
 * {@link #settle()}, which moves WAITING to ABANDONED or, finding WRITING, waits until the copy is over. An
 * abandoned sink is never armed again (its command may still be decoded: it then does nothing).
 * <p>
 * Threads: {@link #arm} and {@link #settle()} on the tier's thread; {@link #set(ByteBuffer)} on a Netty thread.
 */
final class L2ValueSink extends CommandOutput<byte[], ByteBuffer, L2ValueSink>
{
    /** Armed, no answer yet. */
    static final int WAITING = 0;
    /** The decoder checks the value and copies it into the slot. */
    static final int WRITING = 1;
    /** The value was good and its payload is in the slot. */
    static final int STORED = 2;
    /** The cluster holds no value under the key (any more). */
    static final int ABSENT = 3;
    /** The value failed a check ({@link #rejection()} says which); nothing was written. */
    static final int REJECTED = 4;
    /** The tier gave up on it: nothing will be written. */
    static final int ABANDONED = 5;
    /** Not armed. */
    static final int IDLE = 6;

    private final AtomicInteger state = new AtomicInteger(IDLE);
    private final CRC32C crc = new CRC32C();
    private final UnsafeBuffer slot = new UnsafeBuffer(0, 0);
    private long layoutHash;
    private long salt;
    private long hi;
    private long lo;
    private int chunkBytes;
    private int rejection;

    L2ValueSink()
    {
        super(L2Codec.INSTANCE, null);
        output = this;
    }

    /**
     * The view of the slot the payload goes to; the tier points it at the reserved slot before {@link #arm}.
     *
     * @return the view.
     */
    UnsafeBuffer slot()
    {
        return slot;
    }

    /**
     * Arms the sink for one value. Tier thread, before the GET is sent.
     *
     * @param layoutHash expected layout hash.
     * @param salt       expected salt.
     * @param hi         expected key high half.
     * @param lo         expected key low half.
     * @param chunkBytes expected payload length (the slot view's length).
     * @return this.
     */
    L2ValueSink arm(final long layoutHash, final long salt, final long hi, final long lo, final int chunkBytes)
    {
        this.layoutHash = layoutHash;
        this.salt = salt;
        this.hi = hi;
        this.lo = lo;
        this.chunkBytes = chunkBytes;
        this.rejection = L2ValueDescriptor.VALID;
        error = null;
        state.set(WAITING);
        return this;
    }

    /**
     * The value's bytes, decoded: checked, and on success copied into the slot. Netty thread.
     *
     * @param bytes the value in Lettuce's buffer (valid only during this call), or null for no value.
     */
    @Override
    public void set(final ByteBuffer bytes)
    {
        if (!state.compareAndSet(WAITING, WRITING))
        {
            return; // abandoned, or not a value this sink waits for
        }
        int outcome = REJECTED;
        try
        {
            if (null == bytes)
            {
                outcome = ABSENT;
                return;
            }
            rejection = L2ValueDescriptor.check(bytes, crc, layoutHash, salt, hi, lo, chunkBytes);
            if (L2ValueDescriptor.VALID == rejection)
            {
                slot.putBytes(0, bytes, bytes.position() + L2ValueDescriptor.HEADER_LENGTH, chunkBytes);
                outcome = STORED;
            }
        }
        finally
        {
            state.set(outcome);
        }
    }

    /**
     * Ends the sink's part in the slot: a sink still waiting is abandoned; one writing is waited for. Tier thread.
     * After this returns, the decoder never touches the slot again.
     *
     * @return the final state: {@link #STORED}, {@link #ABSENT}, {@link #REJECTED} or {@link #ABANDONED}.
     */
    int settle()
    {
        while (true)
        {
            final int s = state.get();
            if (WRITING == s)
            {
                Thread.onSpinWait();
            }
            else if (WAITING != s || state.compareAndSet(WAITING, ABANDONED))
            {
                return state.get();
            }
        }
    }

    /**
     * The state now (tests and checks).
     *
     * @return state.
     */
    int state()
    {
        return state.get();
    }

    /**
     * Why the value was rejected.
     *
     * @return an {@link L2ValueDescriptor} outcome.
     */
    int rejection()
    {
        return rejection;
    }
}
