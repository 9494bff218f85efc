package io.kvstash.cli;

import io.kvstash.tools.TraceReplay;
import picocli.CommandLine.Option;

/**
 * What each replay worker sends, for the commands that start workers on a trace ({@code worker}, and the test
 * kit's {@code tier-replay}): the bytes of one chunk and the bound of each LOOKUP's wait for the second tier. A
 * command that wants other defaults puts an instance made with them in its {@code @Mixin} field.
 */
public final class WorkerLoadOptions
{
    @Option(names = "--payload-bytes", paramLabel = "SIZE", converter = Converters.Size.class,
        description = "Bytes of one chunk (default: ${DEFAULT-VALUE}).")
    long payloadBytes;

    @Option(names = "--tier-wait-ms", paramLabel = "MS",
        description = "Bound of each LOOKUP's wait for the second tier's read-through; 0 sends a plain LOOKUP " +
            "(default: ${DEFAULT-VALUE}).")
    long tierWaitMs;

    /**
     * Options with the defaults of a replay worker: {@link TraceReplay#PAYLOAD_BYTES_DEFAULT} and a plain LOOKUP.
     */
    public WorkerLoadOptions()
    {
        this(TraceReplay.PAYLOAD_BYTES_DEFAULT, 0);
    }

    /**
     * Options with other defaults.
     *
     * @param payloadBytes default bytes of one chunk.
     * @param tierWaitMs   default bound of each LOOKUP's wait for the second tier, ms.
     */
    public WorkerLoadOptions(final long payloadBytes, final long tierWaitMs)
    {
        this.payloadBytes = payloadBytes;
        this.tierWaitMs = tierWaitMs;
    }

    /**
     * @return bytes of one chunk.
     * @throws IllegalArgumentException when it is not 1 to {@link Integer#MAX_VALUE}.
     */
    public int payloadBytes()
    {
        if (payloadBytes <= 0 || payloadBytes > Integer.MAX_VALUE)
        {
            throw new IllegalArgumentException("payload out of range: " + payloadBytes);
        }
        return (int)payloadBytes;
    }

    /**
     * @return bound of each LOOKUP's wait for the second tier, ms; 0 for a plain LOOKUP.
     */
    public long tierWaitMs()
    {
        return tierWaitMs;
    }
}
