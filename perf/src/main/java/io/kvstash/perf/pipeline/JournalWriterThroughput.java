package io.kvstash.perf.pipeline;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.pipeline.journal.JournalReader;
import io.kvstash.pipeline.journal.JournalWriter;
import io.kvstash.wire.RequestType;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;

/**
 * The journal writer alone on one thread: records of a one-chunk LOOKUP (the pipeline benchmarks' request)
 * appended and written out every 256 records, as the journal's agent does under load, into a fresh file in
 * {@code /dev/shm} per round. Prints records per second and bytes per record for each round, then reads the
 * last file back and fails unless every record is there. The pipeline's journal cost is this writer's
 * time per record plus what its bytes cost the machine; this separates the two.
 * <p>
 * Usage: {@code JournalWriterThroughput [rounds] [recordsPerRound]}.
 */
public final class JournalWriterThroughput
{
    private JournalWriterThroughput()
    {
    }

    /**
     * Runs the rounds.
     *
     * @param args rounds, records per round.
     * @throws Exception when the journal cannot be written or does not read back.
     */
    public static void main(final String[] args) throws Exception
    {
        final int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 8;
        final long records = args.length > 1 ? Long.parseLong(args[1]) : 5_000_000L;
        final StoreContext context = PipelineFixture.storeContext().conclude();
        final StoreCommand command = new StoreCommand(context);
        PipelineFixture.fill(command, RequestType.LOOKUP, 1, System.nanoTime());
        final Path file = PipelineThroughputBenchmark.journalDirectory().resolve("kvstash-journal-throughput.journal");
        for (int round = 0; round < rounds; round++)
        {
            final long start = System.nanoTime();
            try (JournalWriter writer = new JournalWriter(file, context, 1, 64L << 20))
            {
                for (long i = 0; i < records; i++)
                {
                    command.correlationId = i;
                    command.timestampNs = start + i;
                    writer.append(command, 0, 0);
                    if (255 == (i & 255))
                    {
                        writer.flush();
                    }
                }
            }
            final long elapsedNs = System.nanoTime() - start;
            System.out.printf(Locale.ROOT, "round %d: %.2f M records/s, %d bytes per record%n",
                round, records * 1e3 / elapsedNs, Files.size(file) / records);
            if (round < rounds - 1)
            {
                Files.delete(file);
            }
        }
        long read = 0;
        try (JournalReader reader = new JournalReader(file))
        {
            final StoreCommand scratch = new StoreCommand(context);
            while (reader.next(scratch))
            {
                read++;
            }
        }
        Files.delete(file);
        if (read != records)
        {
            throw new IllegalStateException("read back " + read + " of " + records + " records");
        }
    }
}
