package io.kvstash.pipeline;

import com.lmax.disruptor.BatchEventProcessor;
import com.lmax.disruptor.BatchEventProcessorBuilder;
import com.lmax.disruptor.EventHandler;
import com.lmax.disruptor.EventPoller;
import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.Sequence;
import com.lmax.disruptor.SequenceBarrier;
import com.lmax.disruptor.dsl.ProducerType;
import io.kvstash.core.DataMover;
import io.kvstash.core.SlotAssigner;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.book.ChunkBook;
import io.kvstash.pipeline.journal.JournalWriter;
import io.kvstash.pipeline.latency.LatencyRecorders;
import io.kvstash.pipeline.latency.LatencySampling;
import io.kvstash.wire.RequestType;
import org.agrona.concurrent.AgentRunner;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The request pipeline: a Disruptor ring buffer of pre-allocated {@link RequestEvent}s passing the stages
 * reserve, commit (the slot check, then the data effects) and publish, with the journal beside them as a consumer of its own
 * ({@link JournalAgent}). The threading mode maps the stages onto threads ({@link ThreadingMode}); outcomes
 * are the same in every mode because each stage sees the events in sequence order and owns its state alone.
 * <p>
 * Producers claim a sequence, fill the event and publish it ({@link #tryClaim()}, {@link #event(long)},
 * {@link #publish(long)}): no allocation, no translator objects. The producer stamps
 * {@link StoreCommand#timestampNs} with the pipeline's clock; leases are judged against it. It may stamp
 * an event from a recent reading shared with others and mark it {@link RequestEvent#STAMP_COARSE}, except
 * the events whose stages are timed ({@link #isStageTimed(long)}). Lease expiry
 * runs inside the pipeline as SWEEP events ({@link #tryPublishSweep(long)}), never from another thread.
 */
public final class Pipeline implements AutoCloseable
{
    private static final long DRAIN_TIMEOUT_NS = TimeUnit.SECONDS.toNanos(10);

    private final PipelineContext context;
    private final RingBuffer<RequestEvent> ring;
    private final ChunkBook book;
    private final LatencyRecorders latency = new LatencyRecorders();
    private final LatencySampling sampling;
    private Stages.Publish sharedPublish;
    private final JournalWriter journalWriter;
    private final List<BatchEventProcessor<RequestEvent>> processors = new ArrayList<>();
    private final List<String> processorNames = new ArrayList<>();
    private final List<Thread> threads = new ArrayList<>();
    private final PipelineAgent agent;
    private final JournalAgent journalAgent;
    private AgentRunner journalRunner;
    private boolean started;
    private boolean closed;

    /**
     * Builds the pipeline; {@link #start()} starts its threads.
     *
     * @param context configuration, concluded here if it was not.
     */
    public Pipeline(final PipelineContext context)
    {
        this.context = context.conclude();
        sampling = new LatencySampling(this.context.latencyEnabled(), this.context.stageSampleMask());
        final StoreContext storeContext = context.storeContext();
        final StoreCounters counters = context.counters();
        ring = RingBuffer.create(
            context.multiProducer() ? ProducerType.MULTI : ProducerType.SINGLE,
            () -> new RequestEvent(storeContext),
            context.ringSize(),
            context.waitMode().newWaitStrategy());

        book = new ChunkBook(storeContext, counters, context.slotTable());
        final Stages.Commit commit = new Stages.Commit(
            new SlotAssigner(storeContext), new DataMover(storeContext, context.pool(), counters), context.clock());
        journalWriter = openJournal(context);
        final Stages.Publish publish = new Stages.Publish(context.responseSink(), counters, latency,
            context.clock(), sampling, context.countedErrorHandler());
        final PipelineExceptionHandler exceptionHandler = new PipelineExceptionHandler(context.countedErrorHandler());

        switch (context.threadingMode())
        {
            case SHARED:
            {
                final Stages.Inline inline = newInline(book, commit, publish);
                sharedPublish = publish;
                final EventPoller<RequestEvent> poller = ring.newPoller();
                ring.addGatingSequences(poller.getSequence());
                // The journal follows the stages in the same duty cycle, on the same thread.
                journalAgent = newJournalAgent(poller.getSequence());
                agent = new PipelineAgent(poller, inline, journalAgent, context.threadNamePrefix() + "pipeline");
                break;
            }
            case DEDICATED:
            {
                agent = null;
                final Stages.Inline inline = newInline(book, commit, publish);
                final BatchEventProcessor<RequestEvent> processor = processor(ring.newBarrier(), inline);
                processor.setExceptionHandler(exceptionHandler);
                addProcessor(processor, "pipeline");
                ring.addGatingSequences(processor.getSequence());
                journalAgent = newJournalAgent(processor.getSequence());
                break;
            }
            case THREAD_PER_STAGE:
            default:
            {
                agent = null;
                final Stages.Reserve reserve = new Stages.Reserve(book, context.clock(), sampling);
                final BatchEventProcessor<RequestEvent> reserveProcessor = processor(ring.newBarrier(), reserve);
                final BatchEventProcessor<RequestEvent> commitProcessor = processor(
                    ring.newBarrier(reserveProcessor.getSequence()), commit);
                final SequenceBarrier afterCommit = ring.newBarrier(commitProcessor.getSequence());
                final BatchEventProcessor<RequestEvent> publishProcessor = processor(afterCommit, publish);
                addProcessor(reserveProcessor, "reserve");
                addProcessor(commitProcessor, "commit");
                addProcessor(publishProcessor, "publish");
                final List<Sequence> gating = new ArrayList<>();
                gating.add(publishProcessor.getSequence());
                journalAgent = newJournalAgent(commitProcessor.getSequence());
                for (final BatchEventProcessor<RequestEvent> processor : processors)
                {
                    processor.setExceptionHandler(exceptionHandler);
                }
                ring.addGatingSequences(gating.toArray(new Sequence[0]));
                break;
            }
        }
    }

    /**
     * The journal's agent behind a sequence (the stages' decisions), gating the ring, or null without a
     * journal.
     */
    private JournalAgent newJournalAgent(final Sequence behind)
    {
        if (null == journalWriter)
        {
            return null;
        }
        final EventPoller<RequestEvent> poller = ring.newPoller(behind);
        ring.addGatingSequences(poller.getSequence());
        return new JournalAgent(
            poller, journalWriter, context.countedErrorHandler(), context.threadNamePrefix() + "journal");
    }

    private Stages.Inline newInline(final ChunkBook book, final Stages.Commit commit, final Stages.Publish publish)
    {
        return new Stages.Inline(book, commit, publish, context.clock(), sampling, context.countedErrorHandler());
    }

    private BatchEventProcessor<RequestEvent> processor(
        final SequenceBarrier barrier, final EventHandler<RequestEvent> handler)
    {
        return new BatchEventProcessorBuilder().build(ring, barrier, handler);
    }

    private void addProcessor(final BatchEventProcessor<RequestEvent> processor, final String name)
    {
        processors.add(processor);
        processorNames.add(name);
    }

    private static JournalWriter openJournal(final PipelineContext context)
    {
        if (null == context.journalFile())
        {
            return null;
        }
        try
        {
            return new JournalWriter(context.journalFile(), context.storeContext(), context.incarnation(),
                context.journalSegmentBytes());
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot open journal " + context.journalFile(), ex);
        }
    }

    /**
     * Starts the stage threads (DEDICATED, THREAD_PER_STAGE) and the journal's; in SHARED mode the caller runs
     * {@link #agent()}, which runs the journal too.
     *
     * @return this.
     */
    public Pipeline start()
    {
        if (started)
        {
            return this;
        }
        started = true;
        for (int i = 0; i < processors.size(); i++)
        {
            final Thread thread = new Thread(processors.get(i), context.threadNamePrefix() + processorNames.get(i));
            thread.setDaemon(true);
            threads.add(thread);
            thread.start();
        }
        if (null != journalAgent && null == agent)
        {
            journalRunner = new AgentRunner(JournalAgent.newIdleStrategy(), context.errorHandler(), null, journalAgent);
            AgentRunner.startOnThread(journalRunner, runnable ->
            {
                final Thread thread = new Thread(runnable);
                thread.setDaemon(true);
                return thread;
            });
        }
        return this;
    }

    /**
     * The agent that runs every stage, and the journal after them, in SHARED mode.
     *
     * @return the agent, or null in the other modes.
     */
    public PipelineAgent agent()
    {
        return agent;
    }

    /**
     * Claims the next sequence without waiting.
     *
     * @return the sequence, or -1 when the ring is full (back pressure).
     */
    public long tryClaim()
    {
        try
        {
            return ring.tryNext();
        }
        catch (final InsufficientCapacityException ex)
        {
            return -1;
        }
    }

    /**
     * Claims the next sequence, waiting while the ring is full.
     *
     * @return the sequence.
     */
    public long claim()
    {
        return ring.next();
    }

    /**
     * The event of a claimed sequence; call {@link RequestEvent#reset()} then fill it.
     *
     * @param sequence claimed sequence.
     * @return the event.
     */
    public RequestEvent event(final long sequence)
    {
        return ring.get(sequence);
    }

    /**
     * Whether the stages time the event of a sequence (one in {@link PipelineContext#stageSampleMask()} + 1
     * when latency recording is on): its timestamp must then be read for it, since the time it waited
     * before the reserve stage is measured from it.
     *
     * @param sequence claimed sequence.
     * @return true when the stages time it.
     */
    public boolean isStageTimed(final long sequence)
    {
        return sampling.isStageTimed(sequence);
    }

    /**
     * The latency sampling policy of this pipeline, concluded from its context: the stages ask it which events
     * to time, and so must its producers (which events need a clock reading of their own, and a
     * {@link LatencySampling#newProducerSampler() producer sampler} for the requests timed end to end).
     *
     * @return the policy.
     */
    public LatencySampling latencySampling()
    {
        return sampling;
    }

    /**
     * Publishes a filled event to the stages.
     *
     * @param sequence claimed sequence.
     */
    public void publish(final long sequence)
    {
        ring.publish(sequence);
    }

    /**
     * Publishes a SWEEP (lease expiry) tick with a timestamp, if the ring has room.
     *
     * @param nowNs time of the tick on the pipeline's clock.
     * @return true when published.
     */
    public boolean tryPublishSweep(final long nowNs)
    {
        final long sequence = tryClaim();
        if (sequence < 0)
        {
            return false;
        }
        final StoreCommand command = event(sequence).reset();
        command.type = RequestType.SWEEP;
        command.timestampNs = nowNs;
        publish(sequence);
        return true;
    }

    /**
     * Highest sequence every stage has finished with (the minimum of the gating sequences): an event at or
     * below it will never be touched by the pipeline again.
     *
     * @return the sequence, -1 before the first event.
     */
    public long processedSequence()
    {
        return ring.getMinimumGatingSequence();
    }

    /**
     * Whether every published event has passed every stage.
     *
     * @return true when idle.
     */
    public boolean isDrained()
    {
        final long cursor = ring.getCursor();
        return ring.getMinimumGatingSequence() >= cursor;
    }

    /**
     * The chunk book (reserve stage state); read it only when the pipeline is drained or stopped.
     *
     * @return book.
     */
    public ChunkBook book()
    {
        return book;
    }

    /**
     * Switches latency recording of a SHARED pipeline on or off, from the thread that runs its agent, between
     * two duty cycles. For measuring what recording costs on one pipeline: two pipelines built alike can differ
     * by more than that cost, by where their memory landed.
     *
     * @param enabled whether to record latency and time stages from the next duty cycle.
     * @throws IllegalStateException unless the threading mode is SHARED.
     */
    public void latencyEnabled(final boolean enabled)
    {
        if (null == sharedPublish)
        {
            throw new IllegalStateException("latency recording is switched only in SHARED mode");
        }
        sampling.enabled(enabled);
        sharedPublish.onLatencySwitched();
    }

    /**
     * Latency recorders.
     *
     * @return recorders.
     */
    public LatencyRecorders latency()
    {
        return latency;
    }

    /**
     * Counters.
     *
     * @return counters.
     */
    public StoreCounters counters()
    {
        return context.counters();
    }

    /**
     * Configuration.
     *
     * @return context.
     */
    public PipelineContext context()
    {
        return context;
    }

    /**
     * Lets the pipeline progress while the calling thread waits for answers, for a caller that drives a pipeline by
     * hand (the synchronous facade, tests, benchmarks): in SHARED mode one duty cycle of its agent on the calling
     * thread, whose runner must not be running; in the other modes one spin, as the stage threads do the work.
     * The caller keeps its own condition and deadline.
     *
     * @return the work the duty cycle did; 0 when it spun.
     * @throws IllegalStateException wrapping what the agent threw.
     */
    public int driveOnce()
    {
        if (null == agent)
        {
            Thread.onSpinWait();
            return 0;
        }
        try
        {
            return agent.doWork();
        }
        catch (final Exception ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    /**
     * Records journaled so far (0 without a journal); a snapshot for diagnostics.
     *
     * @return count.
     */
    public long journalRecords()
    {
        return null == journalWriter ? 0 : journalWriter.records();
    }

    /**
     * Drains what was published (up to 10 s), stops the stage threads and closes the journal. In SHARED mode
     * stop the agent's runner first: the drain runs the agent on the calling thread.
     */
    @Override
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        if (started || null != agent)
        {
            final long deadline = System.nanoTime() + DRAIN_TIMEOUT_NS;
            while (!isDrained() && System.nanoTime() - deadline < 0)
            {
                if (null != agent)
                {
                    // SHARED: the caller has stopped the agent's runner, so this thread finishes its work.
                    try
                    {
                        agent.doWork();
                    }
                    catch (final Exception ex)
                    {
                        context.errorHandler().onError(ex);
                        break;
                    }
                }
                else
                {
                    Thread.yield();
                }
            }
        }
        for (final BatchEventProcessor<RequestEvent> processor : processors)
        {
            processor.halt();
        }
        for (final Thread thread : threads)
        {
            try
            {
                thread.join(TimeUnit.SECONDS.toMillis(5));
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
        if (null != journalRunner)
        {
            // stops the journal thread after its current duty cycle; what it has not reached is appended here
            journalRunner.close();
        }
        if (null != journalWriter)
        {
            try
            {
                journalWriter.appendCounters(context.counters());
            }
            catch (final IOException ex)
            {
                context.errorHandler().onError(ex);
            }
            journalWriter.close();
        }
    }
}
