package io.kvstash.server;

import io.kvstash.client.ClientContext;
import io.kvstash.client.ClientResponse;
import io.kvstash.client.KvStashClient;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.process.ShmDirectories;
import io.kvstash.wire.ChunkKeys;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.layout.Dtype;
import io.kvstash.wire.layout.Layout;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Prometheus text endpoint of a real server: what a scrape answers after a client's requests, that every line
 * is in the text exposition format, and that it listens on the loopback address only and stops with the server.
 */
@Timeout(60)
class PrometheusEndpointTest
{
    /** A sample line: metric name, optional labels, value. */
    private static final Pattern SAMPLE =
        Pattern.compile("([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{[a-z_]+=\"[^\"]*\"(,[a-z_]+=\"[^\"]*\")*})? (-?[0-9.]+)");
    private static final Pattern TYPE = Pattern.compile("# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge)");
    private static final Pattern HELP = Pattern.compile("# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+");

    private final HttpClient http = HttpClient.newHttpClient();
    private Path dir;

    @AfterEach
    void cleanup()
    {
        ShmDirectories.delete(dir);
    }

    @Test
    void shouldAnswerTheCountersOfAServerInTheTextFormat() throws Exception
    {
        dir = ShmDirectories.newPath("kvstash-test-prometheus-");
        final ServerContext context = new ServerContext().directory(dir).prometheusPort(0)
            .storeContext(new StoreContext().poolSizeBytes(16L << 20));
        final int port;
        try (KvStashServer server = KvStashServer.launch(context);
            KvStashClient client = KvStashClient.connect(new ClientContext().directory(dir)))
        {
            port = server.prometheusPort();
            assertTrue(port > 0, "bound port " + port);
            final Map<String, Long> fresh = parse(get(port, PrometheusEndpoint.PATH).body());
            assertEquals(16L << 20, fresh.get("kvstash_pool_bytes"), "the capacity is known before any REGISTER");

            assertEquals(Status.OK, client.register(7, Layout.of("m", 1, 0, 1, 16, Dtype.UINT8, true)).status());
            final ClientResponse prepared = client.prepareStore(7, ChunkKeys.ofIds(1, 2));
            assertEquals(Status.OK, prepared.status());
            assertEquals(Status.OK, client.commitStore(7, prepared.transferId()).status());
            assertEquals(2, client.lookup(7, ChunkKeys.ofIds(1, 2, 3), false).hitChunks());
            assertEquals(Status.UNKNOWN_TRANSFER, client.commitStore(7, prepared.transferId()).status());
            // Answered after every request before it has been counted: the pipeline runs them in order.
            assertEquals(Status.OK, client.ping().status());

            final HttpResponse<String> response = get(port, PrometheusEndpoint.PATH);
            assertEquals(200, response.statusCode());
            assertEquals(PrometheusEndpoint.CONTENT_TYPE, response.headers().firstValue("Content-Type").orElse(""));
            final Map<String, Long> samples = parse(response.body());

            assertEquals(1L, samples.get("kvstash_requests_total{type=\"ping\",status=\"ok\"}"));
            assertEquals(1L, samples.get("kvstash_requests_total{type=\"register\",status=\"ok\"}"));
            assertEquals(1L, samples.get("kvstash_requests_total{type=\"commit_store\",status=\"ok\"}"));
            assertEquals(1L, samples.get("kvstash_requests_total{type=\"commit_store\",status=\"unknown_transfer\"}"));
            assertEquals(2L, samples.get("kvstash_stored_chunks_total"));
            assertEquals(2L, samples.get("kvstash_lookup_hit_chunks_total"));
            assertEquals(1L, samples.get("kvstash_lookup_miss_chunks_total"));
            assertEquals(2L, samples.get("kvstash_readable_chunks"));
            assertEquals(1L, samples.get("kvstash_instances"));
            assertEquals(1L, samples.get("kvstash_clients"));
            assertEquals(0L, samples.get("kvstash_errors_total"));
            assertEquals(server.counters().get(CountersDescriptor.FREE_SLOTS), samples.get("kvstash_free_slots"));
            assertEquals(1L, samples.get("kvstash_info{incarnation=\"" + Long.toHexString(context.incarnation()) +
                "\",pid=\"" + ProcessHandle.current().pid() + "\"}"));
            // Responses that never happened have no series.
            assertEquals(null, samples.get("kvstash_requests_total{type=\"ping\",status=\"no_space\"}"));

            assertEquals(404, get(port, "/other").statusCode());
            final HttpResponse<String> post = http.send(HttpRequest.newBuilder(uri(port, PrometheusEndpoint.PATH))
                .POST(HttpRequest.BodyPublishers.ofString("x")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(405, post.statusCode());
        }
        assertThrows(ConnectException.class, () -> get(port, PrometheusEndpoint.PATH), "still listening after close");
    }

    @Test
    void shouldListenOnTheLoopbackAddressOnlyAndServeNoEndpointByDefault() throws Exception
    {
        try (PrometheusEndpoint endpoint = PrometheusEndpoint.start(0, StoreCounters.allocate(), 1, 0, 1L << 20))
        {
            assertTrue(endpoint.address().getAddress().isLoopbackAddress(), endpoint.address().toString());
        }
        dir = ShmDirectories.newPath("kvstash-test-prometheus-off-");
        try (KvStashServer server = KvStashServer.launch(new ServerContext().directory(dir)
            .storeContext(new StoreContext().poolSizeBytes(4L << 20))))
        {
            assertEquals(-1, server.prometheusPort());
        }
    }

    private HttpResponse<String> get(final int port, final String path) throws IOException, InterruptedException
    {
        return http.send(HttpRequest.newBuilder(uri(port, path)).GET().build(), HttpResponse.BodyHandlers.ofString());
    }

    private static URI uri(final int port, final String path)
    {
        return URI.create("http://127.0.0.1:" + port + path);
    }

    /**
     * Checks every line against the exposition format (each metric's HELP and TYPE once, before its samples) and
     * returns the samples by series.
     */
    private static Map<String, Long> parse(final String body)
    {
        assertTrue(body.endsWith("\n"), "the last line ends with a line feed");
        final Map<String, Long> samples = new HashMap<>();
        final Set<String> typed = new HashSet<>();
        final Set<String> helped = new HashSet<>();
        for (final String line : body.split("\n"))
        {
            final Matcher type = TYPE.matcher(line);
            final Matcher help = HELP.matcher(line);
            final Matcher sample = SAMPLE.matcher(line);
            if (type.matches())
            {
                assertTrue(typed.add(type.group(1)), "TYPE twice: " + line);
                assertTrue(helped.contains(type.group(1)), "TYPE before HELP: " + line);
                assertTrue(type.group(1).endsWith("_total") == "counter".equals(type.group(2)),
                    "counters and only counters end in _total: " + line);
            }
            else if (help.matches())
            {
                assertTrue(helped.add(help.group(1)), "HELP twice: " + line);
            }
            else
            {
                assertTrue(sample.matches(), "not a sample: " + line);
                assertTrue(typed.contains(sample.group(1)), "sample before its TYPE: " + line);
                final String series = sample.group(1) + (null == sample.group(2) ? "" : sample.group(2));
                final String value = sample.group(4);
                final long number = value.contains(".") ? (long)Double.parseDouble(value) : Long.parseLong(value);
                assertEquals(null, samples.put(series, number), "series twice: " + line);
            }
        }
        return samples;
    }
}
