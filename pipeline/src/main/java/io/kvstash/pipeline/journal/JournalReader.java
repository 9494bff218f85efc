package io.kvstash.pipeline.journal;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.zip.CRC32C;

/**
 * Streams the records of a journal file, segment by segment. Stops cleanly at the end of the records and
 * tolerates a truncated or torn tail: a record cut short, with a zero length or a bad checksum ends the
 * stream and {@link #truncatedTail()} says so. Not thread safe.
 */
public final class JournalReader implements AutoCloseable
{
    private final FileChannel channel;
    private final long fileLength;
    private final long segmentBytes;
    private final int version;
    private final byte[] configDigest = new byte[JournalDescriptor.CONFIG_DIGEST_LENGTH];
    private final long incarnation;
    private final int maxChunksPerRequest;
    private final int maxInlineBytes;
    private final StoreContext capturedContext;
    private final UnsafeBuffer segment = new UnsafeBuffer(0, 0);
    private final CRC32C crc = new CRC32C();
    private final RecordCodec.Cursor cursor = new RecordCodec.Cursor();
    private MappedByteBuffer mapped;
    private ByteBuffer crcView;
    private long segmentStart;
    private int segmentLength;
    private int position;
    private int outcomeOffset;
    private int outcomeEnd;
    private boolean truncatedTail;
    private boolean ended;
    private int[] counterIds;
    private long[] counterValues;

    /**
     * Opens a journal and checks its header.
     *
     * @param file journal path.
     * @throws IOException when the file cannot be read.
     * @throws IllegalArgumentException when the header is not a journal of this major version.
     */
    public JournalReader(final Path file) throws IOException
    {
        channel = FileChannel.open(file, StandardOpenOption.READ);
        fileLength = channel.size();
        if (fileLength < JournalDescriptor.HEADER_LENGTH)
        {
            channel.close();
            throw new IllegalArgumentException("not a journal (too short): " + file);
        }
        final ByteBuffer header = ByteBuffer.allocate(JournalDescriptor.HEADER_LENGTH);
        channel.read(header, 0);
        final UnsafeBuffer h = new UnsafeBuffer(header.array());
        if (h.getLong(JournalDescriptor.MAGIC_OFFSET) != JournalDescriptor.MAGIC)
        {
            channel.close();
            throw new IllegalArgumentException("not a journal (bad magic): " + file);
        }
        version = h.getInt(JournalDescriptor.VERSION_OFFSET);
        if (JournalDescriptor.major(version) != JournalDescriptor.VERSION_MAJOR)
        {
            channel.close();
            throw new IllegalArgumentException("journal major version " + JournalDescriptor.major(version) +
                " is not " + JournalDescriptor.VERSION_MAJOR + ": " + file);
        }
        h.getBytes(JournalDescriptor.CONFIG_DIGEST_OFFSET, configDigest);
        incarnation = h.getLong(JournalDescriptor.INCARNATION_OFFSET);
        maxChunksPerRequest = h.getInt(JournalDescriptor.MAX_CHUNKS_OFFSET);
        maxInlineBytes = h.getInt(JournalDescriptor.MAX_INLINE_OFFSET);
        segmentBytes = h.getLong(JournalDescriptor.SEGMENT_LENGTH_OFFSET);
        capturedContext = new StoreContext()
            .poolSizeBytes(h.getLong(JournalDescriptor.POOL_SIZE_OFFSET))
            .leaseNs(h.getLong(JournalDescriptor.LEASE_NS_OFFSET))
            .slotBytes(h.getLong(JournalDescriptor.SLOT_BYTES_OFFSET))
            .dataOffset(h.getLong(JournalDescriptor.DATA_OFFSET_OFFSET))
            .alignment(h.getInt(JournalDescriptor.ALIGNMENT_OFFSET))
            .chunkTokens(h.getInt(JournalDescriptor.CHUNK_TOKENS_OFFSET))
            .maxTransfers(h.getInt(JournalDescriptor.MAX_TRANSFERS_OFFSET))
            .maxInstances(h.getInt(JournalDescriptor.MAX_INSTANCES_OFFSET))
            .sweepLimit(h.getInt(JournalDescriptor.SWEEP_LIMIT_OFFSET))
            .eviction(EvictionPolicy.ofCode(h.getInt(JournalDescriptor.EVICTION_OFFSET)))
            .maxChunksPerRequest(maxChunksPerRequest)
            .maxInlineBytes(maxInlineBytes);
        if (segmentBytes <= JournalDescriptor.HEADER_LENGTH || segmentBytes > Integer.MAX_VALUE)
        {
            channel.close();
            throw new IllegalArgumentException("journal segment length out of range: " + segmentBytes);
        }
        mapSegment(0);
        position = JournalDescriptor.HEADER_LENGTH;
    }

