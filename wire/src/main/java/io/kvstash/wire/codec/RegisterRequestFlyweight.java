package io.kvstash.wire.codec;

import io.kvstash.wire.layout.Layout;
import org.agrona.DirectBuffer;

import static io.kvstash.wire.codec.WireDescriptor.REGISTER_BODY_LENGTH;

/**
 * REGISTER: the common header, then the layout (world size, rank, layers, hidden, dtype, MLA) and the model
 * name, which ends the record unpadded. See {@link WireDescriptor}.
 */
public final class RegisterRequestFlyweight extends RequestFlyweight
{
    private static final int WORLD_SIZE_OFFSET = HEADER_LENGTH;
    private static final int RANK_OFFSET = HEADER_LENGTH + 4;
    private static final int LAYERS_OFFSET = HEADER_LENGTH + 8;
    private static final int HIDDEN_OFFSET = HEADER_LENGTH + 12;
    private static final int DTYPE_OFFSET = HEADER_LENGTH + 16;
    private static final int MLA_OFFSET = HEADER_LENGTH + 20;
    private static final int MODEL_LENGTH_OFFSET = HEADER_LENGTH + 24;
    private static final int RESERVED_OFFSET = HEADER_LENGTH + 28;
    private static final int MODEL_OFFSET = HEADER_LENGTH + REGISTER_BODY_LENGTH;

    /** Longest REGISTER record. */
    public static final int MAX_LENGTH = MODEL_OFFSET + Layout.MAX_MODEL_LENGTH;

    /**
     * Bytes of a REGISTER record.
     *
     * @param modelLength bytes of the model name.
     * @return record length.
     */
    public static int length(final int modelLength)
    {
        return MODEL_OFFSET + modelLength;
    }

    @Override
    public RegisterRequestFlyweight wrap(final DirectBuffer buffer, final int offset, final int length)
    {
        super.wrap(buffer, offset, length);
        return this;
    }

    /**
     * Writes the body after {@link #putHeader}.
     *
     * @param layout layout to register; its model name ends the record.
     * @return this.
     */
    public RegisterRequestFlyweight putLayout(final Layout layout)
    {
        final byte[] model = layout.modelBytes();
        putInt(WORLD_SIZE_OFFSET, layout.worldSize());
        putInt(RANK_OFFSET, layout.rank());
        putInt(LAYERS_OFFSET, layout.layers());
        putInt(HIDDEN_OFFSET, layout.hidden());
        putInt(DTYPE_OFFSET, layout.dtypeCode());
        putInt(MLA_OFFSET, layout.mla() ? 1 : 0);
        putInt(MODEL_LENGTH_OFFSET, model.length);
        putInt(RESERVED_OFFSET, 0);
        putBytes(MODEL_OFFSET, model, 0, model.length);
        return this;
    }

    /**
     * Whether the record holds the fixed body.
     *
     * @return true when the fields before the model name are inside the record.
     */
    public boolean hasBody()
    {
        return length() >= MODEL_OFFSET;
    }

    /**
     * World size.
     *
     * @return tensor-parallel world size.
     */
    public int worldSize()
    {
        return getInt(WORLD_SIZE_OFFSET);
    }

    /**
     * Rank.
     *
     * @return rank of the instance.
     */
    public int rank()
    {
        return getInt(RANK_OFFSET);
    }

    /**
     * Layers.
     *
     * @return layers of the model.
     */
    public int layers()
    {
        return getInt(LAYERS_OFFSET);
    }

    /**
     * Hidden size per rank.
     *
     * @return hidden.
     */
    public int hidden()
    {
        return getInt(HIDDEN_OFFSET);
    }

    /**
     * Dtype code.
     *
     * @return {@link io.kvstash.wire.layout.Dtype} code.
     */
    public int dtypeCode()
    {
        return getInt(DTYPE_OFFSET);
    }

    /**
     * MLA.
     *
     * @return whether the layout is MLA's (one latent vector per token).
     */
    public boolean mla()
    {
        return 0 != getInt(MLA_OFFSET);
    }

    /**
     * Bytes of the model name as the record states them; check with {@link #modelFits(int)} before use.
     *
     * @return stated model name length.
     */
    public int modelLength()
    {
        return getInt(MODEL_LENGTH_OFFSET);
    }

    /**
     * Whether the stated model name is well-formed: not negative, at most the caller's room, and inside the
     * record.
     *
     * @param room bytes the caller can take.
     * @return true when {@link #getModel(byte[])} may be called.
     */
    public boolean modelFits(final int room)
    {
        final int n = modelLength();
        return n >= 0 && n <= room && MODEL_OFFSET + (long)n <= length();
    }

    /**
     * Copies the model name out.
     *
     * @param destination receives {@link #modelLength()} bytes from index 0.
     * @return bytes copied.
     */
    public int getModel(final byte[] destination)
    {
        final int n = modelLength();
        getBytes(MODEL_OFFSET, destination, n);
        return n;
    }
}
