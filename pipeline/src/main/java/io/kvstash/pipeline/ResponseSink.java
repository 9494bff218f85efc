package io.kvstash.pipeline;

/**
 * Where the publish stage hands each finished request: the IPC layer writes it into the client's response
 * ring; tests collect it. Called on the publish stage's thread, once per request, in sequence order.
 * Implementations must not block the pipeline: a client that cannot take its response must be handled
 * inside the sink (dropped and counted), never waited for.
 */
@FunctionalInterface
public interface ResponseSink
{
    /**
     * Takes one finished request. The event is only valid during the call.
     *
     * @param event the request with its outcome.
     */
    void onResponse(RequestEvent event);
}
