package io.kvstash.server;

import io.kvstash.core.StoreCommand;
import io.kvstash.core.StoreCounters;
import io.kvstash.pipeline.Pipeline;
import io.kvstash.pipeline.RequestEvent;
import io.kvstash.pipeline.latency.LatencySampling;
import io.kvstash.pipeline.latency.TypeSampler;
import io.kvstash.server.codec.RequestDecoder;
import io.kvstash.wire.Status;
import io.kvstash.wire.file.CountersDescriptor;
import io.kvstash.wire.ring.RingConsumer;
import org.agrona.ErrorHandler;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.CachedNanoClock;
import org.agrona.concurrent.NanoClock;

/**
 * The receiver of the server: polls the request ring of every attached client, decodes records in place into
 * claimed pipeline events and publishes them, and on the cycles that read the clock runs the
 * {@link ClientConductor}'s duty cycle (attach, liveness, heartbeat, sweeps, detach). Latency intervals are closed
 * on a thread of their own ({@link LatencyLogAgent}), not here.
 * A slow client (its response ring lacks room) or a full pipeline only stops reading that client or this
 * duty cycle; nobody ever waits for a client.
 * <p>
 * Ownership: the receiver owns the reading side of each ATTACHED session (its request ring, {@code lastSequence},
 * admitted bytes, back-pressure flag), the decoder, the sampler and the clock readings, and writes the conductor's
 * clock ({@link CachedNanoClock}) before running it. The conductor owns the sessions' life and the list of
 * sessions in use, which the receiver only reads; see {@link ClientConductor} for the hand-over.
 * <p>
 * Owner: the receiver thread.
 */
final class ReceiverAgent implements Agent, DoorbellIdleStrategy.Timers
{
    /** Records read from one client per duty cycle at most, so one busy client cannot starve the others. */
    static final int MAX_RECORDS_PER_CLIENT = 64;
    /** Duty cycles between two readings of the clock for the timers and the coarse stamps. */
    static final int CYCLES_PER_CLOCK_READ = 16;
    /** Requests read by a duty cycle from which the next cycle reads the clock, however few cycles ago. */
    static final int REQUESTS_PER_CLOCK_READ = 32;
    private final Pipeline pipeline;
    private final ClientConductor conductor;
    private final ClientSession[] sessions;
    /** The conductor's list of the sessions in use: read here, written there. */
    private final int[] active;
    private final RequestDecoder decoder;
    private final StoreCounters counters;
    private final ErrorHandler errorHandler;
    private final NanoClock nanoClock;
    private final CachedNanoClock conductorClock;
    /** The pipeline's one latency sampling policy: which events the stages time, whether requests are sampled. */
    private final LatencySampling sampling;
    /** Requests of a type per one timed end to end, from the policy (fewer timed when duty cycles read many). */
    private final TypeSampler sampler;
    private int roundRobin;
    // The last reading of the monotonic clock, the cycles since it was taken, and the requests the last
    // cycle read (see doWork and stamp).
    private long clockNs;
    private int cyclesSinceClockRead;
    private int lastWork;
    // How the duty cycles went, for benchmarks: plain fields, read after the receiver's thread stopped.
    private long dutyCycles;
    private long emptyCycles;
    private long ringPolls;
    private long requestsRead;

    /**
     * A receiver over the conductor's sessions.
     *
     * @param context        the server's configuration, concluded.
     * @param pipeline       the pipeline the requests go into.
     * @param conductor      the conductor of the same sessions, run from this agent's duty cycle.
     * @param sessions       every session slot.
     * @param counters       the server's counters.
     * @param errorHandler   the server's counted error handler.
     * @param conductorClock the conductor's clock, holding a first reading of the monotonic clock.
     */
    ReceiverAgent(
        final ServerContext context,
        final Pipeline pipeline,
        final ClientConductor conductor,
        final ClientSession[] sessions,
        final StoreCounters counters,
        final ErrorHandler errorHandler,
        final CachedNanoClock conductorClock)
    {
        this.pipeline = pipeline;
        this.conductor = conductor;
        this.sessions = sessions;
        this.active = conductor.activeSessions();
        this.counters = counters;
        this.errorHandler = errorHandler;
        this.nanoClock = context.nanoClock();
        this.conductorClock = conductorClock;
        this.sampling = pipeline.latencySampling();
        this.sampler = sampling.newProducerSampler();
        this.decoder = new RequestDecoder(context.storeContext().chunkTokens(),
            context.storeContext().maxChunksPerRequest(), context.storeContext().maxInlineBytes());
        this.clockNs = conductorClock.nanoTime();
    }

