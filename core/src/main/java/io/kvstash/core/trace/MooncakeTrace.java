package io.kvstash.core.trace;

import java.io.BufferedReader;
import java.io.IOException;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * A Mooncake trace: JSON lines {@code {"timestamp", "input_length", "output_length", "hash_ids"}} where one
 * hash id is one chunk (a 512-token block). Parsed without a JSON library: only these four fields are read,
 * other fields are skipped. Immutable once read.
 */
public final class MooncakeTrace
{
    /** Tokens per Mooncake block. */
    public static final int BLOCK_TOKENS = 512;

    private final List<Request> requests;
    private final long chunkReferences;

    private MooncakeTrace(final List<Request> requests)
    {
        this.requests = Collections.unmodifiableList(requests);
        long total = 0;
        for (final Request request : requests)
        {
            total += request.hashIds.length;
        }
        this.chunkReferences = total;
    }

    /**
     * Reads a trace file.
     *
     * @param path JSON lines file.
     * @return the trace.
     * @throws IOException when the file cannot be read.
     * @throws IllegalArgumentException when a line is not a trace record (the message names the file, the line and
     *                                  what is wrong) or the file holds no request.
     */
    public static MooncakeTrace read(final Path path) throws IOException
    {
        if (Files.isDirectory(path))
        {
            throw new IOException(path + " is a directory, not a trace file");
        }
        final List<Request> requests = new ArrayList<>();
        try (BufferedReader reader = Files.newBufferedReader(path, StandardCharsets.UTF_8))
        {
            String line;
            int lineNumber = 0;
            while (null != (line = reader.readLine()))
            {
                lineNumber++;
                if (line.isBlank())
                {
                    continue;
                }
                try
                {
                    requests.add(parse(line));
                }
                catch (final RuntimeException ex)
                {
                    throw new IllegalArgumentException(path + ":" + lineNumber + ": " + ex.getMessage() +
                        " (a line is one JSON object with \"hash_ids\": [integers, ...])", ex);
                }
            }
        }
        catch (final CharacterCodingException ex)
        {
            throw new IOException(path + " is not a text file of JSON lines (a journal of 'kvstash serve --capture' " +
                "replays with --format kvstash)", ex);
        }
        if (requests.isEmpty())
        {
            throw new IllegalArgumentException(path + " holds no requests (an empty trace replays nothing)");
        }
        return new MooncakeTrace(requests);
    }

    /**
     * Parses one JSON line.
     *
     * @param line the record.
     * @return the request.
     */
    public static Request parse(final String line)
    {
        final long timestamp = longField(line, "timestamp", 0);
        final long inputLength = longField(line, "input_length", 0);
        final long outputLength = longField(line, "output_length", 0);
        final int key = line.indexOf("\"hash_ids\"");
        if (key < 0)
        {
            throw new IllegalArgumentException("no \"hash_ids\" field");
        }
        final int open = line.indexOf('[', key);
        final int close = line.indexOf(']', open);
        if (open < 0)
        {
            throw new IllegalArgumentException("\"hash_ids\" is not an array");
        }
        if (close < 0)
        {
            throw new IllegalArgumentException("the \"hash_ids\" array has no closing ']' (is the line cut off?)");
        }
        final String body = line.substring(open + 1, close).trim();
        final long[] ids;
        if (body.isEmpty())
        {
            ids = new long[0];
        }
        else
        {
            final String[] parts = body.split(",");
            ids = new long[parts.length];
            for (int i = 0; i < parts.length; i++)
            {
                final String id = parts[i].trim();
                try
                {
                    ids[i] = Long.parseLong(id);
                }
                catch (final NumberFormatException ex)
                {
                    throw new IllegalArgumentException("hash id " + (i + 1) + " is '" + id + "', not an integer", ex);
                }
            }
        }
        return new Request(timestamp, inputLength, outputLength, ids);
    }

    private static long longField(final String line, final String name, final long missing)
    {
        final int key = line.indexOf("\"" + name + "\"");
        if (key < 0)
        {
            return missing;
        }
        int i = line.indexOf(':', key) + 1;
        while (i < line.length() && Character.isWhitespace(line.charAt(i)))
        {
            i++;
        }
        int end = i;
        while (end < line.length() && isNumberChar(line.charAt(end)))
        {
            end++;
        }
        final String value = line.substring(i, end);
        try
        {
            return (long)Double.parseDouble(value);
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("\"" + name + "\" is not a number", ex);
        }
    }

    /**
     * Characters of a JSON number, including a fraction and an exponent ({@code 1.5e3}).
     */
    private static boolean isNumberChar(final char c)
    {
        return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
    }

    /**
     * Requests in file order.
     *
     * @return unmodifiable list.
     */
    public List<Request> requests()
    {
        return requests;
    }

    /**
     * Total chunk references (sum of hash id counts).
     *
     * @return count.
     */
    public long chunkReferences()
    {
        return chunkReferences;
    }

    /**
     * One trace request.
     */
    public static final class Request
    {
        private final long timestampMs;
        private final long inputLength;
        private final long outputLength;
        private final long[] hashIds;

        /**
         * A request.
         *
         * @param timestampMs  arrival, ms since the start.
         * @param inputLength  prompt tokens.
         * @param outputLength generated tokens.
         * @param hashIds      block ids in prompt order.
         */
        public Request(final long timestampMs, final long inputLength, final long outputLength, final long[] hashIds)
        {
            this.timestampMs = timestampMs;
            this.inputLength = inputLength;
            this.outputLength = outputLength;
            this.hashIds = hashIds;
        }

        /**
         * Arrival time.
         *
         * @return ms since the trace start.
         */
        public long timestampMs()
        {
            return timestampMs;
        }

        /**
         * Prompt length.
         *
         * @return tokens.
         */
        public long inputLength()
        {
            return inputLength;
        }

        /**
         * Output length.
         *
         * @return tokens.
         */
        public long outputLength()
        {
            return outputLength;
        }

        /**
         * Block ids (a copy).
         *
         * @return ids in prompt order.
         */
        public long[] hashIds()
        {
            return hashIds.clone();
        }

        /**
         * Number of blocks.
         *
         * @return count.
         */
        public int blockCount()
        {
            return hashIds.length;
        }

        /**
         * Block id at a position.
         *
         * @param i position.
         * @return id.
         */
        public long hashId(final int i)
        {
            return hashIds[i];
        }
    }
}
