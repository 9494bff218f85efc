package io.kvstash.pipeline;

import io.kvstash.core.StoreCounters;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.ErrorHandler;

/**
 * The one path of an unexpected error in the server: counted in {@link CountersDescriptor#ERRORS} (an atomic add,
 * so any thread may report), then handed to the error handler it wraps (the server's distinct error log). Every
 * site that catches an unexpected exception reports it here, so the count and the log never disagree.
 * <p>
 * Thread safe when the wrapped handler is. Not for expected outcomes: those are status codes.
 */
public final class CountedErrorHandler implements ErrorHandler
{
    private final ErrorHandler errorHandler;
    private final StoreCounters counters;

    /**
     * Counts into a set of counters and delegates.
     *
     * @param errorHandler the handler each error is passed to after it is counted.
     * @param counters     the counters whose {@link CountersDescriptor#ERRORS} counts the errors.
     */
    public CountedErrorHandler(final ErrorHandler errorHandler, final StoreCounters counters)
    {
        if (null == errorHandler || null == counters)
        {
            throw new IllegalArgumentException("an error handler and counters are required");
        }
        this.errorHandler = errorHandler;
        this.counters = counters;
    }

    /**
     * Counts the error, then passes it to the wrapped handler.
     *
     * @param throwable the unexpected error.
     */
    @Override
    public void onError(final Throwable throwable)
    {
        counters.addAtomic(CountersDescriptor.ERRORS, 1);
        errorHandler.onError(throwable);
    }

    /**
     * The handler errors are passed to after they are counted, for errors that must not be counted again.
     *
     * @return the wrapped handler.
     */
    public ErrorHandler errorHandler()
    {
        return errorHandler;
    }
}
