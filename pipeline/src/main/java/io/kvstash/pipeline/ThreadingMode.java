package io.kvstash.pipeline;

/**
 * How the pipeline's stages are mapped onto threads.
 */
public enum ThreadingMode
{
    /**
     * All stages run in one {@link PipelineAgent} that the caller schedules, typically composed with the
     * receiver on one thread: no thread hop between receiving a request and answering it. A journal, when
     * configured, runs in the same agent after the stages ({@link JournalAgent}); in the other modes it has a
     * thread of its own.
     */
    SHARED,
    /** All stages run one after another on one dedicated pipeline thread (the default on 2 cores). */
    DEDICATED,
    /**
     * Each stage (reserve, commit, publish, and the journal beside publish) has its own thread; commit runs the slot
     * check and the data effects, slot-assign having nothing left to do on a thread of its own.
     */
    THREAD_PER_STAGE
}
