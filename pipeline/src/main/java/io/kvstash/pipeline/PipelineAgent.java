package io.kvstash.pipeline;

import com.lmax.disruptor.EventPoller;
import org.agrona.concurrent.Agent;

/**
 * The pipeline as an Agrona {@link Agent} (SHARED threading mode): each duty cycle polls the ring buffer
 * and runs every stage of up to {@link #MAX_EVENTS_PER_POLL} events on the calling thread, so the receiver
 * and the pipeline can share one thread with no hand-off between them.
 */
public final class PipelineAgent implements Agent
{
    /** Most events processed by one duty cycle, so a busy ring never starves the agents composed with it. */
    public static final int MAX_EVENTS_PER_POLL = 256;

    private final EventPoller<RequestEvent> poller;
    private final Handler handler;
    private final JournalAgent journal;
    private final String roleName;

    PipelineAgent(
        final EventPoller<RequestEvent> poller,
        final Stages.Inline stages,
        final JournalAgent journal,
        final String roleName)
    {
        this.poller = poller;
        this.handler = new Handler(stages);
        this.journal = journal;
        this.roleName = roleName;
    }

    /**
     * Runs the stages of the events available now, at most {@link #MAX_EVENTS_PER_POLL}, then the journal
     * (when there is one) over the events the stages have finished.
     *
     * @return events processed by the stages and the journal.
     * @throws Exception never in practice: stage exceptions are answered inside the stages.
     */
    @Override
    public int doWork() throws Exception
    {
        handler.count = 0;
        poller.poll(handler);
        return null == journal ? handler.count : handler.count + journal.doWork();
    }

    /** {@inheritDoc} */
    @Override
    public String roleName()
    {
        return roleName;
    }

    private static final class Handler implements EventPoller.Handler<RequestEvent>
    {
        private final Stages.Inline stages;
        private int count;

        Handler(final Stages.Inline stages)
        {
            this.stages = stages;
        }

        @Override
        public boolean onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
        {
            // A poll stopped at its limit ends the duty cycle's batch too.
            final boolean more = ++count < MAX_EVENTS_PER_POLL;
            stages.onEvent(event, sequence, endOfBatch || !more);
            return more;
        }
    }
}
