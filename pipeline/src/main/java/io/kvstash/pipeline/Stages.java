package io.kvstash.pipeline;

import com.lmax.disruptor.EventHandler;
import io.kvstash.core.DataMover;
import io.kvstash.core.SlotAssigner;
import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.core.book.ChunkBook;
import io.kvstash.pipeline.latency.LatencyRecorders;
import io.kvstash.pipeline.latency.LatencySampling;
import io.kvstash.pipeline.latency.StrideSampler;
import io.kvstash.wire.RequestType;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import org.agrona.concurrent.NanoClock;

/**
 * The pipeline's stage handlers. Each stage owns its part of the state and is its single writer:
 * <ul>
 *   <li>{@link Reserve}: the {@link ChunkBook} (index, chunk states, LRU, pins, transfers, leases,
 *   instances, slot accounting); every decision, including the early return of a PREPARE_STORE with
 *   nothing to reserve, which it marks done so later stages pass it through;</li>
 *   <li>{@link Commit}: the {@link SlotAssigner}, checking the decided slots lie in the pool, then the
 *   {@link DataMover}, moving copy-transport bytes and owning the DATA counters (slot-assign and commit, one handler
 *   now that offsets are decided with the slots);</li>
 *   <li>{@link Publish}: the response sink, the REQUESTS counters and every latency recorder.</li>
 * </ul>
 * The journal, beside publish, is {@link JournalAgent}: it owns the journal writer.
 * A stage never reads another stage's state; what a later stage needs travels in the event. Which events are
 * timed is the pipeline's {@link LatencySampling}'s decision, asked by each stage that times.
 */
final class Stages
{
    private Stages()
    {
    }

    /**
     * Reserve stage: the book's decision. Owner: the reserve thread.
     */
    static final class Reserve implements EventHandler<RequestEvent>
    {
        private final ChunkBook book;
        private final NanoClock clock;
        private final LatencySampling sampling;

        Reserve(final ChunkBook book, final NanoClock clock, final LatencySampling sampling)
        {
            this.book = book;
            this.clock = clock;
            this.sampling = sampling;
        }

        @Override
        public void onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
        {
            if (sampling.isStageTimed(sequence))
            {
                event.reserveStartNs = clock.nanoTime();
                book.reserve(event.command);
                event.reserveEndNs = clock.nanoTime();
            }
            else
            {
                book.reserve(event.command);
            }
            if (endOfBatch)
            {
                // The next reserve would run the book's deferred work first; an idle stage runs it now.
                book.afterAnswer();
            }
        }
    }

    /**
     * Commit stage: the slot check ({@link SlotAssigner}) and then the data effects ({@link DataMover}). The book
     * decides each slot's offset with its id, so slot-assign only checks it and commit only moves copy-transport
     * bytes: neither keeps a thread busy alone, so one handler runs both, on the commit thread in
     * THREAD_PER_STAGE and inside {@link Inline} otherwise. The latency recorders still see both steps
     * (slot-assign, then commit with no queue between them). Owner: the thread that runs it.
     */
    static final class Commit implements EventHandler<RequestEvent>
    {
        private final SlotAssigner assigner;
        private final DataMover mover;
        private final NanoClock clock;

        Commit(final SlotAssigner assigner, final DataMover mover, final NanoClock clock)
        {
            this.assigner = assigner;
            this.mover = mover;
            this.clock = clock;
        }

        @Override
        public void onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
        {
            if (0 != event.reserveStartNs)
            {
                event.assignStartNs = clock.nanoTime();
                checkAndCommit(event, true);
            }
            else
            {
                checkAndCommit(event, false);
            }
        }

        /**
         * Checks the slots, then applies the data effects; when {@code timed}, stamps the end of each step (the
         * start of the first is the caller's).
         */
        void checkAndCommit(final RequestEvent event, final boolean timed)
        {
            final StoreCommand command = event.command;
            assigner.assign(command);
            if (timed)
            {
                event.assignEndNs = clock.nanoTime();
                mover.commit(command);
                event.commitEndNs = clock.nanoTime();
            }
            else
            {
                mover.commit(command);
            }
        }
    }

    /**
     * Publish stage: answers, counts and records latency. Owner: the publish thread. A sink that throws
     * is logged and counted; the pipeline goes on.
     */
    static final class Publish implements EventHandler<RequestEvent>
    {
        private final ResponseSink sink;
        private final StoreCounters counters;
        private final LatencyRecorders latency;
        private final NanoClock clock;
        private final LatencySampling sampling;
        private final CountedErrorHandler errorHandler;
        private final StrideSampler sampler;
        private long batchStart;
        private long nextPick;

        Publish(
            final ResponseSink sink,
            final StoreCounters counters,
            final LatencyRecorders latency,
            final NanoClock clock,
            final LatencySampling sampling,
            final CountedErrorHandler errorHandler)
        {
            this.sink = sink;
            this.counters = counters;
            this.latency = latency;
            this.clock = clock;
            this.sampling = sampling;
            this.sampler = sampling.newPublishSampler();
            this.errorHandler = errorHandler;
        }

