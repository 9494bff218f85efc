/**
 * {@code kvstash bench}: kvstash's store, retrieve and control paths side by side with a raw copy
 * through the pool's own {@code /dev/shm} pages (the physical limit), a bare ring echo between two processes
 * (the IPC floor), Redis and an in-process map, in one run, as ratios. Entry points:
 * {@link io.kvstash.perf.bench.BenchMain} and {@link io.kvstash.perf.bench.BenchCommand}; the client side runs
 * in {@link io.kvstash.perf.bench.BenchWorker}.
 */
package io.kvstash.perf.bench;
