package io.kvstash.server;

import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.CountedErrorHandler;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.errors.DistinctErrorLog;

/**
 * The server's one error path: every unexpected error of the server's own agents (the receiver, the client
 * conductor, the latency log) and of their runners goes to {@link #counted} handler, which adds one to
 * {@link CountersDescriptor#ERRORS} and records the error in the distinct error log of the control file (read by
 * {@code kvstash errors}). Expected outcomes are status codes and never come here.
 * <p>
 * The pipeline is given the {@link #logging} handler alone: its stages count ERRORS where they catch.
 */
final class ServerErrors
{
    private ServerErrors()
    {
    }

    /**
     * A handler that records each error in the distinct error log, or prints it when the log is full.
     *
     * @param errorLog the control file's distinct error log.
     * @return a handler that logs and does not count; safe from any thread.
     */
    static ErrorHandler logging(final DistinctErrorLog errorLog)
    {
        return (throwable) ->
        {
            if (!errorLog.record(throwable))
            {
                throwable.printStackTrace();
            }
        };
    }

    /**
     * A handler that counts each error in {@link CountersDescriptor#ERRORS}, then hands it to {@code logging}: the
     * pipeline's {@link CountedErrorHandler}, so the server and the pipeline count errors the same way.
     *
     * @param logging  the handler that logs.
     * @param counters the server's counters.
     * @return a handler that counts and logs; safe from any thread.
     */
    static ErrorHandler counted(final ErrorHandler logging, final StoreCounters counters)
    {
        return new CountedErrorHandler(logging, counters);
    }
}