    @Override
    public String roleName()
    {
        return "kvstash-receiver";
    }

    @Override
    public void onStart()
    {
        conductor.onStart();
    }

    @Override
    public void onClose()
    {
        conductor.onClose();
    }

    /**
     * The receiver's duties: read the clock when due, read the clients' requests, and on the cycles that read the
     * clock run the conductor's duties at that reading.
     *
     * @return requests read, plus the conductor's work on the cycles it runs.
     */
    @Override
    public int doWork()
    {
        final boolean clockDue = readClockWhenDue();
        int workCount = pollClients();
        onRequestsRead(workCount);
        dutyCycles++;
        requestsRead += workCount;
        if (0 == workCount)
        {
            emptyCycles++;
        }
        if (clockDue)
        {
            conductorClock.update(clockNs);
            workCount += conductor.doWork();
        }
        return workCount;
    }

    /**
     * Reads the clock every {@link #CYCLES_PER_CLOCK_READ}-th cycle, and after a cycle that read many requests (a
     * long one); the conductor's timers run on those cycles, so they slip by at most that many short cycles.
     */
    private boolean readClockWhenDue()
    {
        final boolean clockDue =
            ++cyclesSinceClockRead >= CYCLES_PER_CLOCK_READ || lastWork >= REQUESTS_PER_CLOCK_READ;
        if (clockDue)
        {
            readClock();
            cyclesSinceClockRead = 0;
        }
        return clockDue;
    }

    private void onRequestsRead(final int requests)
    {
        lastWork = requests;
        if (requests > 0)
        {
            sampler.onBatch(requests);
        }
    }

    /**
     * Reads the monotonic clock, which every timer runs on; the wall clock only gives the values written out
     * (the heartbeat, the latency log's timestamps), so a step of it (NTP, a resumed VM) cannot stop the
     * heartbeat, scans, liveness checks and sweeps for as long as it stepped back.
     */
    private long readClock()
    {
        final long now = nanoClock.nanoTime();
        clockNs = now;
        return now;
    }

    /**
     * Stamps a request. A clock read costs as much as a hand-off between two cores, and a request with one in
     * flight would pay it on its path; so most requests take the duty cycle's last reading
     * ({@link RequestEvent#STAMP_COARSE}), at most {@link #CYCLES_PER_CLOCK_READ} cycles old: their leases start
     * up to that much early (under a millisecond with backoff's longest parks, a few microseconds when
     * spinning). The events the stages time, and the requests the sampler picks for the end-to-end latency (one
     * in {@link LatencySampling#PRODUCER_MIN_WEIGHT} of each type, fewer when the duty cycles read many), get a reading of their
     * own.
     */
    private void stamp(final long sequence, final RequestEvent event)
    {
        final StoreCommand command = event.command;
        final int type = command.type;
        final int weight;
        if (sampling.isStageTimed(sequence))
        {
            command.timestampNs = readClock();
        }
        else if (sampling.isEnabled() && (weight = sampler.sample(type)) > 0)
        {
            command.timestampNs = readClock();
            event.stamp = RequestEvent.STAMP_SAMPLED;
            event.sampleWeight = weight;
        }
        else
        {
            command.timestampNs = clockNs;
            event.stamp = RequestEvent.STAMP_COARSE;
        }
    }

    /**
     * How long the thread may sleep: until the conductor's next timer. The next duty cycle reads the clock and runs
     * the conductor, whatever the cycles since the last reading.
     *
     * @param doorbellConnections the clients' doorbell connections now open.
     * @return ms until the conductor's next timer, 0 when one is due.
     */
    @Override
    public long sleepMs(final int doorbellConnections)
    {
        final long nowNs = readClock();
        cyclesSinceClockRead = CYCLES_PER_CLOCK_READ;
        return conductor.msUntilNextTimer(nowNs / 1_000_000L, doorbellConnections);
    }

    @Override
    public long requestsRead()
    {
        return requestsRead;
    }

