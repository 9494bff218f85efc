package io.kvstash.pipeline.journal;

import io.kvstash.core.RequestType;
import io.kvstash.core.Status;
import io.kvstash.core.StoreCommand;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;

/**
 * Encodes a request and its outcome into a journal record body and decodes them back, little-endian,
 * allocation-free. The outcome encoding is canonical: two runs that answer alike produce the same bytes,
 * which is how a replay is compared with its capture.
 * <pre>
 * Request
 *   type i32 | flags i32 | correlationId i64 | instanceId i64 | transferId i64 | salt i64 | timestampNs i64
 *   chunkCount i32 | clientIndex i32 | decodeStatus i32 | pad i32 | session i64 | chunkCount x (hi i64, lo i64)
 *   REGISTER, LOOKUP_ALL_RANKS: modelLength i32 | worldSize i32 | rank i32 | layers i32 | hidden i32 |
 *                               dtype i32 | mla i32 | pad i32 | model bytes padded to 8
 *   WRITE_DATA, READ_DATA:      dataChunkIndex i32 | dataLength i32 | dataOffset i64
 *                               (WRITE_DATA: data bytes padded to 8)
 * Outcome
 *   status i32 | slotCount i32 | outTransferId i64 | hitChunks i32 | slotCapacity i32 | removedCount i64
 *   chunkBytes i64 | slotBytes i64 | slotCount x (rangeIndex i32, generation i32, offset i64)
 *   READ_DATA answered OK: data bytes padded to 8
 * </pre>
 */
