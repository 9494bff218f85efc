package io.kvstash.wire.file;

/**
 * Byte layout of the slot table: one 64-bit word per alignment unit of the data region (a slot's word is the
 * one of the unit it starts at, so it does not depend on the slot size), which the server writes with release
 * semantics every time the slot's chunk changes state, and clients read with acquire semantics to fence
 * themselves: a writer checks its slot is still RESERVED under the generation its PREPARE_STORE returned
 * before writing; a reader checks READABLE under its generation after copying, which catches the slot
 * being evicted or reused while it read (possible only after its pin was reclaimed at lease expiry;
 * releasing a pin alone does not change the word). A writer's check cannot stop its lease ending during
 * the write itself: the lease (30 s by default) is that window's guard, so never start a write near it.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *  |     State     |               Reserved (zero)                 |  bits 0..31 (little-endian word)
 *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
 *  |                    Generation (unsigned 32)                   |  bits 32..63
 *  +---------------------------------------------------------------+
 * </pre>
 * The word of the slot at relative offset {@code o} (from the start of the data region) is word
 * {@code o / alignment}, at byte {@code (o / alignment) * WORD_LENGTH} of the table ({@link #wordOffsetAt}).
 */
public final class SlotTableDescriptor
{
    /** Bytes per slot word. */
    public static final int WORD_LENGTH = 8;
    /** State of a slot holding no chunk. */
    public static final int STATE_FREE = 0;
    /** State of a slot reserved by a pending store. */
    public static final int STATE_RESERVED = 1;
    /** State of a slot holding a readable chunk. */
    public static final int STATE_READABLE = 2;

    private SlotTableDescriptor()
    {
    }

    /**
     * Builds a slot word.
     *
     * @param state      slot state.
     * @param generation slot generation.
     * @return the word.
     */
    public static long word(final int state, final int generation)
    {
        return ((long)generation << 32) | (state & 0xFF);
    }

    /**
     * State of a slot word.
     *
     * @param word slot word.
     * @return state.
     */
    public static int state(final long word)
    {
        return (int)(word & 0xFF);
    }

    /**
     * Generation of a slot word.
     *
     * @param word slot word.
     * @return generation.
     */
    public static int generation(final long word)
    {
        return (int)(word >>> 32);
    }

    /**
     * Offset of the word of the slot at an offset of the data region: independent of the slot size, so pools
     * holding several slot sizes need no other lookup.
     *
     * @param relativeOffset slot offset relative to the data region (a response's offset less the data offset).
     * @param alignment      the pool's slot alignment (config and pool header), a power of two.
     * @return byte offset in the table.
     */
    public static long wordOffsetAt(final long relativeOffset, final int alignment)
    {
        return (relativeOffset / alignment) * WORD_LENGTH;
    }

    /**
     * Offset of a word in the table.
     *
     * @param wordIndex word index: a slot's relative offset over the alignment.
     * @return byte offset.
     */
    public static long wordOffset(final int wordIndex)
    {
        return (long)wordIndex * WORD_LENGTH;
    }

    /**
     * Bytes of a slot table covering a pool at the finest slot size (one slot per alignment unit).
     *
     * @param poolSizeBytes pool size.
     * @param alignment     slot alignment.
     * @return table length in bytes.
     */
    public static long tableLength(final long poolSizeBytes, final int alignment)
    {
        return (poolSizeBytes / alignment) * WORD_LENGTH;
    }
}
