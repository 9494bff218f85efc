package io.kvstash.pipeline;

import io.kvstash.core.CommandExecutor;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreContext;
import io.kvstash.core.store.KvStore;
import org.agrona.concurrent.NanoClock;

/**
 * A {@link KvStore} whose every request runs through a real {@link Pipeline}: the synchronous facade on top,
 * the Disruptor stages underneath. Used to run the core's conformance suite through the pipeline in each
 * threading mode, and by embedded users that want the pipeline's journal and latency recording behind a
 * synchronous API. One request is in flight at a time.
 */
public final class PipelineKvStores
{
    private static Pipeline lastOpened;

    private PipelineKvStores()
    {
    }

    /**
     * Opens a pipeline-backed store. The pipeline opened by the previous call is closed first, so a test
     * suite creating a store per test never accumulates stage threads.
     *
     * @param context  store configuration.
     * @param clock    time source stamped on requests (leases are judged against it).
     * @param mode     threading mode.
     * @param waitMode wait mode of stage threads.
     * @return the store.
     */
    public static synchronized KvStore open(
        final StoreContext context, final NanoClock clock, final ThreadingMode mode, final WaitMode waitMode)
    {
        if (null != lastOpened)
        {
            lastOpened.close();
            lastOpened = null;
        }
        final Executor executor = new Executor();
        final PipelineContext pipelineContext = new PipelineContext()
            .storeContext(context)
            .threadingMode(mode)
            .waitMode(waitMode)
            .ringSize(16)
            .clock(clock)
            .latencyEnabled(false)
            .responseSink(executor::onResponse);
        final Pipeline pipeline = new Pipeline(pipelineContext).start();
        executor.pipeline = pipeline;
        lastOpened = pipeline;
        return new KvStore(pipelineContext.storeContext(), pipelineContext.pool(), pipelineContext.slotTable(),
            pipelineContext.counters(), pipeline.book(), clock, executor);
    }

    /**
     * Opens a pipeline-backed store from an engine name: {@code SHARED}, {@code DEDICATED} or
     * {@code THREAD_PER_STAGE} (yielding wait mode).
     *
     * @param context store configuration.
     * @param clock   time source.
     * @param engine  threading mode name.
     * @return the store.
     */
    public static KvStore open(final StoreContext context, final NanoClock clock, final String engine)
    {
        return open(context, clock, ThreadingMode.valueOf(engine), WaitMode.YIELDING);
    }

    private static final class Executor implements CommandExecutor
    {
        private Pipeline pipeline;
        private StoreCommand target;
        private volatile long delivered;
        private long published;

        @Override
        public void execute(final StoreCommand command)
        {
            final long sequence = pipeline.claim();
            final RequestEvent event = pipeline.event(sequence);
            event.reset().copyRequestFrom(command);
            if (command.done)
            {
                event.rejectAtDecode(command.status, command.message);
            }
            event.clientIndex = 0;
            target = command;
            published++;
            pipeline.publish(sequence);
            while (delivered != published)
            {
                pipeline.driveOnce();
            }
        }

        void onResponse(final RequestEvent event)
        {
            target.copyOutcomeFrom(event.command);
            delivered = delivered + 1;
        }
    }
}
