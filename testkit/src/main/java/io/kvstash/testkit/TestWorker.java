package io.kvstash.testkit;

/**
 * The worker entry point of every test that runs a worker in its own process: one main class, a mode per
 * caller.
 * <pre>
 * load | zombie                           the chaos suites' workers ({@link LoadWorker})
 * l2load                                  the second tier chaos suite's worker ({@link L2LoadWorker})
 * store-retrieve | prepare-hang | reconnect  the end-to-end tests' workers ({@link EndToEndWorker})
 * store | retrieve | bench                the Python client's cross-language peer ({@link InteropWorker})
 * </pre>
 * The cross-language modes exit with 0 on success, 1 on a failed check and 2 on a usage error; the others with
 * 0, or non-zero when a check throws.
 */
public final class TestWorker
{
    private TestWorker()
    {
    }

    /**
     * Runs one mode (see the class comment).
     *
     * @param args mode and its arguments.
     * @throws Exception on a failure (the caller sees the exit code).
     */
    public static void main(final String[] args) throws Exception
    {
        switch (args.length == 0 ? "" : args[0])
        {
            case "load", "zombie" -> LoadWorker.run(args);
            case "l2load" -> L2LoadWorker.run(args);
            case "store-retrieve", "prepare-hang", "reconnect" -> EndToEndWorker.run(args);
            case "store", "retrieve", "bench" -> System.exit(InteropWorker.run(args));
            default ->
            {
                System.err.println("usage: TestWorker MODE ARGS... (modes: load, zombie, l2load, store-retrieve, " +
                    "prepare-hang, reconnect, store, retrieve, bench; see io.kvstash.testkit.TestWorker)");
                System.exit(2);
            }
        }
    }
}
