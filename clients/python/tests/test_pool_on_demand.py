"""A pool committed on demand (``serve --prepare-pool on-demand``): the server commits memory as the store grows,
its counters say so, a client does not commit the whole pool by connecting, and the bytes are exact. Server and
client in separate processes; memory read from /proc."""

import hashlib
import os
import unittest

from support import Server

import kvstash
from kvstash import Status

MIB = 1 << 20
POOL_BYTES = 512 * MIB
HEADROOM = 32 * MIB
# 2 x 8 layers x 16 tokens x 512 x 2 bytes: 256 KiB chunks, 64 to a 16 MiB region
LAYOUT = dict(layers=8, hidden=512, dtype="float16")


def rss_shmem(pid="self"):
    """Bytes of shared memory (tmpfs, shared mappings) mapped in a process's page tables, from /proc."""
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) * 1024
    raise unittest.SkipTest("no RssShmem in /proc/%s/status" % pid)


class PoolOnDemandTest(unittest.TestCase):

    def start(self, **options):
        server = Server(pool_bytes=POOL_BYTES, chunk_tokens=16, **options).start()
        self.addCleanup(server.close)
        return server

    def store(self, client, instance, first, count, digests):
        prepared = client.prepare_store(instance, [(7, k) for k in range(first, first + count)])
        self.assertEqual(prepared.status, Status.OK, prepared)
        for i, entry in enumerate(prepared.slots):
            data = os.urandom(prepared.chunk_bytes)
            self.assertEqual(client.write_chunk(prepared, i, data), Status.OK)
            digests[first + entry.range_index] = hashlib.sha256(data).digest()
        self.assertEqual(client.commit_store(instance, prepared).status, Status.OK)

    def test_should_commit_memory_as_the_store_grows_and_keep_every_byte(self):
        server = self.start(on_demand_headroom=HEADROOM)
        with kvstash.connect(server.directory) as client:
            self.assertTrue(client.pool_on_demand)
            counters = client.counters()
            self.assertEqual(counters["pool_bytes_configured"], POOL_BYTES)
            committed_at_start = counters["pool_bytes_committed"]
            self.assertGreaterEqual(committed_at_start, HEADROOM)
            self.assertLessEqual(committed_at_start, HEADROOM + 16 * MIB, "well below the configured pool")
            self.assertLess(rss_shmem(server.pid), committed_at_start + 16 * MIB, "the server maps what it committed")

            instance = 41
            self.assertEqual(client.register(instance, kvstash.Layout("on-demand", **LAYOUT)).status, Status.OK)
            digests = {}
            stored_bytes = 200 * MIB
            chunks = stored_bytes // (256 * 1024)
            for first in range(0, chunks, 16):
                self.store(client, instance, first, 16, digests)
            client.ping()                       # the counters of the last commit are written after its answer
            counters = client.counters()
            committed = counters["pool_bytes_committed"]
            self.assertEqual(counters["readable_chunks"], chunks)
            self.assertEqual(counters["evictions"], 0)
            self.assertGreaterEqual(committed, stored_bytes, "every stored chunk lies in committed memory")
            self.assertLessEqual(committed, stored_bytes + HEADROOM + 16 * MIB, "committed only ahead by the headroom")
            self.assertLess(committed, POOL_BYTES)
            server_rss = rss_shmem(server.pid)
            self.assertGreater(server_rss, stored_bytes * 0.9, "the server's pages track what it committed")
            self.assertLess(server_rss, committed + 32 * MIB)

            prepared = client.prepare_retrieve(instance, [(7, k) for k in range(chunks)])
            self.assertEqual(prepared.status, Status.OK, prepared)
            for i, entry in enumerate(prepared.slots):
                data = client.read_chunk(prepared, i)
                self.assertIsNotNone(data)
                self.assertEqual(hashlib.sha256(data).digest(), digests[entry.range_index], "chunk %d" % i)
            self.assertEqual(client.commit_retrieve(instance, prepared).status, Status.OK)

    def test_should_not_commit_the_whole_pool_when_a_client_connects(self):
        server = self.start(on_demand_headroom=HEADROOM)
        before = rss_shmem()
        with kvstash.connect(server.directory) as client:
            self.assertEqual(client.ping().status, Status.OK)
            mapped = rss_shmem() - before
            self.assertGreater(mapped, HEADROOM // 2, "the committed prefix is touched at connect")
            self.assertLess(mapped, HEADROOM + 16 * MIB, "a client commits none of the pool past the prefix")
            counters = client.counters()
            self.assertLess(counters["pool_bytes_committed"], POOL_BYTES // 4)


if __name__ == "__main__":
    unittest.main()
