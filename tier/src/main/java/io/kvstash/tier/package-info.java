/**
 * The second tier: a Redis Cluster shared by every host, written through and read through by the server on a
 * thread of its own ({@link io.kvstash.tier.L2Tier}). The request pipeline only leaves notices in a ring
 * ({@link io.kvstash.tier.L2Tap}); the tier reads and fills the pool as an internal client of its own server,
 * so the chunk book needs no change and nothing on the request path waits on the network.
 */
package io.kvstash.tier;
