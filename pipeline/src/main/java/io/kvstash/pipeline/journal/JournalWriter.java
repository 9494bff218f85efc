package io.kvstash.pipeline.journal;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.zip.CRC32C;

/**
 * Appends request records to a journal file. Records are encoded into a direct staging buffer and written
 * to the file with one {@code pwrite} per batch of records ({@link #flush()}, which the journal's agent
 * calls when enough is staged or when it is idle, and which {@link #append} calls when the buffer is full).
 * Writing through the page cache copies each byte once; a memory mapping of fresh file pages instead takes a
 * page fault per 4 KiB (zeroing and mapping the page), which cost more than encoding and checksumming the
 * records together (1.7 M against 9-11 M records a second here with the same 152-byte records).
 * <p>
 * The file is laid out as {@link JournalDescriptor} says: segments of
 * {@code segmentBytes}, a record never straddles a segment end, a padding record fills the rest. A process
 * crash loses the records staged and not yet written (at most a few hundred KiB, requests the pipeline has
 * answered); a machine crash may lose what the kernel had not written back; a reader stops at a torn tail
 * by the record checksum.
 * <p>
 * Owner: the thread that runs the journal's agent, then the one that closes the pipeline. Not thread safe.
 */
public final class JournalWriter implements AutoCloseable
{
    private static final int MIN_STAGING_BYTES = 1 << 20;

    private final FileChannel channel;
    private final long segmentBytes;
    private final int maxRecordLength;
    private final ByteBuffer staging;
    private final ByteBuffer crcView;
    private final UnsafeBuffer buffer;
    private final CRC32C crc = new CRC32C();
    private long stagingStart;
    private long segmentEnd;
    private int stagingPosition;
    private long records;

    /**
     * Creates (or truncates) a journal file and writes its header.
     *
     * @param file         journal path.
     * @param context      store configuration whose digest goes into the header.
     * @param incarnation  server incarnation.
     * @param segmentBytes bytes per segment.
     * @throws IOException when the file cannot be created or written.
     */
    public JournalWriter(final Path file, final StoreContext context, final long incarnation, final long segmentBytes)
        throws IOException
    {
        this.segmentBytes = segmentBytes;
        this.segmentEnd = segmentBytes;
        this.maxRecordLength = JournalDescriptor.RECORD_HEADER_LENGTH +
            RecordCodec.maxBodyLength(context.maxChunksPerRequest(), context.maxInlineBytes());
        if (maxRecordLength + JournalDescriptor.HEADER_LENGTH > segmentBytes)
        {
            throw new IllegalArgumentException("journal segment smaller than one record");
        }
        staging = ByteBuffer.allocateDirect(Math.max(MIN_STAGING_BYTES, 4 * maxRecordLength));
        crcView = staging.duplicate();
        buffer = new UnsafeBuffer(staging);
        channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
            StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        buffer.setMemory(0, JournalDescriptor.HEADER_LENGTH, (byte)0);
        buffer.putLong(JournalDescriptor.MAGIC_OFFSET, JournalDescriptor.MAGIC);
        buffer.putInt(JournalDescriptor.HEADER_LENGTH_OFFSET, JournalDescriptor.HEADER_LENGTH);
        buffer.putBytes(JournalDescriptor.CONFIG_DIGEST_OFFSET, configDigest(context));
        buffer.putLong(JournalDescriptor.INCARNATION_OFFSET, incarnation);
        buffer.putLong(JournalDescriptor.START_TIME_OFFSET, System.currentTimeMillis());
        buffer.putInt(JournalDescriptor.MAX_CHUNKS_OFFSET, context.maxChunksPerRequest());
        buffer.putInt(JournalDescriptor.MAX_INLINE_OFFSET, context.maxInlineBytes());
        buffer.putLong(JournalDescriptor.SEGMENT_LENGTH_OFFSET, segmentBytes);
        buffer.putLong(JournalDescriptor.POOL_SIZE_OFFSET, context.poolSizeBytes());
        buffer.putLong(JournalDescriptor.LEASE_NS_OFFSET, context.leaseNs());
        buffer.putLong(JournalDescriptor.SLOT_BYTES_OFFSET, context.slotBytes());
        buffer.putLong(JournalDescriptor.DATA_OFFSET_OFFSET, context.dataOffset());
        buffer.putInt(JournalDescriptor.ALIGNMENT_OFFSET, context.alignment());
        buffer.putInt(JournalDescriptor.CHUNK_TOKENS_OFFSET, context.chunkTokens());
        buffer.putInt(JournalDescriptor.MAX_TRANSFERS_OFFSET, context.maxTransfers());
        buffer.putInt(JournalDescriptor.MAX_INSTANCES_OFFSET, context.maxInstances());
        buffer.putInt(JournalDescriptor.SWEEP_LIMIT_OFFSET, context.sweepLimit());
        buffer.putInt(JournalDescriptor.EVICTION_OFFSET, context.eviction().code());
        buffer.putInt(JournalDescriptor.VERSION_OFFSET, JournalDescriptor.VERSION);
        stagingPosition = JournalDescriptor.HEADER_LENGTH;
        flush();
    }

