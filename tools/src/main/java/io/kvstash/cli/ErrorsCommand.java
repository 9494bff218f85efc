package io.kvstash.cli;

import io.kvstash.tools.ControlFileReader;
import io.kvstash.tools.Json;
import io.kvstash.wire.file.ControlFileDescriptor;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code kvstash errors}: prints the distinct-error log (Agrona {@code ErrorLogReader}) of the server's
 * control file and of every {@code dead-control-*} file in the directory (the control files of dead servers
 * a later server kept), each error with its count and first and last time.
 */
@Command(name = "errors", mixinStandardHelpOptions = true, sortOptions = false,
    description = {
        "Prints the distinct-error logs of the server's control file and of dead servers' dead-control-* files.",
        "Exit code 1 when the directory holds no control file." })
public final class ErrorsCommand implements Callable<Integer>
{
    @Spec
    CommandSpec spec;

    @Mixin
    DirectoryOption directory;

    @Option(names = "--json", description = "Print one JSON object: the files and their errors.")
    boolean json;

    /**
     * A command with default options (picocli sets the fields).
     */
    public ErrorsCommand()
    {
    }

    /**
     * Prints the error logs.
     *
     * @return 0, or 1 when there is no control file.
     * @throws Exception when the directory cannot be read.
     */
    @Override
    public Integer call() throws Exception
    {
        final PrintWriter out = spec.commandLine().getOut();
        final PrintWriter err = spec.commandLine().getErr();
        final Path dir = directory.orDefault();
        final List<Path> files = controlFiles(dir);
        if (files.isEmpty())
        {
            err.println("kvstash errors: no control files in " + dir + " (no server has run there, or they all " +
                "shut down cleanly)");
            err.flush();
            return 1;
        }
        final long nowMs = System.currentTimeMillis();
        final List<Object> reports = new ArrayList<>();
        for (final Path file : files)
        {
            final Map<String, Object> report = read(file, nowMs);
            reports.add(report);
            if (!json)
            {
                print(report, out);
            }
        }
        if (json)
        {
            final Map<String, Object> map = new LinkedHashMap<>();
            map.put("dir", dir.toAbsolutePath().toString());
            map.put("files", reports);
            out.println(Json.write(map));
        }
        out.flush();
        return 0;
    }

    /**
     * The control file of a directory first, then its dead-control files, newest first.
     *
     * @param dir server directory.
     * @return existing files.
     * @throws IOException when the directory cannot be listed.
     */
    static List<Path> controlFiles(final Path dir) throws IOException
    {
        final List<Path> files = new ArrayList<>();
        if (!Files.isDirectory(dir))
        {
            return files;
        }
        final Path control = dir.resolve(ControlFileDescriptor.FILE_NAME);
        if (Files.isRegularFile(control))
        {
            files.add(control);
        }
        final List<Path> dead = new ArrayList<>();
        try (DirectoryStream<Path> stream =
            Files.newDirectoryStream(dir, ControlFileDescriptor.DEAD_CONTROL_PREFIX + "*"))
        {
            for (final Path file : stream)
            {
                dead.add(file);
            }
        }
        dead.sort(Comparator.comparingLong(ErrorsCommand::modifiedMs).reversed());
        files.addAll(dead);
        return files;
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

    private static Map<String, Object> read(final Path file, final long nowMs)
    {
        final Map<String, Object> report = new LinkedHashMap<>();
        report.put("file", file.toAbsolutePath().toString());
        try (ControlFileReader reader = ControlFileReader.open(file))
        {
            report.put("pid", reader.pid());
            report.put("incarnation", Long.toHexString(reader.incarnation()));
            report.put("state", reader.stateName());
            report.put("alive", reader.isAlive(nowMs));
            final List<Object> errors = new ArrayList<>();
            reader.readErrors((count, firstMs, lastMs, text) ->
            {
                final Map<String, Object> error = new LinkedHashMap<>();
                error.put("count", count);
                error.put("first", Instant.ofEpochMilli(firstMs).toString());
                error.put("last", Instant.ofEpochMilli(lastMs).toString());
                error.put("error", text);
                errors.add(error);
            });
            report.put("errors", errors);
        }
        catch (final IOException | IllegalArgumentException ex)
        {
            report.put("unreadable", ex.getMessage());
        }
        return report;
    }

    private static void print(final Map<String, Object> report, final PrintWriter out)
    {
        out.print(report.get("file"));
        if (report.containsKey("unreadable"))
        {
            out.println(": unreadable: " + report.get("unreadable"));
            return;
        }
        final List<?> errors = (List<?>)report.get("errors");
        out.println(" (pid " + report.get("pid") + ", incarnation " + report.get("incarnation") + ", " +
            report.get("state") + ", " + (Boolean.TRUE.equals(report.get("alive")) ? "alive" : "not alive") + "): " +
            errors.size() + " distinct error" + (1 == errors.size() ? "" : "s"));
        for (final Object o : errors)
        {
            final Map<?, ?> error = (Map<?, ?>)o;
            out.println("  " + error.get("count") + " time(s), first " + error.get("first") + ", last " +
                error.get("last"));
            for (final String line : String.valueOf(error.get("error")).split("\\R"))
            {
                out.println("    " + line);
            }
        }
    }
}