    /**
     * Decodes the next record's request into a command (which is reset first).
     *
     * @param command command to fill; must hold the journal's max chunks and inline bytes.
     * @return true when a record was read, false at the end of the records.
     * @throws IOException when a segment cannot be mapped.
     */
    public boolean next(final StoreCommand command) throws IOException
    {
        while (!ended)
        {
            if (position + JournalDescriptor.RECORD_HEADER_LENGTH > segmentLength)
            {
                if (segmentStart + segmentLength >= fileLength || segmentLength < segmentBytes)
                {
                    return end(segmentStart + position < fileLength);
                }
                mapSegment(segmentStart + segmentBytes);
                position = 0;
                continue;
            }
            final int length = segment.getIntAcquire(position + JournalDescriptor.RECORD_LENGTH_OFFSET);
            if (0 == length)
            {
                return end(false);
            }
            if (length < JournalDescriptor.RECORD_HEADER_LENGTH || position + (long)length > segmentLength)
            {
                return end(true);
            }
            final int kind = segment.getInt(position + JournalDescriptor.RECORD_KIND_OFFSET);
            if (JournalDescriptor.KIND_PADDING == kind)
            {
                if (segmentStart + segmentLength >= fileLength)
                {
                    return end(false);
                }
                mapSegment(segmentStart + segmentBytes);
                position = 0;
                continue;
            }
            crcView.limit(position + length).position(position + JournalDescriptor.RECORD_KIND_OFFSET);
            crc.reset();
            crc.update(crcView);
            if ((int)crc.getValue() != segment.getInt(position + JournalDescriptor.RECORD_CRC_OFFSET))
            {
                return end(true);
            }
            if (JournalDescriptor.KIND_COUNTERS == kind)
            {
                final int base = position + JournalDescriptor.RECORD_HEADER_LENGTH;
                final long n = segment.getLong(base);
                if (n < 0 || base + 8 + n * 16 > position + length)
                {
                    return end(true);
                }
                counterIds = new int[(int)n];
                counterValues = new long[(int)n];
                for (int k = 0; k < n; k++)
                {
                    counterIds[k] = (int)segment.getLong(base + 8 + k * 16);
                    counterValues[k] = segment.getLong(base + 16 + k * 16);
                }
                position += length;
                continue;
            }
            if (JournalDescriptor.KIND_REQUEST != kind)
            {
                return end(true);
            }
            command.reset();
            final int limit = position + length;
            final int afterRequest = RecordCodec.decodeRequest(
                segment, position + JournalDescriptor.RECORD_HEADER_LENGTH, limit, command, cursor);
            if (afterRequest < 0)
            {
                return end(true);
            }
            outcomeOffset = afterRequest;
            outcomeEnd = limit;
            position = limit;
            return true;
        }
        return false;
    }

    /**
     * Whether the recorded outcome of the last record read equals some encoded outcome, byte for byte.
     *
     * @param encoded buffer holding an outcome encoded by {@link RecordCodec#encodeOutcome}.
     * @param offset  start of the outcome.
     * @param length  its length, padding included.
     * @return true when equal (the recorded outcome may carry trailing record padding of zeros).
     */
    public boolean outcomeEquals(final UnsafeBuffer encoded, final int offset, final int length)
    {
        if (outcomeOffset + length > outcomeEnd)
        {
            return false;
        }
        for (int i = 0; i < length; i++)
        {
            if (segment.getByte(outcomeOffset + i) != encoded.getByte(offset + i))
            {
                return false;
            }
        }
        for (int i = outcomeOffset + length; i < outcomeEnd; i++)
        {
            if (0 != segment.getByte(i))
            {
                return false;
            }
        }
        return true;
    }

    /**
     * Counter ids of the shutdown snapshot, once the stream has passed it.
     *
     * @return ids, or null when the journal has no snapshot (yet).
     */
    public int[] counterIds()
    {
        return null == counterIds ? null : counterIds.clone();
    }

    /**
     * Counter values of the shutdown snapshot, in the order of {@link #counterIds()}.
     *
     * @return values, or null when the journal has no snapshot (yet).
     */
    public long[] counterValues()
    {
        return null == counterValues ? null : counterValues.clone();
    }

    /**
     * Whether the stream ended at a cut or corrupt record rather than at a clean end.
     *
     * @return true when the tail was truncated.
     */
    public boolean truncatedTail()
    {
        return truncatedTail;
    }

    /**
     * Packed header version.
     *
     * @return version.
     */
    public int version()
    {
        return version;
    }

    /**
     * Configuration digest from the header.
     *
     * @return a copy of the 32 bytes.
     */
    public byte[] configDigest()
    {
        return configDigest.clone();
    }

    /**
     * Incarnation from the header.
     *
     * @return incarnation.
     */
    public long incarnation()
    {
        return incarnation;
    }

    /**
     * The capturing store's configuration, from the header (not concluded: conclude before use).
     *
     * @return a fresh context each call.
     */
    public StoreContext capturedContext()
    {
        return new StoreContext()
            .poolSizeBytes(capturedContext.poolSizeBytes())
            .leaseNs(capturedContext.leaseNs())
            .slotBytes(capturedContext.slotBytes())
            .dataOffset(capturedContext.dataOffset())
            .alignment(capturedContext.alignment())
            .chunkTokens(capturedContext.chunkTokens())
            .maxTransfers(capturedContext.maxTransfers())
            .maxInstances(capturedContext.maxInstances())
            .sweepLimit(capturedContext.sweepLimit())
            .maxChunksPerRequest(capturedContext.maxChunksPerRequest())
            .maxInlineBytes(capturedContext.maxInlineBytes())
            .eviction(capturedContext.eviction());
    }

    /**
     * Max chunks per request of the capturing server.
     *
     * @return count.
     */
    public int maxChunksPerRequest()
    {
        return maxChunksPerRequest;
    }

    /**
     * Max inline bytes of the capturing server.
     *
     * @return bytes.
     */
    public int maxInlineBytes()
    {
        return maxInlineBytes;
    }

    /**
     * Unmaps and closes the file.
     */
    @Override
    public void close()
    {
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
            mapped = null;
        }
        try
        {
            channel.close();
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private boolean end(final boolean truncated)
    {
        ended = true;
        truncatedTail = truncated;
        return false;
    }

    private void mapSegment(final long start) throws IOException
    {
        if (null != mapped)
        {
            IoUtil.unmap(mapped);
        }
        segmentLength = (int)Math.min(segmentBytes, fileLength - start);
        mapped = channel.map(FileChannel.MapMode.READ_ONLY, start, segmentLength);
        crcView = mapped.duplicate();
        segment.wrap(mapped);
        segmentStart = start;
    }
}
