package io.kvstash.cli;

import io.kvstash.core.EvictionPolicy;
import io.kvstash.pipeline.ThreadingMode;
import io.kvstash.pipeline.WaitMode;
import io.kvstash.server.Sizes;
import picocli.CommandLine;

import java.util.Locale;

/**
 * picocli converters of the kvstash options: sizes ({@code 1g}), durations ({@code 30s}) and the server's
 * threading and wait modes spelled as on the command line ({@code thread-per-stage}, {@code busy-spin}).
 * A value that does not convert is a usage error (exit code 2) naming the option.
 */
public final class Converters
{
    private Converters()
    {
    }

    /**
     * A size in bytes with an optional k, m, g or t suffix (powers of 1024).
     */
    public static final class Size implements CommandLine.ITypeConverter<Long>
    {
        /**
         * A converter.
         */
        public Size()
        {
        }

        /**
         * Converts a size.
         *
         * @param value option value.
         * @return bytes.
         */
        @Override
        public Long convert(final String value)
        {
            try
            {
                return Sizes.parseSize(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }

    /**
     * A duration with a unit (ns, us, ms, s, m, h), converted to nanoseconds.
     */
    public static final class DurationNs implements CommandLine.ITypeConverter<Long>
    {
        /**
         * A converter.
         */
        public DurationNs()
        {
        }

        /**
         * Converts a duration.
         *
         * @param value option value.
         * @return nanoseconds.
         */
        @Override
        public Long convert(final String value)
        {
            try
            {
                return Sizes.parseDurationNs(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }

    /**
     * A threading mode: shared, dedicated or thread-per-stage.
     */
    public static final class Threading implements CommandLine.ITypeConverter<ThreadingMode>
    {
        /**
         * A converter.
         */
        public Threading()
        {
        }

        /**
         * Converts a threading mode name.
         *
         * @param value option value.
         * @return the mode.
         */
        @Override
        public ThreadingMode convert(final String value)
        {
            try
            {
                return ThreadingMode.valueOf(value.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(
                    "'" + value + "' is not a threading mode (shared, dedicated or thread-per-stage)");
            }
        }
    }

    /**
     * An eviction policy by name: lru, chain, slru, slru-admit, or default (the measured best).
     */
    public static final class Eviction implements CommandLine.ITypeConverter<EvictionPolicy>
    {
        /**
         * A converter.
         */
        public Eviction()
        {
        }

        /**
         * Converts a policy name.
         *
         * @param value option value.
         * @return the policy.
         */
        @Override
        public EvictionPolicy convert(final String value)
        {
            try
            {
                return EvictionPolicy.ofName(value);
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }

    /**
     * A wait mode: busy-spin, yielding, backoff or blocking.
     */
    public static final class Wait implements CommandLine.ITypeConverter<WaitMode>
    {
        /**
         * A converter.
         */
        public Wait()
        {
        }

        /**
         * Converts a wait mode name.
         *
         * @param value option value.
         * @return the mode.
         */
        @Override
        public WaitMode convert(final String value)
        {
            try
            {
                return WaitMode.parse(value.toUpperCase(Locale.ROOT));
            }
            catch (final IllegalArgumentException ex)
            {
                throw new CommandLine.TypeConversionException(
                    "'" + value + "' is not a wait mode (busy-spin, yielding, backoff or blocking)");
            }
        }
    }

    /**
     * Name of a mode as the command line spells it.
     *
     * @param mode an enum constant.
     * @return lower case with dashes.
     */
    public static String spell(final Enum<?> mode)
    {
        return mode.name().toLowerCase(Locale.ROOT).replace('_', '-');
    }
}
