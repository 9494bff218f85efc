package io.kvstash.server;

import java.util.Locale;
import java.util.concurrent.TimeUnit;

/**
 * Parses and prints the sizes and durations of the command line: sizes in bytes with an optional binary
 * suffix ({@code 4096}, {@code 64k}, {@code 512m}, {@code 1g}, {@code 1GiB}: k, m, g and t are powers of
 * 1024), durations with a mandatory unit ({@code 500ms}, {@code 30s}, {@code 2m}, {@code 100us}).
 */
public final class Sizes
{
    private Sizes()
    {
    }

    /**
     * Parses a size.
     *
     * @param text digits with an optional suffix k, m, g or t (also kb/kib, ...), case-insensitive.
     * @return bytes.
     * @throws IllegalArgumentException when the text is not a size or overflows.
     */
    public static long parseSize(final String text)
    {
        final String s = text.trim().toLowerCase(Locale.ROOT);
        int end = 0;
        while (end < s.length() && Character.isDigit(s.charAt(end)))
        {
            end++;
        }
        if (0 == end)
        {
            throw new IllegalArgumentException("not a size: '" + text + "' (examples: 4096, 64k, 512m, 1g)");
        }
        final long value;
        try
        {
            value = Long.parseLong(s.substring(0, end));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("size out of range: '" + text + "'");
        }
        final String suffix = s.substring(end).trim();
        final int shift;
        switch (suffix)
        {
            case "":
            case "b":
                shift = 0;
                break;
            case "k":
            case "kb":
            case "kib":
                shift = 10;
                break;
            case "m":
            case "mb":
            case "mib":
                shift = 20;
                break;
            case "g":
            case "gb":
            case "gib":
                shift = 30;
                break;
            case "t":
            case "tb":
            case "tib":
                shift = 40;
                break;
            default:
                throw new IllegalArgumentException("unknown size suffix in '" + text + "' (use k, m, g or t)");
        }
        if (value > (Long.MAX_VALUE >> shift))
        {
            throw new IllegalArgumentException("size out of range: '" + text + "'");
        }
        return value << shift;
    }

    /**
     * Parses a duration.
     *
     * @param text digits and a unit: ns, us, ms, s, m or h.
     * @return nanoseconds.
     * @throws IllegalArgumentException when the text is not a duration with a unit, or overflows.
     */
    public static long parseDurationNs(final String text)
    {
        final String s = text.trim().toLowerCase(Locale.ROOT);
        int end = 0;
        while (end < s.length() && Character.isDigit(s.charAt(end)))
        {
            end++;
        }
        if (0 == end)
        {
            throw new IllegalArgumentException("not a duration: '" + text + "' (examples: 500ms, 30s, 2m)");
        }
        final TimeUnit unit;
        switch (s.substring(end).trim())
        {
            case "ns":
                unit = TimeUnit.NANOSECONDS;
                break;
            case "us":
                unit = TimeUnit.MICROSECONDS;
                break;
            case "ms":
                unit = TimeUnit.MILLISECONDS;
                break;
            case "s":
                unit = TimeUnit.SECONDS;
                break;
            case "m":
            case "min":
                unit = TimeUnit.MINUTES;
                break;
            case "h":
                unit = TimeUnit.HOURS;
                break;
            case "":
                throw new IllegalArgumentException("duration '" + text + "' needs a unit: ns, us, ms, s, m or h");
            default:
                throw new IllegalArgumentException("unknown duration unit in '" + text + "' (use ns, us, ms, s, m or h)");
        }
        final long value;
        try
        {
            value = Long.parseLong(s.substring(0, end));
        }
        catch (final NumberFormatException ex)
        {
            throw new IllegalArgumentException("duration out of range: '" + text + "'");
        }
        final long ns = unit.toNanos(value);
        if (Long.MAX_VALUE == ns)
        {
            throw new IllegalArgumentException("duration out of range: '" + text + "'");
        }
        return ns;
    }

    /**
     * Prints a byte count with a binary unit: {@code 1 GiB}, {@code 64 KiB}, {@code 1.50 MiB}, {@code 100 B}.
     *
     * @param bytes byte count.
     * @return readable text.
     */
    public static String formatSize(final long bytes)
    {
        final String[] units = { "B", "KiB", "MiB", "GiB", "TiB" };
        int u = 0;
        double value = bytes;
        while (u < units.length - 1 && Math.abs(value) >= 1024)
        {
            value /= 1024;
            u++;
        }
        if (value == Math.rint(value))
        {
            return String.format(Locale.ROOT, "%d %s", (long)value, units[u]);
        }
        return String.format(Locale.ROOT, "%.2f %s", value, units[u]);
    }

    /**
     * Prints a duration with the largest unit that keeps it whole: {@code 30s}, {@code 500ms}, {@code 1500us}.
     *
     * @param ns nanoseconds.
     * @return text that {@link #parseDurationNs(String)} reads back to the same value.
     */
    public static String formatDuration(final long ns)
    {
        final long[] factors = { TimeUnit.HOURS.toNanos(1), TimeUnit.MINUTES.toNanos(1), TimeUnit.SECONDS.toNanos(1),
            TimeUnit.MILLISECONDS.toNanos(1), TimeUnit.MICROSECONDS.toNanos(1), 1 };
        final String[] names = { "h", "m", "s", "ms", "us", "ns" };
        for (int i = 0; i < factors.length; i++)
        {
            if (0 != ns && 0 == ns % factors[i])
            {
                return ns / factors[i] + names[i];
            }
        }
        return ns + "ns";
    }
}