        @Override
        public void onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
        {
            final StoreCommand command = event.command;
            final int type = command.type;
            final int status = command.status;
            if (RequestType.isValid(type) && status >= 0 && status < Status.COUNT)
            {
                counters.increment(CountersDescriptor.requestId(type, status));
            }
            else
            {
                counters.increment(CountersDescriptor.REQUESTS_INVALID_TYPE);
            }
            final long start = 0 != event.reserveStartNs ? clock.nanoTime() : 0;
            try
            {
                sink.onResponse(event);
            }
            catch (final Throwable ex)
            {
                errorHandler.onError(ex);
            }
            if (sampling.isEnabled())
            {
                if (endOfBatch)
                {
                    if (batchStart >= 0)
                    {
                        sampler.onBatch((int)(sequence - batchStart + 1)); // a batch is at most a ring
                    }
                    batchStart = sequence + 1;
                }
                if (sequence >= nextPick || 0 != start || RequestEvent.STAMP_SAMPLED == event.stamp)
                {
                    timed(event, sequence, type, start);
                }
            }
        }

        /**
         * Told that latency recording was switched; between duty cycles, by the thread running them. The batch
         * under way when recording comes back on does not set the sampler's weight: where it started is not known.
         */
        void onLatencySwitched()
        {
            batchStart = -1;
        }

        /**
         * Records an event's latency when it is one to record: the stages timed it (a count of one), its producer
         * picked it, or it is the pick of this stage's sampler. Off the common path, so that path stays short.
         */
        private void timed(final RequestEvent event, final long sequence, final int type, final long start)
        {
            final int count;
            if (0 != start)
            {
                count = 1; // a pick due now carries over to the next event
            }
            else if (RequestEvent.STAMP_SAMPLED == event.stamp)
            {
                count = event.sampleWeight;
            }
            else
            {
                // Neither timed by the stages nor picked by the producer: onEvent came here for the pick.
                count = sampler.weight();
                nextPick = sequence + sampler.stride();
                if (RequestEvent.STAMP_PRECISE != event.stamp)
                {
                    return; // a shared reading cannot be timed: the pick is dropped
                }
            }
            if (!RequestType.isValid(type))
            {
                return;
            }
            final StoreCommand command = event.command;
            final long end = clock.nanoTime();
            latency.request(type).recordValueWithCount(
                Math.max(1, Math.min(end - command.timestampNs, LatencyRecorders.HIGHEST_TRACKABLE_NS)), count);
            if (0 != start)
            {
                latency.recordStage(LatencyRecorders.STAGE_RESERVE,
                    event.reserveStartNs - command.timestampNs, event.reserveEndNs - event.reserveStartNs);
                final long assignStart = 0 != event.assignStartNs ? event.assignStartNs : event.reserveEndNs;
                final long assignEnd = 0 != event.assignEndNs ? event.assignEndNs : assignStart;
                latency.recordStage(LatencyRecorders.STAGE_SLOT_ASSIGN,
                    assignStart - event.reserveEndNs, assignEnd - assignStart);
                // The data effects follow the slot check in the same handler: nothing queues between them.
                final long commitEnd = 0 != event.commitEndNs ? event.commitEndNs : assignEnd;
                latency.recordStage(LatencyRecorders.STAGE_COMMIT, 0, commitEnd - assignEnd);
                latency.recordStage(LatencyRecorders.STAGE_PUBLISH, start - commitEnd, end - start);
            }
        }
    }

    /**
     * Every stage in order on one thread: reserve, then {@link Commit} (slot check and data effects), then publish
     * (the journal follows behind
     * them, {@link JournalAgent}: in the same duty cycle in SHARED mode, on its own thread otherwise). An
     * exception in a deciding stage answers the event SERVER_ERROR; publish still runs. Stage timestamps are
     * shared between adjacent stages (one clock read per boundary).
     */
    static final class Inline implements EventHandler<RequestEvent>
    {
        private final ChunkBook book;
        private final Commit commit;
        private final Publish publish;
        private final NanoClock clock;
        private final LatencySampling sampling;
        private final CountedErrorHandler errorHandler;
        private long events;

        Inline(
            final ChunkBook book,
            final Commit commit,
            final Publish publish,
            final NanoClock clock,
            final LatencySampling sampling,
            final CountedErrorHandler errorHandler)
        {
            this.book = book;
            this.commit = commit;
            this.publish = publish;
            this.clock = clock;
            this.sampling = sampling;
            this.errorHandler = errorHandler;
        }

        @Override
        public void onEvent(final RequestEvent event, final long sequence, final boolean endOfBatch)
        {
            final StoreCommand command = event.command;
            try
            {
                if (sampling.isStageTimed(sequence))
                {
                    event.reserveStartNs = clock.nanoTime();
                    book.reserve(command);
                    event.reserveEndNs = clock.nanoTime();
                    commit.checkAndCommit(event, true);
                }
                else
                {
                    book.reserve(command);
                    commit.checkAndCommit(event, false);
                }
            }
            catch (final Throwable ex)
            {
                command.fail(Status.SERVER_ERROR, "unexpected server error");
                errorHandler.onError(ex);
            }
            publish.onEvent(event, sequence, endOfBatch);
            try
            {
                // The answer is on its way: the book's deferred bookkeeping (ChunkBook.afterAnswer) runs now.
                book.afterAnswer();
            }
            catch (final Throwable ex)
            {
                errorHandler.onError(ex);
            }
            events++;
        }

        long events()
        {
            return events;
        }
    }
}
