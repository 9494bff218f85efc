package io.kvstash.tools;

import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Mooncake synthetic trace the project ships ({@code traces/mooncake_synthetic_trace.jsonl}) and its
 * reference figures (traces/README.md): the hit chunks of an ordered replay through an exact LRU of N chunks.
 * The file is recognised by its SHA-256, so a renamed copy still gets its reference figures and an edited
 * one does not.
 */
public final class BundledTrace
{
    /** Path of the trace relative to the repository root. */
    public static final String RELATIVE_PATH = "traces/mooncake_synthetic_trace.jsonl";
    /** SHA-256 of the bundled file. */
    public static final String SHA256 = "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131";
    /** Requests in the bundled trace. */
    public static final int REQUESTS = 3993;
    /** Chunk references in the bundled trace. */
    public static final long CHUNK_REFERENCES = 121_877;

    private static final Map<Integer, Long> REFERENCE_HIT_CHUNKS;

    static
    {
        final Map<Integer, Long> figures = new LinkedHashMap<>();
        figures.put(1024, 10_219L);
        figures.put(4096, 28_871L);
        figures.put(16384, 64_724L);
        figures.put(65536, 77_953L);
        REFERENCE_HIT_CHUNKS = Collections.unmodifiableMap(figures);
    }

    private BundledTrace()
    {
    }

    /**
     * Reference hit chunks by LRU capacity in chunks (1,024 / 4,096 / 16,384 / 65,536).
     *
     * @return unmodifiable map, in increasing capacity.
     */
    public static Map<Integer, Long> referenceHitChunks()
    {
        return REFERENCE_HIT_CHUNKS;
    }

    /**
     * Whether a file is the bundled trace (same bytes).
     *
     * @param file a trace file.
     * @return true when its SHA-256 is the bundled trace's.
     * @throws IOException when it cannot be read.
     */
    public static boolean isBundled(final Path file) throws IOException
    {
        if (Files.size(file) > 64L << 20)
        {
            return false;
        }
        try (InputStream in = Files.newInputStream(file))
        {
            final MessageDigest digest = MessageDigest.getInstance("SHA-256");
            final byte[] buffer = new byte[64 << 10];
            int n;
            while ((n = in.read(buffer)) > 0)
            {
                digest.update(buffer, 0, n);
            }
            return SHA256.equals(HexFormat.of().formatHex(digest.digest()));
        }
        catch (final NoSuchAlgorithmException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * Finds the bundled trace: under the working directory or one of its parents, or beside the code (the
     * jar in {@code ipc/target}, or the classes directory) or one of its parents.
     *
     * @return the trace path.
     * @throws IOException when it is nowhere to be found; the message lists where it looked.
     */
    public static Path locate() throws IOException
    {
        final List<Path> starts = new ArrayList<>();
        starts.add(Path.of("").toAbsolutePath());
        try
        {
            final Path code = Path.of(BundledTrace.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            starts.add(Files.isDirectory(code) ? code : code.getParent());
        }
        catch (final URISyntaxException | RuntimeException ignore)
        {
            // No code location: the working directory alone is searched.
        }
        for (final Path start : starts)
        {
            Path dir = start;
            for (int depth = 0; depth < 6 && null != dir; depth++, dir = dir.getParent())
            {
                final Path candidate = dir.resolve(RELATIVE_PATH);
                if (Files.isRegularFile(candidate))
                {
                    return candidate.normalize();
                }
            }
        }
        throw new IOException("the bundled trace " + RELATIVE_PATH + " was not found under " + starts.get(0) +
            (starts.size() > 1 ? " or " + starts.get(1) : "") + " or their parents: run kvstash from its " +
            "checkout (./kvstash demo) or pass --trace FILE");
    }
}
