package io.kvstash.server;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.kvstash.core.StoreCounters;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The optional Prometheus text endpoint: {@code GET /metrics} on the loopback address answers
 * the server's counters in the text exposition format 0.0.4. Gauges keep their names ({@code kvstash_free_slots});
 * everything that only grows is a counter with the suffix {@code _total}; responses are one series per request
 * type and status that has happened ({@code kvstash_requests_total{type="lookup",status="ok"}}).
 * <p>
 * Owner: a thread of its own (the JDK's {@link HttpServer} with one daemon thread), idle between scrapes. A
 * scrape reads the counters with acquire loads, as {@code kvstash stat} reads them from the mapped file, and
 * never touches a request thread; it allocates its answer, off the request path.
 */
public final class PrometheusEndpoint implements AutoCloseable
{
    /** The one path answered. */
    public static final String PATH = "/metrics";

    /** Content type of the text exposition format. */
    public static final String CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

    private final HttpServer http;
    private final ExecutorService executor;
    private final StoreCounters counters;
    private final String info;
    private final double startTimeSeconds;

    private PrometheusEndpoint(
        final HttpServer http,
        final StoreCounters counters,
        final long incarnation,
        final long startTimeMs,
        final long poolBytes)
    {
        this.http = http;
        this.counters = counters;
        // The pool's size is known from the start, before a layout cuts it into slots (slot_capacity is 0 until then).
        this.info = "kvstash_info{incarnation=\"" + Long.toHexString(incarnation) + "\",pid=\"" +
            ProcessHandle.current().pid() + "\"} 1\n" +
            "# HELP kvstash_pool_bytes Bytes of the pool's data region, from the start.\n" +
            "# TYPE kvstash_pool_bytes gauge\n" +
            "kvstash_pool_bytes " + poolBytes + "\n";
        this.startTimeSeconds = startTimeMs / 1000.0;
        executor = Executors.newSingleThreadExecutor(runnable ->
        {
            final Thread thread = new Thread(runnable, "kvstash-prometheus");
            thread.setDaemon(true);
            return thread;
        });
        http.setExecutor(executor);
        http.createContext("/", this::handle);
        http.start();
    }

    /**
     * Starts the endpoint on the loopback address.
     *
     * @param port        TCP port; 0 picks a free one ({@link #port()} says which).
     * @param counters    the server's counters.
     * @param incarnation the server's incarnation, a label of {@code kvstash_info}.
     * @param startTimeMs the server's start, epoch milliseconds.
     * @param poolBytes   bytes of the pool's data region ({@code kvstash_pool_bytes}).
     * @return the running endpoint.
     * @throws IOException when the port cannot be bound.
     */
    public static PrometheusEndpoint start(
        final int port,
        final StoreCounters counters,
        final long incarnation,
        final long startTimeMs,
        final long poolBytes)
        throws IOException
    {
        return start(bind(port), counters, incarnation, startTimeMs, poolBytes);
    }

    /**
     * Binds the endpoint's port on the loopback address without answering yet, so that a server can refuse a
     * taken port before it prepares anything.
     *
     * @param port TCP port; 0 picks a free one.
     * @return the bound, stopped HTTP server; pass it to {@link #start(HttpServer, StoreCounters, long, long, long)}
     * or stop it.
     * @throws IOException when the port cannot be bound; the message names the port.
     */
    public static HttpServer bind(final int port) throws IOException
    {
        try
        {
            return HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 0);
        }
        catch (final java.net.BindException ex)
        {
            throw new IOException("--prometheus-port " + port + ": 127.0.0.1:" + port + " is not free (" +
                ex.getMessage() + "): give another port, or 0 for any free one", ex);
        }
    }

    /**
     * Starts the endpoint on a port {@link #bind(int)} bound.
     *
     * @param http        the bound HTTP server.
     * @param counters    the server's counters.
     * @param incarnation the server's incarnation, a label of {@code kvstash_info}.
     * @param startTimeMs the server's start, epoch milliseconds.
     * @param poolBytes   bytes of the pool's data region ({@code kvstash_pool_bytes}).
     * @return the running endpoint.
     */
    public static PrometheusEndpoint start(
        final HttpServer http,
        final StoreCounters counters,
        final long incarnation,
        final long startTimeMs,
        final long poolBytes)
    {
        return new PrometheusEndpoint(http, counters, incarnation, startTimeMs, poolBytes);
    }

    /**
     * The address it listens on.
     *
     * @return loopback address and port.
     */
    public InetSocketAddress address()
    {
        return http.getAddress();
    }

    /**
     * The port it listens on.
     *
     * @return port.
     */
    public int port()
    {
        return http.getAddress().getPort();
    }

    /**
     * The exposition text of the counters now.
     *
     * @return text in the Prometheus text format 0.0.4.
     */
    public String render()
    {
        final StringBuilder out = new StringBuilder(8 * 1024);
        out.append("# HELP kvstash_info The server's incarnation and process id.\n");
        out.append("# TYPE kvstash_info gauge\n").append(info);
        out.append("# HELP kvstash_start_time_seconds When the server started, seconds since the epoch.\n");
        out.append("# TYPE kvstash_start_time_seconds gauge\n");
        out.append("kvstash_start_time_seconds ").append(String.format(Locale.ROOT, "%.3f", startTimeSeconds))
            .append('\n');
        for (int id = 0; id < CountersDescriptor.COUNT; id++)
        {
            final String help = CountersDescriptor.description(id);
            if (null == help)
            {
                continue;
            }
            final boolean gauge = CountersDescriptor.isGauge(id);
            final String name = "kvstash_" + CountersDescriptor.name(id).replace('.', '_') + (gauge ? "" : "_total");
            out.append("# HELP ").append(name).append(' ').append(help).append('\n');
            out.append("# TYPE ").append(name).append(gauge ? " gauge\n" : " counter\n");
            out.append(name).append(' ').append(counters.get(id)).append('\n');
        }
        out.append("# HELP kvstash_requests_total Responses by request type and status.\n");
        out.append("# TYPE kvstash_requests_total counter\n");
        for (int type = 0; type < RequestType.COUNT; type++)
        {
            for (int status = 0; status < Status.COUNT; status++)
            {
                final long value = counters.get(CountersDescriptor.requestId(type, status));
                if (0 != value)
                {
                    out.append("kvstash_requests_total{type=\"").append(RequestType.name(type).toLowerCase(Locale.ROOT))
                        .append("\",status=\"").append(Status.name(status).toLowerCase(Locale.ROOT)).append("\"} ")
                        .append(value).append('\n');
                }
            }
        }
        return out.toString();
    }

    /**
     * Stops answering and ends the endpoint's thread.
     */
    @Override
    public void close()
    {
        http.stop(0);
        executor.shutdownNow();
    }

    private void handle(final HttpExchange exchange) throws IOException
    {
        try (exchange)
        {
            final String method = exchange.getRequestMethod();
            if (!PATH.equals(exchange.getRequestURI().getPath()))
            {
                exchange.sendResponseHeaders(404, -1);
                return;
            }
            if (!"GET".equals(method) && !"HEAD".equals(method))
            {
                exchange.getResponseHeaders().set("Allow", "GET, HEAD");
                exchange.sendResponseHeaders(405, -1);
                return;
            }
            final byte[] body = render().getBytes(StandardCharsets.UTF_8);
            exchange.getResponseHeaders().set("Content-Type", CONTENT_TYPE);
            if ("HEAD".equals(method))
            {
                exchange.sendResponseHeaders(200, -1);
                return;
            }
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody())
            {
                out.write(body);
            }
        }
    }
}
