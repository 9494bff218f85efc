/**
 * JMH benchmarks of the request pipeline against direct core calls: requests per second in the
 * one-thread (SHARED) and dedicated-thread modes, the cost of the journal and of latency recording, and a
 * per-stage latency report. Figures and the commands that produced them are in {@code docs/BENCHMARKS.md}.
 */
package io.kvstash.perf.pipeline;
