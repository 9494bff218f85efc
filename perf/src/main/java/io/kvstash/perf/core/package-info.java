/**
 * JMH micro-benchmarks of the store core through its synchronous facade: chunk hashing, store, lookup and
 * retrieve cycles. Figures and the command that produced them are in {@code docs/BENCHMARKS.md}.
 */
package io.kvstash.perf.core;