    /**
     * SHA-256 of the store configuration's canonical text: replays refuse a journal of another configuration.
     *
     * @param context store configuration.
     * @return 32 bytes.
     */
    public static byte[] configDigest(final StoreContext context)
    {
        try
        {
            return MessageDigest.getInstance("SHA-256").digest(context.toString().getBytes(StandardCharsets.UTF_8));
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * Appends one request and its outcome to the staging buffer; {@link #flush()} writes it.
     *
     * @param command      the finished command.
     * @param clientIndex  the client it came from.
     * @param decodeStatus status the decoder failed it with before any stage, or OK.
     * @throws IOException when a full buffer cannot be written.
     */
    public void append(final StoreCommand command, final int clientIndex, final int decodeStatus)
        throws IOException
    {
        final int start = reserve(maxRecordLength);
        int end = RecordCodec.encodeRequest(
            command, clientIndex, decodeStatus, buffer, start + JournalDescriptor.RECORD_HEADER_LENGTH);
        end = RecordCodec.encodeOutcome(command, buffer, end);
        final int length = JournalDescriptor.align(end - start);
        buffer.setMemory(end, start + length - end, (byte)0);
        seal(start, JournalDescriptor.KIND_REQUEST, length);
        records++;
    }

    /**
     * Appends the deterministic counters (see {@link #isDeterministicCounter(int)}) and writes them out;
     * written once at a clean shutdown so a replay can check it ends with the same counters.
     *
     * @param counters the server's counters.
     * @throws IOException when the records cannot be written.
     */
    public void appendCounters(final StoreCounters counters) throws IOException
    {
        final int start = reserve(JournalDescriptor.RECORD_HEADER_LENGTH + 8 + CountersDescriptor.COUNT * 16);
        final int base = start + JournalDescriptor.RECORD_HEADER_LENGTH;
        int n = 0;
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            if (isDeterministicCounter(id))
            {
                buffer.putLong(base + 8 + n * 16, id);
                buffer.putLong(base + 16 + n * 16, counters.get(id));
                n++;
            }
        }
        buffer.putLong(base, n);
        seal(start, JournalDescriptor.KIND_COUNTERS,
            JournalDescriptor.align(JournalDescriptor.RECORD_HEADER_LENGTH + 8 + n * 16));
        flush();
    }

    /**
     * Whether a counter depends only on the requests and their order (so a replay must reproduce it): the
     * BOOK, DATA and REQUESTS regions; not the WIRE region or ERRORS.
     *
     * @param id counter id.
     * @return true when deterministic.
     */
    public static boolean isDeterministicCounter(final int id)
    {
        return null != CountersDescriptor.name(id) && (id < CountersDescriptor.WIRE_RECORDS ||
            (id >= CountersDescriptor.REQUESTS_BASE && id < CountersDescriptor.ERRORS) || id == CountersDescriptor.REQUESTS_INVALID_TYPE);
    }

    /**
     * Writes the staged records to the file (nothing when none are staged).
     *
     * @throws IOException when the write fails.
     */
    public void flush() throws IOException
    {
        if (0 == stagingPosition)
        {
            return;
        }
        staging.limit(stagingPosition).position(0);
        long at = stagingStart;
        while (staging.hasRemaining())
        {
            at += channel.write(staging, at);
        }
        staging.clear();
        stagingStart += stagingPosition;
        stagingPosition = 0;
    }

    /**
     * Bytes appended and not yet written to the file.
     *
     * @return staged bytes.
     */
    public int stagedBytes()
    {
        return stagingPosition;
    }

    /**
     * Records appended so far.
     *
     * @return count.
     */
    public long records()
    {
        return records;
    }

    /**
     * Bytes of the journal so far, header and staged records included.
     *
     * @return length.
     */
    public long length()
    {
        return stagingStart + stagingPosition;
    }

    /**
     * Writes what is staged, makes the file exactly {@link #length()} bytes long and closes it.
     */
    @Override
    public void close()
    {
        try
        {
            flush();
            final long length = length();
            if (channel.size() > length)
            {
                channel.truncate(length);
            }
            else if (channel.size() < length)
            {
                // a padding record ends the file: its body is never read, but the file must cover it
                channel.write(ByteBuffer.allocate(1), length - 1);
            }
            channel.close();
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("journal close failed", ex);
        }
    }

    /**
     * Where a record of up to {@code bytes} starts in the staging buffer: pads to the next segment when it
     * would straddle the current one's end, and writes the buffer out first when it would not fit.
     */
    private int reserve(final int bytes) throws IOException
    {
        if (length() + bytes > segmentEnd)
        {
            final int remaining = (int)(segmentEnd - length());
            if (remaining >= JournalDescriptor.RECORD_HEADER_LENGTH)
            {
                if (stagingPosition + JournalDescriptor.RECORD_HEADER_LENGTH > staging.capacity())
                {
                    flush();
                }
                final int at = stagingPosition;
                buffer.putInt(at + JournalDescriptor.RECORD_CRC_OFFSET, 0);
                buffer.putInt(at + JournalDescriptor.RECORD_KIND_OFFSET, JournalDescriptor.KIND_PADDING);
                buffer.putInt(at + JournalDescriptor.RECORD_KIND_OFFSET + 4, 0);
                buffer.putInt(at + JournalDescriptor.RECORD_LENGTH_OFFSET, remaining);
                stagingPosition += JournalDescriptor.RECORD_HEADER_LENGTH;
            }
            // the padding's body is a hole in the file: only its header is written
            flush();
            stagingStart = segmentEnd;
            segmentEnd += segmentBytes;
        }
        if (stagingPosition + bytes > staging.capacity())
        {
            flush();
        }
        return stagingPosition;
    }

    private void seal(final int start, final int kind, final int length)
    {
        buffer.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET, kind);
        buffer.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET + 4, 0);
        crcView.limit(start + length).position(start + JournalDescriptor.RECORD_KIND_OFFSET);
        crc.reset();
        crc.update(crcView);
        buffer.putInt(start + JournalDescriptor.RECORD_CRC_OFFSET, (int)crc.getValue());
        buffer.putInt(start + JournalDescriptor.RECORD_LENGTH_OFFSET, length);
        stagingPosition = start + length;
    }
}
