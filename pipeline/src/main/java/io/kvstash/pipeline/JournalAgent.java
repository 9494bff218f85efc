package io.kvstash.pipeline;

import com.lmax.disruptor.EventPoller;
import io.kvstash.pipeline.journal.JournalWriter;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

import java.util.concurrent.TimeUnit;

/**
 * The journal's consumer: an {@link EventPoller} with its own sequence, gated behind the stages' decisions,
 * so it sees each event after its outcome is final and the ring cannot lap it. Which thread runs it follows
 * the threading mode: in SHARED mode the {@link PipelineAgent} runs it after the stages in the same duty
 * cycle (the events are still in that core's cache, and no third thread competes for a core with the
 * receiver and a client); in the other modes it has a thread of its own with a backoff idle strategy
 * whatever the wait mode, because the journal is behind the answers and spinning for it buys no latency.
 * <p>
 * A duty cycle appends what is available (at most {@link #MAX_EVENTS_PER_POLL}) to the writer's staging
 * buffer; the buffer is written to the file when it holds {@link #FLUSH_BYTES} or more, or by an idle duty
 * cycle once its oldest record is a millisecond old. The system call is paid once per many records under
 * load, and never between a response and the next request of a client waiting for it (a write per idle
 * cycle would add one to every round trip of a one-in-flight client).
 * <p>
 * A failing journal (disk full) is reported once, counted in ERRORS and switched off; the pipeline goes on.
 * <p>
 * Owner: the thread that runs it, which alone touches the {@link JournalWriter} until the pipeline closes.
 */
final class JournalAgent implements Agent
{
    /** Most events appended by one duty cycle. */
    static final int MAX_EVENTS_PER_POLL = 1024;

    /** Staged bytes that trigger a write while events keep coming. */
    static final int FLUSH_BYTES = 256 * 1024;

    /** Age of the oldest staged record after which an idle duty cycle writes the staging buffer out. */
    static final long FLUSH_INTERVAL_NS = TimeUnit.MILLISECONDS.toNanos(1);

    private final EventPoller<RequestEvent> poller;
    private final JournalWriter writer;
    private final CountedErrorHandler errorHandler;
    private final String roleName;
    private final EventPoller.Handler<RequestEvent> handler = this::onEvent;
    private int count;
    private long firstStagedNs;
    private boolean failed;

    JournalAgent(
        final EventPoller<RequestEvent> poller,
        final JournalWriter writer,
        final CountedErrorHandler errorHandler,
        final String roleName)
    {
        this.poller = poller;
        this.writer = writer;
        this.errorHandler = errorHandler;
        this.roleName = roleName;
    }

    /**
     * The journal thread's idle strategy: spins briefly, then parks up to 100 us, so an idle journal costs
     * about ten thousand short wake-ups a second and a busy one never parks.
     *
     * @return a new strategy.
     */
    static IdleStrategy newIdleStrategy()
    {
        return new BackoffIdleStrategy(10, 100, TimeUnit.MICROSECONDS.toNanos(1), TimeUnit.MICROSECONDS.toNanos(100));
    }

    /**
     * Appends the events the stages have finished; writes the staged records out when {@link #FLUSH_BYTES}
     * are staged, or on an idle duty cycle once the oldest staged record is {@link #FLUSH_INTERVAL_NS} old.
     *
     * @return events appended.
     * @throws Exception never in practice: write failures disable the journal and are reported.
     */
    @Override
    public int doWork() throws Exception
    {
        final int before = writer.stagedBytes();
        count = 0;
        poller.poll(handler);
        final int staged = writer.stagedBytes();
        if (staged >= FLUSH_BYTES)
        {
            flush();
        }
        else if (staged > 0)
        {
            if (0 == before)
            {
                firstStagedNs = System.nanoTime();
            }
            else if (0 == count && System.nanoTime() - firstStagedNs >= FLUSH_INTERVAL_NS)
            {
                flush();
            }
        }
        return count;
    }

    /** {@inheritDoc} */
    @Override
    public String roleName()
    {
        return roleName;
    }

    private boolean onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
    {
        if (!failed)
        {
            try
            {
                writer.append(event.command, event.clientIndex, event.decodeStatus);
            }
            catch (final Throwable ex)
            {
                fail(ex);
            }
        }
        return ++count < MAX_EVENTS_PER_POLL;
    }

    private void flush()
    {
        if (!failed)
        {
            try
            {
                writer.flush();
            }
            catch (final Throwable ex)
            {
                fail(ex);
            }
        }
    }

    private void fail(final Throwable ex)
    {
        failed = true;
        errorHandler.onError(new IllegalStateException("journal disabled after a write failure", ex));
    }
}
