"""A LOOKUP that waits for the second tier's read-through (docs/PROTOCOL.md §11), from Python: a real Redis
Cluster (the testkit's, in a process of its own) and two real servers standing for two hosts. Skipped where
redis-server is not installed."""

import hashlib
import os
import time
import unittest

from support import RedisCluster, Server, counter, wait_until

import kvstash
from kvstash import Status

L2_STATE, L2_WRITES, L2_FETCH_HITS, PENDING_TRANSFERS = 336, 337, 340, 5      # counter ids (§2.3)
L2_UP = 2
BOUND_S = 20.0
LAYOUT = kvstash.Layout("py-tier-model", layers=2, hidden=64, dtype="float16")


def digest(data):
    return hashlib.sha256(bytes(data)).hexdigest()


def random_keys(count):
    base = int.from_bytes(os.urandom(8), "little") >> 4
    return [(base + i, ~(base + i) & ((1 << 64) - 1)) for i in range(count)]


@unittest.skipUnless(RedisCluster.available(), "redis-server and redis-cli are not installed")
class TierWaitTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.cluster = RedisCluster().start()
        cls.servers = []
        try:
            cls.a = cls._server(cls.cluster.seeds)
            cls.b = cls._server(cls.cluster.seeds)
            cls.plain = cls._server(None)
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def _server(cls, seeds):
        server = Server(pool_bytes=64 << 20, chunk_tokens=16, l2_seeds=seeds).start()
        cls.servers.append(server)
        return server

    @classmethod
    def tearDownClass(cls):
        for server in cls.servers:
            server.close()
        cls.cluster.close()

    def connect(self, server, instance):
        client = kvstash.connect(server.directory)
        self.addCleanup(client.close)
        if server.l2_seeds:
            self.assertTrue(wait_until(lambda: client.counter(L2_STATE) == L2_UP, 30), "the tier is up")
        self.assertEqual(client.register(instance, LAYOUT).status, Status.OK)
        return client

    def store(self, client, instance, keys):
        prepared = client.prepare_store(instance, keys)
        self.assertEqual(prepared.status, Status.OK, prepared)
        written = {}
        for i, entry in enumerate(prepared.slots):
            data = os.urandom(prepared.chunk_bytes)
            self.assertEqual(client.write_chunk(prepared, i, data), Status.OK)
            written[entry.range_index] = digest(data)
        self.assertEqual(client.commit_store(instance, prepared).status, Status.OK)
        return written

    def read(self, client, instance, lookup):
        prepared = client.prepare_retrieve(instance, lookup=lookup)
        self.assertEqual(prepared.status, Status.OK, prepared)
        read = {entry.range_index: digest(client.read_chunk(prepared, i)) for i, entry in enumerate(prepared.slots)}
        self.assertEqual(client.commit_retrieve(instance, prepared).status, Status.OK)
        return read

    def test_should_answer_another_hosts_chunks_in_one_waiting_lookup(self):
        ca, cb = self.connect(self.a, 11), self.connect(self.b, 12)
        self.assertTrue(cb.second_tier)
        keys = random_keys(6)
        written = self.store(ca, 11, keys)
        self.assertTrue(wait_until(lambda: ca.counter(L2_WRITES) >= 6, 30), "host A wrote its chunks through")

        fetched = counter(cb, L2_FETCH_HITS)
        lookups = cb.counters()["requests.lookup.ok"]
        r = cb.lookup(12, keys, pin=True, wait_tier_s=BOUND_S)
        self.assertEqual((r.status, r.hit_chunks), (Status.OK, 6), r)
        cb.ping()
        self.assertEqual(cb.counters()["requests.lookup.ok"] - lookups, 2,
                         "the wait watched the completed ticket in the control file: the LOOKUP with L2_WAIT and "
                         "the last one, no polls in between")
        self.assertIsNotNone(r.tier_tickets)
        self.assertNotEqual(r.transfer_id, 0)
        self.assertEqual(counter(cb, PENDING_TRANSFERS), 1, "only the returned answer's lease is held")
        self.assertEqual(self.read(cb, 12, r), written, "host B read host A's bytes")
        self.assertEqual(counter(cb, PENDING_TRANSFERS), 0)
        self.assertEqual(counter(cb, L2_FETCH_HITS) - fetched, 6)

    def test_should_return_well_before_the_bound_for_keys_nobody_stored(self):
        cb = self.connect(self.b, 13)
        start = time.monotonic()
        r = cb.lookup(13, random_keys(4), wait_tier_s=BOUND_S)
        took = time.monotonic() - start
        self.assertEqual((r.status, r.hit_chunks), (Status.OK, 0), r)
        self.assertGreater(r.tier_tickets[1], 0, "the read-through is over")
        self.assertLess(took, BOUND_S / 2, "returned once the read-through found nothing, not at the bound")

    def test_should_ask_once_plainly_without_a_tier(self):
        c = self.connect(self.plain, 14)
        self.assertFalse(c.second_tier)
        lookups = "requests.lookup.ok"
        before = c.counters()[lookups]
        r = c.lookup(14, random_keys(3), wait_tier_s=BOUND_S)
        self.assertEqual((r.status, r.hit_chunks, r.extra, r.tier_tickets), (Status.OK, 0, b"", None))
        c.ping()
        self.assertEqual(c.counters()[lookups] - before, 1, "exactly one LOOKUP")


if __name__ == "__main__":
    unittest.main()
