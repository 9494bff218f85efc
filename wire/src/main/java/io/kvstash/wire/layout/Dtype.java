package io.kvstash.wire.layout;

/**
 * Element types of a KV cache, with their wire code and item size in bytes. Codes are part of the wire.
 */
public enum Dtype
{
    /** IEEE 754 single precision. */
    FLOAT32(1, "float32", 4),
    /** IEEE 754 half precision. */
    FLOAT16(2, "float16", 2),
    /** Brain floating point, 16 bits. */
    BFLOAT16(3, "bfloat16", 2),
    /** 8-bit float, 4 exponent and 3 mantissa bits. */
    FLOAT8_E4M3FN(4, "float8_e4m3fn", 1),
    /** 8-bit float, 5 exponent and 2 mantissa bits. */
    FLOAT8_E5M2(5, "float8_e5m2", 1),
    /** Signed 8-bit integer. */
    INT8(6, "int8", 1),
    /** Unsigned 8-bit integer. */
    UINT8(7, "uint8", 1);

    private static final Dtype[] BY_CODE = new Dtype[8];

    static
    {
        for (final Dtype dtype : values())
        {
            BY_CODE[dtype.code] = dtype;
        }
    }

    private final int code;
    private final String dtypeName;
    private final int itemSize;

    Dtype(final int code, final String dtypeName, final int itemSize)
    {
        this.code = code;
        this.dtypeName = dtypeName;
        this.itemSize = itemSize;
    }

    /**
     * Wire code.
     *
     * @return the code, never 0 (0 is "no dtype").
     */
    public int code()
    {
        return code;
    }

    /**
     * Name as PyTorch spells it.
     *
     * @return e.g. {@code "bfloat16"}.
     */
    public String dtypeName()
    {
        return dtypeName;
    }

    /**
     * Bytes per element.
     *
     * @return item size in bytes.
     */
    public int itemSize()
    {
        return itemSize;
    }

    /**
     * Dtype of a wire code.
     *
     * @param code wire code.
     * @return the dtype or null when the code is unknown.
     */
    public static Dtype fromCode(final int code)
    {
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }

    /**
     * Dtype of a name, accepting an optional {@code "torch."} prefix.
     *
     * @param name e.g. {@code "float16"} or {@code "torch.float16"}.
     * @return the dtype or null when the name is unknown.
     */
    public static Dtype fromName(final String name)
    {
        if (null == name)
        {
            return null;
        }
        final String bare = name.startsWith("torch.") ? name.substring(6) : name;
        for (final Dtype dtype : values())
        {
            if (dtype.dtypeName.equals(bare))
            {
                return dtype;
            }
        }
        return null;
    }
}
