package io.kvstash.chaos;

/**
 * One reliability suite of {@code kvstash chaos}: it runs against a real server and real worker processes and
 * adds its figures to the run's report.
 */
interface ChaosSuite
{
    /**
     * The name {@code --only} selects the suite by.
     *
     * @return name.
     */
    String name();

    /**
     * Runs the suite with the run's options and adds its figures to the run's report.
     *
     * @param chaos the run: options, report, progress, directories.
     * @throws Exception when the suite cannot run at all (a server that cannot start).
     */
    void run(ChaosRunner chaos) throws Exception;
}
