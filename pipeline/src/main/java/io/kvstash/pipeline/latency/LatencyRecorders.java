package io.kvstash.pipeline.latency;

import io.kvstash.wire.RequestType;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.SingleWriterRecorder;

import java.util.concurrent.TimeUnit;

/**
 * HdrHistogram recorders of the pipeline: end-to-end latency per request type (enqueue to publish) and,
 * per stage, time queued before the stage and time in it. Each recorder is a {@link SingleWriterRecorder}
 * written by exactly one thread: the per-type recorders and every stage recorder by the publish stage's
 * thread, which records the stage timestamps the stages left in the event. Readers take interval
 * histograms from any thread ({@link IntervalLogger}).
 */
public final class LatencyRecorders
{
    /** Stage index: reserve. */
    public static final int STAGE_RESERVE = 0;
    /** Stage index: slot-assign. */
    public static final int STAGE_SLOT_ASSIGN = 1;
    /** Stage index: commit. */
    public static final int STAGE_COMMIT = 2;
    /** Stage index: publish. */
    public static final int STAGE_PUBLISH = 3;
    /** Number of stages. */
    public static final int STAGE_COUNT = 4;
    /** Stage names as they appear in tags and reports. */
    public static final String[] STAGE_NAMES = { "reserve", "slot-assign", "commit", "publish" };
    /** Largest value recorded: 10 s in ns; larger values are clamped. */
    public static final long HIGHEST_TRACKABLE_NS = TimeUnit.SECONDS.toNanos(10);
    /** Significant digits of every histogram. */
    public static final int SIGNIFICANT_DIGITS = 3;

    private final SingleWriterRecorder[] byType = new SingleWriterRecorder[RequestType.COUNT];
    private final SingleWriterRecorder[] stageService = new SingleWriterRecorder[STAGE_COUNT];
    private final SingleWriterRecorder[] stageQueued = new SingleWriterRecorder[STAGE_COUNT];

    /**
     * Fresh recorders.
     */
    public LatencyRecorders()
    {
        for (int i = 0; i < byType.length; i++)
        {
            byType[i] = newRecorder();
        }
        for (int i = 0; i < STAGE_COUNT; i++)
        {
            stageService[i] = newRecorder();
            stageQueued[i] = newRecorder();
        }
    }

    /**
     * A recorder with the project's range and precision.
     *
     * @return recorder.
     */
    public static SingleWriterRecorder newRecorder()
    {
        return new SingleWriterRecorder(1, HIGHEST_TRACKABLE_NS, SIGNIFICANT_DIGITS);
    }

    /**
     * A histogram with the project's range and precision.
     *
     * @return histogram.
     */
    public static Histogram newHistogram()
    {
        return new Histogram(1, HIGHEST_TRACKABLE_NS, SIGNIFICANT_DIGITS);
    }

    /**
     * Records an end-to-end latency; publish stage thread only.
     *
     * @param type      request type, ignored when invalid.
     * @param latencyNs latency.
     */
    public void recordRequest(final int type, final long latencyNs)
    {
        if (RequestType.isValid(type))
        {
            byType[type].recordValue(clamp(latencyNs));
        }
    }

    /**
     * Records one stage's queue and service time; publish stage thread only.
     *
     * @param stage     stage index.
     * @param queuedNs  time between the previous stage's end (or enqueue) and this stage's start.
     * @param serviceNs time in the stage.
     */
    public void recordStage(final int stage, final long queuedNs, final long serviceNs)
    {
        stageQueued[stage].recordValue(clamp(queuedNs));
        stageService[stage].recordValue(clamp(serviceNs));
    }

    /**
     * Recorder of a request type.
     *
     * @param type request type.
     * @return recorder.
     */
    public SingleWriterRecorder request(final int type)
    {
        return byType[type];
    }

    /**
     * Recorder of a stage's service time.
     *
     * @param stage stage index.
     * @return recorder.
     */
    public SingleWriterRecorder stageService(final int stage)
    {
        return stageService[stage];
    }

    /**
     * Recorder of a stage's queue time.
     *
     * @param stage stage index.
     * @return recorder.
     */
    public SingleWriterRecorder stageQueued(final int stage)
    {
        return stageQueued[stage];
    }

    private static long clamp(final long ns)
    {
        return ns < 1 ? 1 : Math.min(ns, HIGHEST_TRACKABLE_NS);
    }
}
