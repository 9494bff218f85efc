package io.kvstash.perf.bench;

import java.io.IOException;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The facts of the machine a bench ran on, printed with its results: cores, CPU model, memory, kernel,
 * clock source, load, the JVM and its flags.
 */
final class MachineFacts
{
    private MachineFacts()
    {
    }

    /**
     * Collects the facts of this machine and JVM.
     *
     * @return ordered facts.
     */
    static Map<String, Object> collect()
    {
        final Map<String, Object> facts = new LinkedHashMap<>();
        facts.put("cores", Runtime.getRuntime().availableProcessors());
        facts.put("cpu_model", firstValue(Path.of("/proc/cpuinfo"), "model name"));
        facts.put("memory_gib", round1(kib(firstValue(Path.of("/proc/meminfo"), "MemTotal")) / (1024.0 * 1024.0)));
        facts.put("kernel", read(Path.of("/proc/sys/kernel/osrelease")));
        facts.put("clock_source", read(Path.of("/sys/devices/system/clocksource/clocksource0/current_clocksource")));
        facts.put("load_average", loadAverage());
        facts.put("os", System.getProperty("os.name") + " " + System.getProperty("os.arch"));
        facts.put("jvm", System.getProperty("java.vm.name") + " " + System.getProperty("java.runtime.version"));
        facts.put("jvm_flags", String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments()));
        final List<String> gcs = new ArrayList<>();
        for (final GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans())
        {
            gcs.add(gc.getName());
        }
        facts.put("gc", String.join(", ", gcs));
        facts.put("shm", Files.isDirectory(Path.of("/dev/shm")) ? "/dev/shm" : "none");
        return facts;
    }

    /**
     * The 1-minute load average now.
     *
     * @return load, or -1 when unknown.
     */
    static double loadAverage()
    {
        final String text = read(Path.of("/proc/loadavg"));
        try
        {
            return Double.parseDouble(text.split("\\s+")[0]);
        }
        catch (final RuntimeException ex)
        {
            return -1;
        }
    }

    private static double round1(final double v)
    {
        return Math.round(v * 10) / 10.0;
    }

    private static long kib(final String value)
    {
        try
        {
            return Long.parseLong(value.replace("kB", "").trim());
        }
        catch (final RuntimeException ex)
        {
            return 0;
        }
    }

    private static String firstValue(final Path file, final String key)
    {
        try
        {
            for (final String line : Files.readAllLines(file))
            {
                if (line.startsWith(key))
                {
                    final int colon = line.indexOf(':');
                    return colon < 0 ? "" : line.substring(colon + 1).trim();
                }
            }
        }
        catch (final IOException ignore)
        {
            // Not Linux: the fact is unknown.
        }
        return "unknown";
    }

    private static String read(final Path file)
    {
        try
        {
            return Files.readString(file).trim();
        }
        catch (final IOException ex)
        {
            return "unknown";
        }
    }
}
