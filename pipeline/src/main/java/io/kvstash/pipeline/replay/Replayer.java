package io.kvstash.pipeline.replay;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.PipelineAgent;
import io.kvstash.pipeline.PipelineContext;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.pipeline.journal.JournalWriter;
import io.kvstash.pipeline.journal.RecordCodec;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Replays a journal into a fresh pipeline with the same store configuration, request by request with the
 * recorded timestamps, and compares every response with the recorded outcome byte for byte, then the final
 * deterministic counters with the journal's shutdown snapshot (when it has one). Runs on the calling
 * thread (SHARED mode), one request at a time.
 * <p>
 * It sits above both the pipeline it drives and the journal format it reads ({@code io.kvstash.pipeline.journal},
 * which depends on nothing of the pipeline), so neither package depends on the other.
 */
public final class Replayer
{
    private Replayer()
    {
    }

    /**
     * Replays a journal with the configuration its header records.
     *
     * @param journal journal file.
     * @return the result.
     * @throws IOException when the journal cannot be read.
     */
    public static Result replay(final Path journal) throws IOException
    {
        final StoreContext captured;
        try (JournalReader reader = new JournalReader(journal))
        {
            captured = reader.capturedContext();
        }
        return replay(journal, captured);
    }

    /**
     * Replays a journal.
     *
     * @param journal      journal file.
     * @param storeContext the capturing server's store configuration.
     * @return the result.
     * @throws IOException when the journal cannot be read.
     * @throws IllegalArgumentException when the journal was captured with another configuration.
     */
    public static Result replay(final Path journal, final StoreContext storeContext) throws IOException
    {
        if (!storeContext.isConcluded())
        {
            storeContext.conclude();
        }
        try (JournalReader reader = new JournalReader(journal))
        {
            if (!Arrays.equals(reader.configDigest(), JournalWriter.configDigest(storeContext)))
            {
                throw new IllegalArgumentException("journal was captured with another configuration: " + journal);
            }
            final Comparison comparison = new Comparison(reader, storeContext);
            final PipelineContext context = new PipelineContext()
                .storeContext(storeContext)
                .threadingMode(ThreadingMode.SHARED)
                .latencyEnabled(false)
                .ringSize(2)
                .responseSink(comparison::onResponse);
            final StoreCommand scratch = new StoreCommand(storeContext);
            try (Pipeline pipeline = new Pipeline(context))
            {
                final PipelineAgent agent = pipeline.agent();
                while (reader.next(scratch))
                {
                    final long sequence = pipeline.claim();
                    final RequestEvent event = pipeline.event(sequence);
                    copyRequest(scratch, event.reset());
                    if (scratch.done)
                    {
                        event.rejectAtDecode(scratch.status, scratch.message);
                    }
                    pipeline.publish(sequence);
                    try
                    {
                        while (0 == agent.doWork())
                        {
                            Thread.onSpinWait();
                        }
                    }
                    catch (final Exception ex)
                    {
                        throw new IllegalStateException(ex);
                    }
                }
                final int[] ids = reader.counterIds();
                final long[] values = reader.counterValues();
                int counterMismatches = 0;
                String firstCounterMismatch = null;
                if (null != ids)
                {
                    final StoreCounters counters = pipeline.counters();
                    for (int k = 0; k < ids.length; k++)
                    {
                        if (counters.get(ids[k]) != values[k])
                        {
                            counterMismatches++;
                            if (null == firstCounterMismatch)
                            {
                                firstCounterMismatch = CountersDescriptor.name(ids[k]) + ": captured " + values[k] +
                                    ", replayed " + counters.get(ids[k]);
                            }
                        }
                    }
                }
                final long[] finalCounters = new long[CountersDescriptor.COUNT];
                pipeline.counters().snapshot(finalCounters);
                return new Result(comparison.records, comparison.mismatches, comparison.firstMismatch,
                    reader.truncatedTail(), null != ids, counterMismatches, firstCounterMismatch, finalCounters);
            }
        }
    }