    /**
     * Has the conductor call {@code wake} when a new client's file appears (see
     * {@link ClientConductor#wakeOnNewClients(Runnable)}).
     *
     * @param wake ends the thread's sleep.
     */
    void wakeOnNewClients(final Runnable wake)
    {
        conductor.wakeOnNewClients(wake);
    }

    /**
     * How the duty cycles went since the start: cycles, cycles that read no request, request rings polled, and
     * requests read. Plain fields: exact once the receiver's thread stopped, approximate while it runs.
     *
     * @param into where the four counts go, in that order.
     */
    void dutyCycleCounts(final long[] into)
    {
        into[0] = dutyCycles;
        into[1] = emptyCycles;
        into[2] = ringPolls;
        into[3] = requestsRead;
    }

    private int pollClients()
    {
        int work = 0;
        final int n = conductor.activeCount();
        if (0 == n)
        {
            return 0;
        }
        final int first = roundRobin >= n ? 0 : roundRobin;
        int k = first;
        for (int visited = 0; visited < n; visited++)
        {
            final ClientSession session = sessions[active[k]];
            final int current = k;
            k = k + 1 == n ? 0 : k + 1;
            if (ClientSession.ATTACHED != session.state())
            {
                continue;
            }
            ringPolls++;
            final int read = pollClient(session);
            if (read < 0)
            {
                roundRobin = current;
                return work;
            }
            work += read;
        }
        // The next cycle starts one ring further: the rings read first in a cycle are answered first in SHARED
        // mode, so a fixed first ring would give one client the shortest waits on every busy cycle.
        roundRobin = first + 1 == n ? 0 : first + 1;
        return work;
    }

    /**
     * Reads up to {@link #MAX_RECORDS_PER_CLIENT} records of one client.
     *
     * @return records read, or -1 when the pipeline is full (stop this duty cycle).
     */
    private int pollClient(final ClientSession session)
    {
        final RingConsumer ring = session.requests;
        // The records read in the last cycle are released (zeroed, head published) only now, after the pipeline
        // answered them in SHARED mode: zeroing the client's lines first would delay those answers.
        ring.release();
        int read = 0;
        while (read < MAX_RECORDS_PER_CLIENT)
        {
            if (!ring.next())
            {
                if (ring.isCorrupt())
                {
                    counters.increment(CountersDescriptor.WIRE_MALFORMED);
                    errorHandler.onError(new IllegalStateException("corrupt request ring of client " +
                        session.file.getFileName() + ": detaching it"));
                    conductor.closeSession(session, false);
                }
                return read;
            }
            final int type = ring.type();
            final int offset = ring.payloadOffset();
            final int length = ring.payloadLength();
            counters.increment(CountersDescriptor.WIRE_RECORDS);
            if (length < 8)
            {
                counters.increment(CountersDescriptor.WIRE_MALFORMED);
                ring.take();
                read++;
                continue;
            }
            final long bound = decoder.peekResponseBound(type, ring.buffer(), offset, length, CountersDescriptor.LENGTH);
            if (!session.responses.hasFreeBytes(2 * bound + session.outstandingBytes()))
            {
                if (!session.backPressured)
                {
                    session.backPressured = true;
                    counters.increment(CountersDescriptor.WIRE_BACK_PRESSURE);
                }
                return read;
            }
            session.backPressured = false;
            final long sequence = pipeline.tryClaim();
            if (sequence < 0)
            {
                return -1;
            }
            final RequestEvent event = pipeline.event(sequence);
            final StoreCommand command = event.reset();
            try
            {
                decoder.decode(type, ring.buffer(), offset, length, event);
            }
            catch (final RuntimeException ex)
            {
                // A claimed sequence must always be published, or the pipeline would stall for everyone.
                event.rejectAtDecode(Status.MALFORMED, "record could not be decoded");
                errorHandler.onError(ex);
            }
            if (0 != event.decodeStatus)
            {
                counters.increment(CountersDescriptor.WIRE_MALFORMED);
            }
            command.session = session.sessionId();
            stamp(sequence, event);
            event.clientIndex = session.index;
            event.clientSession = session.sessionId();
            event.producerTag = 2 * bound;
            session.admit(2 * bound);
            session.lastSequence = sequence;
            pipeline.publish(sequence);
            ring.take();
            read++;
        }
        return read;
    }
}
