package io.kvstash.server;

import io.kvstash.wire.file.ClientFileDescriptor;
import io.kvstash.wire.file.ControlFileDescriptor;
import io.kvstash.wire.file.ControlFileFlyweight;
import io.kvstash.wire.file.PoolFileDescriptor;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Consumer;

/**
 * The files a server that did not shut down cleanly left in its directory, reclaimed by the next server at its start
 * (it holds the directory's lock): its pool, client files, staging control file and doorbell are deleted; its control
 * file is kept as {@code dead-control-<incarnation>} for its error log ({@code kvstash errors}), the
 * {@link #DEAD_CONTROLS_KEPT} newest of them.
 */
final class DeadServerFiles
{
    static final int DEAD_CONTROLS_KEPT = 3;

    private DeadServerFiles()
    {
    }

    /**
     * Removes what a dead server left: pool and client files; its control file is kept for its error log.
     *
     * @param directory the server's directory, locked by the starting server.
     * @param log       the start-up log, told each pool removed and each control file kept.
     * @throws IOException when a file cannot be removed or renamed.
     */
    static void reclaim(final Path directory, final Consumer<String> log) throws IOException
    {
        final List<Path> deadControls = new ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(directory))
        {
            for (final Path file : files)
            {
                final String name = file.getFileName().toString();
                if (name.startsWith(PoolFileDescriptor.FILE_PREFIX))
                {
                    final long bytes = Files.size(file);
                    Files.deleteIfExists(file);
                    log.accept("kvstash: removed " + file + " (" + Sizes.formatSize(bytes) + "), the pool of a " +
                        "server that did not shut down cleanly");
                }
                else if (name.startsWith(ClientFileDescriptor.FILE_PREFIX) ||
                    name.startsWith(ControlFileDescriptor.FILE_NAME + ".new-") ||
                    name.equals(ControlFileDescriptor.DOORBELL_FILE_NAME))
                {
                    Files.deleteIfExists(file);
                }
                else if (name.startsWith(ControlFileDescriptor.DEAD_CONTROL_PREFIX))
                {
                    deadControls.add(file);
                }
            }
        }
        final Path controlPath = directory.resolve(ControlFileDescriptor.FILE_NAME);
        if (Files.exists(controlPath))
        {
            final long oldIncarnation = ControlFileFlyweight.readIncarnation(controlPath);
            final Path kept = directory.resolve(ControlFileDescriptor.DEAD_CONTROL_PREFIX + Long.toHexString(oldIncarnation));
            Files.move(controlPath, kept, StandardCopyOption.REPLACE_EXISTING);
            log.accept("kvstash: kept the control file of the server before (incarnation " +
                Long.toHexString(oldIncarnation) + ") as " + kept + " for 'kvstash errors' and 'kvstash stat --file'");
            deadControls.add(kept);
        }
        deadControls.sort(Comparator.comparingLong(DeadServerFiles::modifiedMs).reversed());
        for (int i = DEAD_CONTROLS_KEPT; i < deadControls.size(); i++)
        {
            Files.deleteIfExists(deadControls.get(i));
        }
    }

    private static long modifiedMs(final Path file)
    {
        try
        {
            return Files.getLastModifiedTime(file).toMillis();
        }
        catch (final IOException ex)
        {
            return 0;
        }
    }
}
