package io.kvstash.pipeline.journal;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.zip.CRC32C;

/**
 * Appends request records to a journal file through a memory mapping, one segment at a time: an append is
 * a few stores into mapped memory and never a system call, so it never blocks the pipeline; the kernel
 * writes the pages back (a process crash loses nothing, a machine crash may lose the tail, which the
 * reader tolerates). Each record's length word is written last with release semantics, so a concurrent
 * reader never sees half a record. See {@link JournalDescriptor} for the layout.
 * <p>
 * Owner: the journal stage's thread. Not thread safe.
 */
public final class JournalWriter implements AutoCloseable
{
    private final FileChannel channel;
    private final long segmentBytes;
    private final int maxRecordLength;
    private final UnsafeBuffer segment = new UnsafeBuffer(0, 0);
    private final CRC32C crc = new CRC32C();
    private MappedByteBuffer mapped;
    private ByteBuffer crcView;
    private long segmentStart;
    private int position;
    private long records;

    /**
     * Creates (or truncates) a journal file and writes its header.
     *
     * @param file         journal path.
     * @param context      store configuration whose digest goes into the header.
     * @param incarnation  server incarnation.
     * @param segmentBytes bytes mapped at a time.
     * @throws IOException when the file cannot be created or mapped.
     */
    public JournalWriter(final Path file, final StoreContext context, final long incarnation, final long segmentBytes)
        throws IOException
    {
        this.segmentBytes = segmentBytes;
        this.maxRecordLength = JournalDescriptor.RECORD_HEADER_LENGTH +
            RecordCodec.maxBodyLength(context.maxChunksPerRequest(), context.maxInlineBytes());
        if (maxRecordLength + JournalDescriptor.HEADER_LENGTH > segmentBytes)
        {
            throw new IllegalArgumentException("journal segment smaller than one record");
        }
        channel = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ,
            StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        mapSegment(0);
        segment.putLong(JournalDescriptor.MAGIC_OFFSET, JournalDescriptor.MAGIC);
        segment.putInt(JournalDescriptor.HEADER_LENGTH_OFFSET, JournalDescriptor.HEADER_LENGTH);
        segment.putBytes(JournalDescriptor.CONFIG_DIGEST_OFFSET, configDigest(context));
        segment.putLong(JournalDescriptor.INCARNATION_OFFSET, incarnation);
        segment.putLong(JournalDescriptor.START_TIME_OFFSET, System.currentTimeMillis());
        segment.putInt(JournalDescriptor.MAX_CHUNKS_OFFSET, context.maxChunksPerRequest());
        segment.putInt(JournalDescriptor.MAX_INLINE_OFFSET, context.maxInlineBytes());
        segment.putLong(JournalDescriptor.SEGMENT_LENGTH_OFFSET, segmentBytes);
        segment.putLong(JournalDescriptor.POOL_SIZE_OFFSET, context.poolSizeBytes());
        segment.putLong(JournalDescriptor.LEASE_NS_OFFSET, context.leaseNs());
        segment.putLong(JournalDescriptor.SLOT_BYTES_OFFSET, context.slotBytes());
        segment.putLong(JournalDescriptor.DATA_OFFSET_OFFSET, context.dataOffset());
        segment.putInt(JournalDescriptor.ALIGNMENT_OFFSET, context.alignment());
        segment.putInt(JournalDescriptor.CHUNK_TOKENS_OFFSET, context.chunkTokens());
        segment.putInt(JournalDescriptor.MAX_TRANSFERS_OFFSET, context.maxTransfers());
        segment.putInt(JournalDescriptor.MAX_INSTANCES_OFFSET, context.maxInstances());
        segment.putInt(JournalDescriptor.SWEEP_LIMIT_OFFSET, context.sweepLimit());
        segment.putIntRelease(JournalDescriptor.VERSION_OFFSET, JournalDescriptor.VERSION);
        position = JournalDescriptor.HEADER_LENGTH;
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
     * Appends one request and its outcome.
     *
     * @param command      the finished command.
     * @param clientIndex  the client it came from.
     * @param decodeStatus status the decoder failed it with before any stage, or OK.
     * @throws IOException when the next segment cannot be mapped.
     */
    public void append(final StoreCommand command, final int clientIndex, final int decodeStatus)
        throws IOException
    {
        if (position + maxRecordLength > segmentBytes)
        {
            final int remaining = (int)(segmentBytes - position);
            if (remaining >= JournalDescriptor.RECORD_HEADER_LENGTH)
            {
                segment.putInt(position + JournalDescriptor.RECORD_KIND_OFFSET, JournalDescriptor.KIND_PADDING);
                segment.putIntRelease(position + JournalDescriptor.RECORD_LENGTH_OFFSET, remaining);
            }
            mapSegment(segmentStart + segmentBytes);
            position = 0;
        }
        final int start = position;
        int end = RecordCodec.encodeRequest(
            command, clientIndex, decodeStatus, segment, start + JournalDescriptor.RECORD_HEADER_LENGTH);
        end = RecordCodec.encodeOutcome(command, segment, end);
        final int length = JournalDescriptor.align(end - start);
        segment.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET, JournalDescriptor.KIND_REQUEST);
        segment.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET + 4, 0);
        crcView.limit(start + length).position(start + JournalDescriptor.RECORD_KIND_OFFSET);
        crc.reset();
        crc.update(crcView);
        segment.putInt(start + JournalDescriptor.RECORD_CRC_OFFSET, (int)crc.getValue());
        segment.putIntRelease(start + JournalDescriptor.RECORD_LENGTH_OFFSET, length);
        position = start + length;
        records++;
    }

    /**
     * Appends the deterministic counters (see {@link #isDeterministicCounter(int)}); written once at a clean
     * shutdown so a replay can check it ends with the same counters.
     *
     * @param counters the server's counters.
     * @throws IOException when the next segment cannot be mapped.
     */
    public void appendCounters(final StoreCounters counters) throws IOException
    {
        final int length = JournalDescriptor.RECORD_HEADER_LENGTH + 8 + StoreCounters.COUNT * 16;
        if (position + length > segmentBytes)
        {
            final int remaining = (int)(segmentBytes - position);
            segment.putInt(position + JournalDescriptor.RECORD_KIND_OFFSET, JournalDescriptor.KIND_PADDING);
            segment.putIntRelease(position + JournalDescriptor.RECORD_LENGTH_OFFSET, remaining);
            mapSegment(segmentStart + segmentBytes);
            position = 0;
        }
        final int start = position;
        int i = start + JournalDescriptor.RECORD_HEADER_LENGTH;
        int n = 0;
        for (int id = 0; id < StoreCounters.COUNT; id++)
        {
            if (isDeterministicCounter(id))
            {
                segment.putLong(i + 8 + n * 16, id);
                segment.putLong(i + 16 + n * 16, counters.get(id));
                n++;
            }
        }
        segment.putLong(i, n);
        final int used = JournalDescriptor.align(JournalDescriptor.RECORD_HEADER_LENGTH + 8 + n * 16);
        segment.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET, JournalDescriptor.KIND_COUNTERS);
        segment.putInt(start + JournalDescriptor.RECORD_KIND_OFFSET + 4, 0);
        crcView.limit(start + used).position(start + JournalDescriptor.RECORD_KIND_OFFSET);
        crc.reset();
        crc.update(crcView);
        segment.putInt(start + JournalDescriptor.RECORD_CRC_OFFSET, (int)crc.getValue());
        segment.putIntRelease(start + JournalDescriptor.RECORD_LENGTH_OFFSET, used);
        position = start + used;
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
        return null != StoreCounters.name(id) && (id < StoreCounters.WIRE_RECORDS ||
            (id >= StoreCounters.REQUESTS_BASE && id < StoreCounters.ERRORS) || id == StoreCounters.REQUESTS_INVALID_TYPE);
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
     * Bytes of the journal so far, header included.
     *
     * @return length.
     */
    public long length()
    {
        return segmentStart + position;
    }

    /**
     * Unmaps and truncates the file to its records.
     */
    @Override
    public void close()
    {
        final long length = length();
        if (null != next)
        {
            // The pre-fault thread must be done with its mapping before the file shrinks under it.
            try
            {
                IoUtil.unmap(next.join());
            }
            catch (final RuntimeException ignore)
            {
                // its mapping failed: nothing to unmap
            }
            next = null;
        }
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
            mapped = null;
        }
        try
        {
            channel.truncate(length);
            channel.close();
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("journal close failed", ex);
        }
    }

    /**
     * The next segment, mapped and pre-faulted on another thread: a first write into a fresh page of a
     * tmpfs file costs microseconds, and a segment holds thousands of pages the pipeline would otherwise
     * fault in one by one.
     */
    private java.util.concurrent.CompletableFuture<MappedByteBuffer> next;

    private java.util.concurrent.CompletableFuture<MappedByteBuffer> prepare(final long start)
    {
        return java.util.concurrent.CompletableFuture.supplyAsync(() ->
        {
            try
            {
                final MappedByteBuffer m = channel.map(FileChannel.MapMode.READ_WRITE, start, segmentBytes);
                for (int page = 0; page < segmentBytes; page += 4096)
                {
                    m.put(page, (byte)0);
                }
                return m;
            }
            catch (final IOException ex)
            {
                throw new java.io.UncheckedIOException(ex);
            }
        });
    }

    private void mapSegment(final long start) throws IOException
    {
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
        }
        if (null != next)
        {
            mapped = next.join();
        }
        else
        {
            mapped = channel.map(FileChannel.MapMode.READ_WRITE, start, segmentBytes);
        }
        next = prepare(start + segmentBytes);
        crcView = mapped.duplicate();
        segment.wrap(mapped);
        segmentStart = start;
    }
}
