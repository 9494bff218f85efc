package io.kvstash.core;


/**
 * Runs a filled {@link StoreCommand} through the store's stages and leaves its outcome in it. The
 * synchronous {@link io.kvstash.core.store.KvStore} runs them inline on the caller's thread; the pipeline module supplies an
 * executor that publishes the command into the Disruptor and waits for its answer, so one conformance suite
 * drives both.
 */
@FunctionalInterface
public interface CommandExecutor
{
    /**
     * Runs a command to its outcome.
     *
     * @param command request fields set (a command already failed by its producer passes untouched).
     */
    void execute(StoreCommand command);
}
