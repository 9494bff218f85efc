package io.kvstash.pipeline.journal;

import io.kvstash.core.StoreCommand;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;

/**
 * Encodes a request and its outcome into a journal record body and decodes them back, allocation-free.
 * Numbers are zigzag LEB128 varints (1 byte for -64..63, at most 10), and the fields a request type leaves at
 * zero are not written at all: a presence mask says which follow. Key hashes and data bytes are written raw.
 * A one-chunk LOOKUP and its outcome take about 36 bytes of body, a 56-byte record with its header and
 * alignment (152 in the fixed layout of version 1). Fewer bytes let the writer keep up with more records a
 * second; what a record costs is then mostly this encoding (most of it in {@code putVarLong}), not its bytes.
 * The outcome encoding is canonical: two runs that answer alike produce the same bytes, which is how a
 * replay is compared with its capture.
 * <pre>
 * Request
 *   type v | mask u16 LE | present fields in mask bit order, each v:
 *     0 flags, 1 correlationId, 2 instanceId, 3 transferId, 4 salt, 5 timestampNs, 6 chunkCount,
 *     7 clientIndex, 8 decodeStatus, 9 session
 *   min(chunkCount, maxChunks) x (hi i64 LE, lo i64 LE)
 *   REGISTER, LOOKUP_ALL_RANKS: modelLength v | worldSize v | rank v | layers v | hidden v | dtype v | mla v |
 *                               model bytes
 *   WRITE_DATA, READ_DATA:      dataChunkIndex v | dataLength v | dataOffset v
 *                               (WRITE_DATA: min(dataLength, maxInline) data bytes)
 * Outcome
 *   status v | mask u8 | present fields in mask bit order, each v:
 *     0 slotCount, 1 outTransferId, 2 hitChunks, 3 slotCapacity, 4 removedCount, 5 chunkBytes, 6 slotBytes
 *   slotCount x (rangeIndex v, generation v, offset v)
 *   READ_DATA answered OK: min(dataLength, maxInline) data bytes
 * (v = zigzag varint of a 64-bit value)
 * </pre>
 */
