package io.kvstash.wire.file;

import org.agrona.MutableDirectBuffer;

import java.nio.charset.StandardCharsets;

/**
 * Reads and writes the labels section of a control file ({@link ControlFileDescriptor}): one
 * {@link ControlFileDescriptor#COUNTER_LABEL_LENGTH} record per counter id, in id order, each the label's length
 * and its UTF-8 bytes, as Aeron's counters metadata holds each counter's label. The server writes every counter's
 * name from {@link CountersDescriptor} at start, before the file's version; readers ({@code kvstash stat} and the
 * clients) take the names from the file, so they print what the server that wrote it counted, whatever version
 * they are. {@link ControlFileFlyweight#counterLabels()} wraps it where the header places it. Not thread safe.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |  Label Length (i32): bytes of the label, 0 for an unused id   |  64 * id
 *  |  Label (UTF-8, COUNTER_LABEL_MAX_LENGTH = 60 bytes, zero-filled after the label) ...
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class CounterLabelsFlyweight
{
    private static final int STRIDE = ControlFileDescriptor.COUNTER_LABEL_LENGTH;
    private static final int MAX_LENGTH = ControlFileDescriptor.COUNTER_LABEL_MAX_LENGTH;

    private MutableDirectBuffer buffer;

    /**
     * Wraps a labels section.
     *
     * @param buffer the section, from its first record: {@link ControlFileDescriptor#labelsLength(int)} bytes.
     * @return this.
     */
    public CounterLabelsFlyweight wrap(final MutableDirectBuffer buffer)
    {
        this.buffer = buffer;
        return this;
    }

    /**
     * Number of label records: one per counter id the file has.
     *
     * @return count.
     */
    public int count()
    {
        return buffer.capacity() / STRIDE;
    }

    /**
     * Writes a counter's label.
     *
     * @param id    counter id.
     * @param label the counter's name, at most {@link ControlFileDescriptor#COUNTER_LABEL_MAX_LENGTH} UTF-8 bytes.
     * @return this.
     * @throws IllegalArgumentException for an id past the section or a label too long.
     */
    public CounterLabelsFlyweight label(final int id, final String label)
    {
        final byte[] bytes = label.getBytes(StandardCharsets.UTF_8);
        if (id < 0 || id >= count() || bytes.length > MAX_LENGTH)
        {
            throw new IllegalArgumentException("counter " + id + " of " + count() + ": no record for it, or a label " +
                "longer than " + MAX_LENGTH + " bytes: " + label);
        }
        final int record = id * STRIDE;
        buffer.setMemory(record, STRIDE, (byte)0);
        buffer.putInt(record + ControlFileDescriptor.COUNTER_LABEL_LENGTH_OFFSET, bytes.length);
        buffer.putBytes(record + ControlFileDescriptor.COUNTER_LABEL_OFFSET, bytes);
        return this;
    }

    /**
     * A counter's label, as the server that wrote the file named it.
     *
     * @param id counter id.
     * @return the label; empty for an unused id, an id past the section, or a damaged record.
     */
    public String label(final int id)
    {
        final int length = length(id);
        return 0 == length ? "" :
            buffer.getStringWithoutLengthUtf8(id * STRIDE + ControlFileDescriptor.COUNTER_LABEL_OFFSET, length);
    }

    /**
     * Copies a counter's label without allocating.
     *
     * @param id        counter id.
     * @param dst       where the label's UTF-8 bytes go.
     * @param dstOffset offset in {@code dst}.
     * @return bytes copied: 0 for an unused id, an id past the section, or a damaged record.
     */
    public int label(final int id, final MutableDirectBuffer dst, final int dstOffset)
    {
        final int length = length(id);
        dst.putBytes(dstOffset, buffer, id * STRIDE + ControlFileDescriptor.COUNTER_LABEL_OFFSET, length);
        return length;
    }

    /**
     * Bytes of a counter's label.
     *
     * @param id counter id.
     * @return 0 to {@link ControlFileDescriptor#COUNTER_LABEL_MAX_LENGTH}: 0 for an unused id, an id past the
     * section, or a record whose length is out of range.
     */
    public int length(final int id)
    {
        if (id < 0 || id >= count())
        {
            return 0;
        }
        final int length = buffer.getInt(id * STRIDE + ControlFileDescriptor.COUNTER_LABEL_LENGTH_OFFSET);
        return length > 0 && length <= MAX_LENGTH ? length : 0;
    }
}