public final class RecordCodec
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private RecordCodec()
    {
    }

    /**
     * Upper bound of a record body for a configuration.
     *
     * @param maxChunks      max chunks per request.
     * @param maxInlineBytes max inline bytes.
     * @return bytes.
     */
    public static int maxBodyLength(final int maxChunks, final int maxInlineBytes)
    {
        return 64 + maxChunks * 16 + 32 + 256 + 16 + maxInlineBytes + 64 + maxChunks * 16 + maxInlineBytes + 16;
    }

    /**
     * Encodes the request fields.
     *
     * @param c            command.
     * @param clientIndex  client the request came from.
     * @param decodeStatus status the decoder failed the request with before any stage, or OK.
     * @param buffer       destination.
     * @param offset       where to start.
     * @return offset after the request.
     */
    public static int encodeRequest(
        final StoreCommand c,
        final int clientIndex,
        final int decodeStatus,
        final MutableDirectBuffer buffer,
        final int offset)
    {
        int i = offset;
        buffer.putInt(i, c.type, LE);
        buffer.putInt(i + 4, c.flags, LE);
        buffer.putLong(i + 8, c.correlationId, LE);
        buffer.putLong(i + 16, c.instanceId, LE);
        buffer.putLong(i + 24, c.transferId, LE);
        buffer.putLong(i + 32, c.salt, LE);
        buffer.putLong(i + 40, c.timestampNs, LE);
        final int chunks = Math.max(0, Math.min(c.chunkCount, c.maxChunks()));
        buffer.putInt(i + 48, c.chunkCount, LE);
        buffer.putInt(i + 52, clientIndex, LE);
        buffer.putInt(i + 56, decodeStatus, LE);
        buffer.putInt(i + 60, 0, LE);
        buffer.putLong(i + 64, c.session, LE);
        i += 72;
        for (int k = 0; k < chunks; k++)
        {
            buffer.putLong(i, c.keyHi[k], LE);
            buffer.putLong(i + 8, c.keyLo[k], LE);
            i += 16;
        }
        if (RequestType.REGISTER == c.type || RequestType.LOOKUP_ALL_RANKS == c.type)
        {
            final int modelLength = Math.max(0, Math.min(c.modelLength, c.model.length));
            buffer.putInt(i, modelLength, LE);
            buffer.putInt(i + 4, c.worldSize, LE);
            buffer.putInt(i + 8, c.rank, LE);
            buffer.putInt(i + 12, c.layers, LE);
            buffer.putInt(i + 16, c.hidden, LE);
            buffer.putInt(i + 20, c.dtypeCode, LE);
            buffer.putInt(i + 24, c.mla ? 1 : 0, LE);
            buffer.putInt(i + 28, 0, LE);
            i += 32;
            buffer.putBytes(i, c.model, 0, modelLength);
            i += JournalDescriptor.align(modelLength);
        }
        else if (RequestType.WRITE_DATA == c.type || RequestType.READ_DATA == c.type)
        {
            buffer.putInt(i, c.dataChunkIndex, LE);
            buffer.putInt(i + 4, c.dataLength, LE);
            buffer.putLong(i + 8, c.dataOffset, LE);
            i += 16;
            if (RequestType.WRITE_DATA == c.type)
            {
                final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
                buffer.putBytes(i, c.data, 0, length);
                i += JournalDescriptor.align(length);
            }
        }
        return i;
    }

    /**
     * Decodes request fields into a command (reset first by the caller). A request the decoder had failed
     * is failed again with the same status, so it passes the stages as it did.
     *
     * @param buffer source.
     * @param offset where the request starts.
     * @param limit  end of the record body.
     * @param c      command to fill.
     * @return offset after the request, or -1 when the record is malformed.
     */
    public static int decodeRequest(final DirectBuffer buffer, final int offset, final int limit, final StoreCommand c)
    {
        int i = offset;
        if (i + 72 > limit)
        {
            return -1;
        }
        c.type = buffer.getInt(i, LE);
        c.flags = buffer.getInt(i + 4, LE);
        c.correlationId = buffer.getLong(i + 8, LE);
        c.instanceId = buffer.getLong(i + 16, LE);
        c.transferId = buffer.getLong(i + 24, LE);
        c.salt = buffer.getLong(i + 32, LE);
        c.timestampNs = buffer.getLong(i + 40, LE);
        c.chunkCount = buffer.getInt(i + 48, LE);
        final int decodeStatus = buffer.getInt(i + 56, LE);
        if (Status.OK != decodeStatus)
        {
            c.fail(decodeStatus, "rejected by the decoder");
        }
        c.session = buffer.getLong(i + 64, LE);
        i += 72;
        final int chunks = Math.max(0, Math.min(c.chunkCount, c.maxChunks()));
        if (i + chunks * 16L > limit)
        {
            return -1;
        }
        for (int k = 0; k < chunks; k++)
        {
            c.keyHi[k] = buffer.getLong(i, LE);
            c.keyLo[k] = buffer.getLong(i + 8, LE);
            i += 16;
        }
        if (RequestType.REGISTER == c.type || RequestType.LOOKUP_ALL_RANKS == c.type)
        {
            if (i + 32 > limit)
            {
                return -1;
            }
            final int modelLength = buffer.getInt(i, LE);
            c.worldSize = buffer.getInt(i + 4, LE);
            c.rank = buffer.getInt(i + 8, LE);
            c.layers = buffer.getInt(i + 12, LE);
            c.hidden = buffer.getInt(i + 16, LE);
            c.dtypeCode = buffer.getInt(i + 20, LE);
            c.mla = 0 != buffer.getInt(i + 24, LE);
            i += 32;
            if (modelLength < 0 || modelLength > c.model.length || i + modelLength > limit)
            {
                return -1;
            }
            buffer.getBytes(i, c.model, 0, modelLength);
            c.modelLength = modelLength;
            i += JournalDescriptor.align(modelLength);
        }
        else if (RequestType.WRITE_DATA == c.type || RequestType.READ_DATA == c.type)
        {
            if (i + 16 > limit)
            {
                return -1;
            }
            c.dataChunkIndex = buffer.getInt(i, LE);
            c.dataLength = buffer.getInt(i + 4, LE);
            c.dataOffset = buffer.getLong(i + 8, LE);
            i += 16;
            if (RequestType.WRITE_DATA == c.type)
            {
                final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
                if (i + length > limit)
                {
                    return -1;
                }
                c.data.putBytes(0, buffer, i, length);
                i += JournalDescriptor.align(length);
            }
        }
        return i;
    }

    /**
     * Encodes the outcome canonically.
     *
     * @param c      command with its outcome.
     * @param buffer destination.
     * @param offset where to start.
     * @return offset after the outcome.
     */
    public static int encodeOutcome(final StoreCommand c, final MutableDirectBuffer buffer, final int offset)
    {
        int i = offset;
        final int slots = Math.max(0, Math.min(c.slotCount, c.slotChunkId.length));
        buffer.putInt(i, c.status, LE);
        buffer.putInt(i + 4, slots, LE);
        buffer.putLong(i + 8, c.outTransferId, LE);
        buffer.putInt(i + 16, c.hitChunks, LE);
        buffer.putInt(i + 20, c.slotCapacity, LE);
        buffer.putLong(i + 24, c.removedCount, LE);
        buffer.putLong(i + 32, c.chunkBytes, LE);
        buffer.putLong(i + 40, c.slotBytes, LE);
        i += 48;
        for (int k = 0; k < slots; k++)
        {
            buffer.putInt(i, c.slotRangeIndex[k], LE);
            buffer.putInt(i + 4, c.slotGeneration[k], LE);
            buffer.putLong(i + 8, c.slotOffset[k], LE);
            i += 16;
        }
        if (RequestType.READ_DATA == c.type && Status.OK == c.status)
        {
            final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
            buffer.putBytes(i, c.data, 0, length);
            i += JournalDescriptor.align(length);
        }
        return i;
    }
}
