package io.kvstash.pipeline;

import com.lmax.disruptor.ExceptionHandler;
import io.kvstash.wire.Status;

/**
 * Replaces the Disruptor's default fatal handler: an exception thrown by a stage answers its event with
 * SERVER_ERROR (later stages pass it through, publish answers it), is counted and goes to the distinct
 * error log. The stage's processor carries on with the next event.
 */
final class PipelineExceptionHandler implements ExceptionHandler<RequestEvent>
{
    private final CountedErrorHandler errorHandler;

    PipelineExceptionHandler(final CountedErrorHandler errorHandler)
    {
        this.errorHandler = errorHandler;
    }

    @Override
    public void handleEventException(final Throwable ex, final long sequence, final RequestEvent event)
    {
        if (null != event)
        {
            event.command.fail(Status.SERVER_ERROR, "unexpected server error");
        }
        errorHandler.onError(ex);
    }

    @Override
    public void handleOnStartException(final Throwable ex)
    {
        errorHandler.onError(ex);
    }

    @Override
    public void handleOnShutdownException(final Throwable ex)
    {
        errorHandler.onError(ex);
    }
}
