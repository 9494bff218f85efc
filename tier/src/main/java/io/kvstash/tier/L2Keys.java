package io.kvstash.tier;

import io.kvstash.wire.layout.Layout;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * Content keys of the second tier: {@code kvstash:1:<namespace>:<chunk hash>}, where the namespace is 64 bits of
 * SHA-256 over the layout identity (model, world size, rank) and the cache salt, and the chunk hash is the
 * 128-bit key hash in hex. Every host with the same model, rank layout and salt computes the same key for the same
 * prefix. No hash tags: the keys spread over every slot of the cluster.
 */
public final class L2Keys
{
    /** Prefix of every key the tier writes. */
    public static final String KEY_PREFIX = "kvstash:1:";
    private static final byte[] HEX = "0123456789abcdef".getBytes(StandardCharsets.US_ASCII);

    private L2Keys()
    {
    }

    /**
     * The namespace of a layout identity and salt.
     *
     * @param layout layout (its identity counts: model, world size, rank).
     * @param salt   cache salt.
     * @return 16 hex digits.
     */
    public static String namespace(final Layout layout, final long salt)
    {
        final MessageDigest sha = sha256();
        sha.update("kvstash-l2-namespace".getBytes(StandardCharsets.US_ASCII));
        sha.update((byte)0);
        sha.update(layout.modelBytes());
        sha.update((byte)0);
        update(sha, layout.worldSize());
        update(sha, layout.rank());
        update(sha, salt);
        return String.format("%016x", first64(sha.digest()));
    }

    /**
     * The identity of a whole layout (identity, layers, hidden size, dtype, MLA), written in every value's header:
     * a value stored by a host with another layout for the same identity is a miss.
     *
     * @param layout layout.
     * @return 64 bits.
     */
    public static long layoutHash(final Layout layout)
    {
        final MessageDigest sha = sha256();
        sha.update("kvstash-l2-layout".getBytes(StandardCharsets.US_ASCII));
        sha.update((byte)0);
        sha.update(layout.modelBytes());
        sha.update((byte)0);
        update(sha, layout.worldSize());
        update(sha, layout.rank());
        update(sha, layout.layers());
        update(sha, layout.hidden());
        update(sha, layout.dtypeCode());
        update(sha, layout.mla() ? 1 : 0);
        return first64(sha.digest());
    }

    /**
     * The key of one chunk.
     *
     * @param namespace {@link #namespace(Layout, long)}.
     * @param hi        high 64 bits of the chunk hash.
     * @param lo        low 64 bits of the chunk hash.
     * @return ASCII key bytes.
     */
    public static byte[] key(final String namespace, final long hi, final long lo)
    {
        return key(keyPrefix(namespace), hi, lo);
    }

    /**
     * The bytes every key of a namespace starts with: {@code kvstash:1:<namespace>:}.
     *
     * @param namespace {@link #namespace(Layout, long)}.
     * @return ASCII bytes.
     */
    public static byte[] keyPrefix(final String namespace)
    {
        return (KEY_PREFIX + namespace + ":").getBytes(StandardCharsets.US_ASCII);
    }

    /**
     * The key of one chunk after a namespace's prefix, without formatting: one array, the key itself.
     *
     * @param prefix {@link #keyPrefix(String)}.
     * @param hi     high 64 bits of the chunk hash.
     * @param lo     low 64 bits of the chunk hash.
     * @return ASCII key bytes.
     */
    public static byte[] key(final byte[] prefix, final long hi, final long lo)
    {
        final byte[] key = new byte[prefix.length + 32];
        System.arraycopy(prefix, 0, key, 0, prefix.length);
        hex(key, prefix.length, hi);
        hex(key, prefix.length + 16, lo);
        return key;
    }

    private static void hex(final byte[] out, final int offset, final long value)
    {
        for (int i = 0; i < 16; i++)
        {
            out[offset + i] = HEX[(int)(value >>> (60 - 4 * i)) & 0xF];
        }
    }

    /**
     * The key of one chunk of a layout and salt.
     *
     * @param layout layout.
     * @param salt   cache salt.
     * @param hi     high 64 bits of the chunk hash.
     * @param lo     low 64 bits of the chunk hash.
     * @return ASCII key bytes.
     */
    public static byte[] key(final Layout layout, final long salt, final long hi, final long lo)
    {
        return key(namespace(layout, salt), hi, lo);
    }

    private static void update(final MessageDigest sha, final long value)
    {
        for (int i = 0; i < Long.BYTES; i++)
        {
            sha.update((byte)(value >>> (8 * i)));
        }
    }

    private static long first64(final byte[] digest)
    {
        long v = 0;
        for (int i = 0; i < Long.BYTES; i++)
        {
            v = (v << 8) | (digest[i] & 0xFF);
        }
        return v;
    }

    private static MessageDigest sha256()
    {
        try
        {
            return MessageDigest.getInstance("SHA-256");
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException("SHA-256 is missing from this JVM", ex);
        }
    }
}