    /**
     * Copies a decoded request into an event's command, so the replayed request is exactly the recorded one.
     */
    private static void copyRequest(final StoreCommand from, final StoreCommand to)
    {
        to.type = from.type;
        to.flags = from.flags;
        to.correlationId = from.correlationId;
        to.instanceId = from.instanceId;
        to.transferId = from.transferId;
        to.salt = from.salt;
        to.timestampNs = from.timestampNs;
        to.session = from.session;
        to.chunkCount = from.chunkCount;
        final int chunks = Math.max(0, Math.min(from.chunkCount, from.maxChunks()));
        System.arraycopy(from.keyHi, 0, to.keyHi, 0, chunks);
        System.arraycopy(from.keyLo, 0, to.keyLo, 0, chunks);
        System.arraycopy(from.model, 0, to.model, 0, from.model.length);
        to.modelLength = from.modelLength;
        to.worldSize = from.worldSize;
        to.rank = from.rank;
        to.layers = from.layers;
        to.hidden = from.hidden;
        to.dtypeCode = from.dtypeCode;
        to.mla = from.mla;
        to.dataChunkIndex = from.dataChunkIndex;
        to.dataOffset = from.dataOffset;
        to.dataLength = from.dataLength;
        to.data.putBytes(0, from.data, 0, Math.max(0, Math.min(from.dataLength, from.data.capacity())));
    }

    private static final class Comparison
    {
        private final JournalReader reader;
        private final UnsafeBuffer encoded;
        private long records;
        private long mismatches;
        private String firstMismatch;

        Comparison(final JournalReader reader, final StoreContext storeContext)
        {
            this.reader = reader;
            this.encoded = new UnsafeBuffer(new byte[RecordCodec.maxBodyLength(
                storeContext.maxChunksPerRequest(), storeContext.maxInlineBytes())]);
        }

        void onResponse(final RequestEvent event)
        {
            final StoreCommand command = event.command;
            final int length = RecordCodec.encodeOutcome(command, encoded, 0);
            records++;
            if (!reader.outcomeEquals(encoded, 0, length))
            {
                mismatches++;
                if (null == firstMismatch)
                {
                    firstMismatch = "record " + records + " (correlation " + command.correlationId + ", " +
                        io.kvstash.wire.RequestType.name(command.type) + ") replayed " +
                        Status.name(command.status);
                }
            }
        }
    }

    /**
     * Outcome of a replay.
     */
    public static final class Result
    {
        private final long records;
        private final long mismatches;
        private final String firstMismatch;
        private final boolean truncatedTail;
        private final boolean hadCounters;
        private final int counterMismatches;
        private final String firstCounterMismatch;
        private final long[] counters;

        Result(
            final long records,
            final long mismatches,
            final String firstMismatch,
            final boolean truncatedTail,
            final boolean hadCounters,
            final int counterMismatches,
            final String firstCounterMismatch,
            final long[] counters)
        {
            this.records = records;
            this.mismatches = mismatches;
            this.firstMismatch = firstMismatch;
            this.truncatedTail = truncatedTail;
            this.hadCounters = hadCounters;
            this.counterMismatches = counterMismatches;
            this.firstCounterMismatch = firstCounterMismatch;
            this.counters = counters;
        }

        /**
         * Records replayed.
         *
         * @return count.
         */
        public long records()
        {
            return records;
        }

        /**
         * Responses that differ from the capture.
         *
         * @return count.
         */
        public long mismatches()
        {
            return mismatches;
        }

        /**
         * The first differing response.
         *
         * @return description or null.
         */
        public String firstMismatch()
        {
            return firstMismatch;
        }

        /**
         * Whether the journal ended at a cut record.
         *
         * @return true when truncated.
         */
        public boolean truncatedTail()
        {
            return truncatedTail;
        }

        /**
         * Whether the journal carried a shutdown counters snapshot.
         *
         * @return true when it did.
         */
        public boolean hadCounters()
        {
            return hadCounters;
        }

        /**
         * Deterministic counters that differ from the snapshot.
         *
         * @return count.
         */
        public int counterMismatches()
        {
            return counterMismatches;
        }

        /**
         * The first differing counter.
         *
         * @return description or null.
         */
        public String firstCounterMismatch()
        {
            return firstCounterMismatch;
        }

        /**
         * Final counters of the replay.
         *
         * @return a copy, indexed by counter id.
         */
        public long[] counters()
        {
            return counters.clone();
        }

        /**
         * Whether the replay reproduced the capture exactly.
         *
         * @return true when no response and no counter differs.
         */
        public boolean identical()
        {
            return 0 == mismatches && 0 == counterMismatches;
        }
    }
}