public final class RecordCodec
{
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final int MAX_VARINT = 10;

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
        final int request = MAX_VARINT + 2 + 10 * MAX_VARINT + maxChunks * 16 + 7 * MAX_VARINT + 256 +
            maxInlineBytes;
        final int outcome = MAX_VARINT + 1 + 7 * MAX_VARINT + maxChunks * 3 * MAX_VARINT + maxInlineBytes;
        return request + outcome;
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
        int i = putVarLong(buffer, offset, c.type);
        final int mask = present(c.flags, 0) | present(c.correlationId, 1) | present(c.instanceId, 2) |
            present(c.transferId, 3) | present(c.salt, 4) | present(c.timestampNs, 5) | present(c.chunkCount, 6) |
            present(clientIndex, 7) | present(decodeStatus, 8) | present(c.session, 9);
        buffer.putShort(i, (short)mask, LE);
        i += 2;
        i = putPresent(buffer, i, c.flags);
        i = putPresent(buffer, i, c.correlationId);
        i = putPresent(buffer, i, c.instanceId);
        i = putPresent(buffer, i, c.transferId);
        i = putPresent(buffer, i, c.salt);
        i = putPresent(buffer, i, c.timestampNs);
        i = putPresent(buffer, i, c.chunkCount);
        i = putPresent(buffer, i, clientIndex);
        i = putPresent(buffer, i, decodeStatus);
        i = putPresent(buffer, i, c.session);
        final int chunks = Math.max(0, Math.min(c.chunkCount, c.maxChunks()));
        for (int k = 0; k < chunks; k++)
        {
            buffer.putLong(i, c.keyHi[k], LE);
            buffer.putLong(i + 8, c.keyLo[k], LE);
            i += 16;
        }
        if (RequestType.REGISTER == c.type || RequestType.LOOKUP_ALL_RANKS == c.type)
        {
            final int modelLength = Math.max(0, Math.min(c.modelLength, c.model.length));
            i = putVarLong(buffer, i, modelLength);
            i = putVarLong(buffer, i, c.worldSize);
            i = putVarLong(buffer, i, c.rank);
            i = putVarLong(buffer, i, c.layers);
            i = putVarLong(buffer, i, c.hidden);
            i = putVarLong(buffer, i, c.dtypeCode);
            i = putVarLong(buffer, i, c.mla ? 1 : 0);
            buffer.putBytes(i, c.model, 0, modelLength);
            i += modelLength;
        }
        else if (RequestType.WRITE_DATA == c.type || RequestType.READ_DATA == c.type)
        {
            i = putVarLong(buffer, i, c.dataChunkIndex);
            i = putVarLong(buffer, i, c.dataLength);
            i = putVarLong(buffer, i, c.dataOffset);
            if (RequestType.WRITE_DATA == c.type)
            {
                final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
                buffer.putBytes(i, c.data, 0, length);
                i += length;
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
     * @param cursor the caller's cursor (decoding state, reused).
     * @return offset after the request, or -1 when the record is malformed.
     */
    public static int decodeRequest(
        final DirectBuffer buffer, final int offset, final int limit, final StoreCommand c, final Cursor cursor)
    {
        cursor.reset(buffer, offset, limit);
        c.type = cursor.nextInt();
        final int mask = cursor.nextShort();
        c.flags = cursor.presentInt(mask, 0);
        c.correlationId = cursor.present(mask, 1);
        c.instanceId = cursor.present(mask, 2);
        c.transferId = cursor.present(mask, 3);
        c.salt = cursor.present(mask, 4);
        c.timestampNs = cursor.present(mask, 5);
        c.chunkCount = cursor.presentInt(mask, 6);
        cursor.present(mask, 7); // the client index: not part of the command
        final int decodeStatus = cursor.presentInt(mask, 8);
        c.session = cursor.present(mask, 9);
        if (cursor.malformed || 0 != (mask & ~0x3FF))
        {
            return -1;
        }
        if (Status.OK != decodeStatus)
        {
            c.fail(decodeStatus, "rejected by the decoder");
        }
        int i = cursor.position;
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
        cursor.position = i;
        if (RequestType.REGISTER == c.type || RequestType.LOOKUP_ALL_RANKS == c.type)
        {
            final int modelLength = cursor.nextInt();
            c.worldSize = cursor.nextInt();
            c.rank = cursor.nextInt();
            c.layers = cursor.nextInt();
            c.hidden = cursor.nextInt();
            c.dtypeCode = cursor.nextInt();
            c.mla = 0 != cursor.next();
            i = cursor.position;
            if (cursor.malformed || modelLength < 0 || modelLength > c.model.length || i + modelLength > limit)
            {
                return -1;
            }
            buffer.getBytes(i, c.model, 0, modelLength);
            c.modelLength = modelLength;
            i += modelLength;
        }
        else if (RequestType.WRITE_DATA == c.type || RequestType.READ_DATA == c.type)
        {
            c.dataChunkIndex = cursor.nextInt();
            c.dataLength = cursor.nextInt();
            c.dataOffset = cursor.next();
            i = cursor.position;
            if (cursor.malformed)
            {
                return -1;
            }
            if (RequestType.WRITE_DATA == c.type)
            {
                final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
                if (i + length > limit)
                {
                    return -1;
                }
                c.data.putBytes(0, buffer, i, length);
                i += length;
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
        final int slots = Math.max(0, Math.min(c.slotCount, c.slotChunkId.length));
        int i = putVarLong(buffer, offset, c.status);
        final int mask = present(slots, 0) | present(c.outTransferId, 1) | present(c.hitChunks, 2) |
            present(c.slotCapacity, 3) | present(c.removedCount, 4) | present(c.chunkBytes, 5) |
            present(c.slotBytes, 6);
        buffer.putByte(i, (byte)mask);
        i += 1;
        i = putPresent(buffer, i, slots);
        i = putPresent(buffer, i, c.outTransferId);
        i = putPresent(buffer, i, c.hitChunks);
        i = putPresent(buffer, i, c.slotCapacity);
        i = putPresent(buffer, i, c.removedCount);
        i = putPresent(buffer, i, c.chunkBytes);
        i = putPresent(buffer, i, c.slotBytes);
        for (int k = 0; k < slots; k++)
        {
            i = putVarLong(buffer, i, c.slotRangeIndex[k]);
            i = putVarLong(buffer, i, c.slotGeneration[k]);
            i = putVarLong(buffer, i, c.slotOffset[k]);
        }
        if (RequestType.READ_DATA == c.type && Status.OK == c.status)
        {
            final int length = Math.max(0, Math.min(c.dataLength, c.data.capacity()));
            buffer.putBytes(i, c.data, 0, length);
            i += length;
        }
        return i;
    }

    /**
     * A field's bit of a presence mask: set when the field is not zero.
     */
    private static int present(final long value, final int bit)
    {
        return 0 != value ? 1 << bit : 0;
    }

    /**
     * Writes a field the presence mask says is there: a varint unless the value is zero.
     */
    private static int putPresent(final MutableDirectBuffer buffer, final int offset, final long value)
    {
        return 0 != value ? putVarLong(buffer, offset, value) : offset;
    }

    /**
     * Writes a zigzag LEB128 varint.
     *
     * @param buffer destination.
     * @param offset where.
     * @param value  value.
     * @return offset after it.
     */
    static int putVarLong(final MutableDirectBuffer buffer, final int offset, final long value)
    {
        long v = (value << 1) ^ (value >> 63);
        if (0 == (v >>> 7))
        {
            // One byte: most fields of a record (type, counts, statuses, small ids). A field keeps its length
            // from one record to the next, so this branch predicts well, and it skips the packing below,
            // which would otherwise be most of a small record's encoding.
            buffer.putByte(offset, (byte)v);
            return offset + 1;
        }
        if (0 == (v >>> 56))
        {
            // Up to eight bytes: built in a register and stored at once. The store may write up to seven
            // bytes past the varint; every buffer this encodes into has a varint's worth of room after any
            // field (see maxBodyLength) and the bytes past the end are overwritten or cleared by the caller.
            // Branch-free: the length from the highest set bit, the 7-bit groups spread one per byte, a
            // continuation bit on every byte but the last (a loop per group mispredicts on mixed lengths).
            final int n = (70 - Long.numberOfLeadingZeros(v | 1)) / 7;
            final long packed = (v & 0x7FL) | ((v << 1) & 0x7F00L) | ((v << 2) & 0x7F_0000L) |
                ((v << 3) & 0x7F00_0000L) | ((v << 4) & 0x7F_0000_0000L) | ((v << 5) & 0x7F00_0000_0000L) |
                ((v << 6) & 0x7F_0000_0000_0000L) | ((v << 7) & 0x7F00_0000_0000_0000L) |
                (0x8080_8080_8080_8080L & ((1L << ((n - 1) << 3)) - 1));
            buffer.putLong(offset, packed, LE);
            return offset + n;
        }
        int i = offset;
        while ((v & ~0x7FL) != 0)
        {
            buffer.putByte(i++, (byte)((v & 0x7F) | 0x80));
            v >>>= 7;
        }
        buffer.putByte(i++, (byte)v);
        return i;
    }

    /**
     * Reads varints from a record body within its bounds; a read past the end or an over-long varint marks
     * the record malformed (and reads as 0) instead of throwing.
     */
    public static final class Cursor
    {
        private DirectBuffer buffer;
        private int position;
        private int limit;
        private boolean malformed;

        void reset(final DirectBuffer buffer, final int position, final int limit)
        {
            this.buffer = buffer;
            this.position = position;
            this.limit = limit;
            this.malformed = false;
        }

        long next()
        {
            long v = 0;
            for (int shift = 0; shift < 64; shift += 7)
            {
                if (position >= limit)
                {
                    malformed = true;
                    return 0;
                }
                final byte b = buffer.getByte(position++);
                v |= (long)(b & 0x7F) << shift;
                if (b >= 0)
                {
                    return (v >>> 1) ^ -(v & 1);
                }
            }
            malformed = true;
            return 0;
        }

        int nextInt()
        {
            final long v = next();
            if (v != (int)v)
            {
                malformed = true;
            }
            return (int)v;
        }

        long present(final int mask, final int bit)
        {
            return 0 != (mask & (1 << bit)) ? next() : 0;
        }

        int presentInt(final int mask, final int bit)
        {
            return 0 != (mask & (1 << bit)) ? nextInt() : 0;
        }

        boolean isMalformed()
        {
            return malformed;
        }

        int nextShort()
        {
            if (position + 2 > limit)
            {
                malformed = true;
                return 0;
            }
            final int v = buffer.getShort(position, LE) & 0xFFFF;
            position += 2;
            return v;
        }
    }
}
