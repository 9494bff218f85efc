package io.kvstash.cli;

import io.kvstash.wire.file.SecureDirectory;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/**
 * The {@code --dir} option of the commands that work on a running server's directory ({@code serve}, {@code stat},
 * {@code errors}, {@code worker}): the shared-memory directory, by default the user's own under {@code /dev/shm}.
 */
public final class DirectoryOption
{
    @Option(names = "--dir", paramLabel = "DIR",
        description = "Shared-memory directory (default: /dev/shm/kvstash-$USER).")
    Path directory;

    /**
     * The option with its default.
     */
    public DirectoryOption()
    {
    }

    /**
     * The directory given, made absolute, or null when the option was left out.
     *
     * @return path or null.
     */
    Path orNull()
    {
        return null == directory ? null : directory.toAbsolutePath();
    }

    /**
     * The directory given, or the default one when the option was left out.
     *
     * @return path.
     */
    Path orDefault()
    {
        return null == directory ? SecureDirectory.defaultDirectory() : directory;
    }
}
