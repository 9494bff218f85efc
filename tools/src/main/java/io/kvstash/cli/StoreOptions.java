package io.kvstash.cli;

import io.kvstash.core.StoreContext;
import picocli.CommandLine.Option;

/**
 * The store options shared by {@code serve} and {@code replay --format kvstash} (which must rebuild the
 * capturing server's configuration): alignment, chunk tokens, lease, fixed slot size and key range limit.
 * The pool size is each command's own option.
 */
public final class StoreOptions
{
    @Option(names = "--alignment", paramLabel = "SIZE", converter = Converters.Size.class, defaultValue = "4096",
        description = "Slot alignment, a power of two (default: ${DEFAULT-VALUE}).")
    long alignment;

    @Option(names = "--chunk-tokens", paramLabel = "N", defaultValue = "256",
        description = "Tokens per chunk (default: ${DEFAULT-VALUE}).")
    int chunkTokens;

    @Option(names = "--lease", paramLabel = "DURATION", converter = Converters.DurationNs.class, defaultValue = "30s",
        description = "Lease of store reservations and pins, e.g. 30s, 500ms (default: ${DEFAULT-VALUE}).")
    long leaseNs;

    @Option(names = "--slot-bytes", paramLabel = "SIZE", converter = Converters.Size.class, defaultValue = "0",
        description = "Fixed slot size; 0 sizes slots from the first registered layout (default: ${DEFAULT-VALUE}).")
    long slotBytes;

    @Option(names = "--max-chunks", paramLabel = "N", defaultValue = "1024",
        description = "Largest key range of one request, in chunks (default: ${DEFAULT-VALUE}).")
    int maxChunks;

    /**
     * Options with their defaults.
     */
    public StoreOptions()
    {
    }

    /**
     * A store configuration of these options and a pool size (not concluded).
     *
     * @param poolSizeBytes pool size.
     * @return the configuration.
     * @throws IllegalArgumentException when the alignment does not fit an int.
     */
    public StoreContext storeContext(final long poolSizeBytes)
    {
        if (alignment <= 0 || alignment > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("alignment " + alignment + " is out of range: give a power of two up to 2^30");
        }
        return new StoreContext()
            .poolSizeBytes(poolSizeBytes)
            .alignment((int)alignment)
            .chunkTokens(chunkTokens)
            .leaseNs(leaseNs)
            .slotBytes(slotBytes)
            .maxChunksPerRequest(maxChunks);
    }
}
