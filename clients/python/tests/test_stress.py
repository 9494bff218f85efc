"""Cross-language stress: a Python producer and the Java server exchange >= 10^5 payload-bearing records
(WRITE_DATA / READ_DATA of random length, offset and slot, up to 64 in flight, so records of every size
wrap around both rings), every byte checked against a local mirror and by SHA-256 against the pool.

Forbidden outcomes: a response lost, duplicated or out of request order; a READ_DATA returning bytes
other than the last ones written there; a chunk in the pool whose SHA-256 differs from the mirror's.
"""

import hashlib
import os
import random
import sys
import time
import unittest

from support import ServerTestCase

import kvstash
from kvstash import RequestType, Status
from kvstash import descriptor as d

RECORDS = int(os.environ.get("KVSTASH_STRESS_RECORDS", "100000"))
WINDOW = 64
CHUNKS_PER_ROUND = 32
LAYOUT = kvstash.Layout("py-stress", layers=4, hidden=256, dtype="float16")     # 64 KiB chunks at C = 16


class StressTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": 16}

    def test_should_exchange_every_record_intact(self):
        with self.diagnosed():
            self.exchange_every_record_intact()

    def exchange_every_record_intact(self):
        rng = random.Random(20240607)
        c = self.connect()
        instance = 1
        self.assertEqual(c.register(instance, LAYOUT).status, Status.OK)
        requests = responses = data_bytes = 0
        started = time.monotonic()
        round_no = 0
        while requests < RECORDS:
            round_no += 1
            keys = [(round_no, k) for k in range(CHUNKS_PER_ROUND)]
            store = c.prepare_store(instance, keys)
            self.assertEqual((store.status, len(store.slots)), (Status.OK, CHUNKS_PER_ROUND), store)
            chunk = store.chunk_bytes
            mirror = [bytearray(chunk) for _ in store.slots]
            offsets = [e.offset for e in store.slots]

            def piece(chunk=chunk):
                slot = rng.randrange(CHUNKS_PER_ROUND)
                length = rng.randrange(32768) if rng.random() < 0.05 else rng.randrange(600)
                offset = rng.randrange(chunk - length + 1)
                return slot, offset, length

            # Store phase: every byte of every chunk written once in order, then random overwrites.
            plan = [(s, o, min(c.max_inline_bytes, chunk - o)) for s in range(CHUNKS_PER_ROUND)
                    for o in range(0, chunk, c.max_inline_bytes)]
            plan += [piece() for _ in range(1500)]
            in_flight = []
            for slot, offset, length in plan:
                data = rng.randbytes(length)
                mirror[slot][offset:offset + length] = data
                correlation = c.send(RequestType.WRITE_DATA, instance, store.transfer_id,
                                     body=d.DATA_BODY.pack(slot, length, offset), data=data)
                in_flight.append((correlation, slot))
                requests += 1
                data_bytes += length
                if len(in_flight) >= WINDOW:
                    responses += self.check_write(c, in_flight.pop(0), offsets, chunk)
            while in_flight:
                responses += self.check_write(c, in_flight.pop(0), offsets, chunk)
            self.assertEqual(c.commit_store(instance, store).status, Status.OK)

            # Retrieve phase: random READ_DATA pieces checked against the mirror, whole chunks by SHA-256.
            got = c.prepare_retrieve(instance, keys)
            self.assertEqual(got.status, Status.OK, got)
            for i, entry in enumerate(got.slots):
                data = c.read_chunk(got, i)
                self.assertEqual(hashlib.sha256(data).digest(), hashlib.sha256(mirror[entry.range_index]).digest(),
                                 "chunk %d of round %d torn" % (i, round_no))
            for _ in range(1500):
                slot, offset, length = piece()
                correlation = c.send(RequestType.READ_DATA, instance, got.transfer_id,
                                     body=d.DATA_BODY.pack(slot, length, offset))
                in_flight.append((correlation, slot, offset, length))
                requests += 1
                data_bytes += length
                if len(in_flight) >= WINDOW:
                    responses += self.check_read(c, in_flight.pop(0), mirror)
            while in_flight:
                responses += self.check_read(c, in_flight.pop(0), mirror)
            self.assertEqual(c.commit_retrieve(instance, got).status, Status.OK)
            requests += 4
            responses += 4
        elapsed = time.monotonic() - started
        self.assertEqual(responses, requests)
        self.assertEqual(c._stash, {}, "responses arrived out of request order")
        self.assertEqual(c.counter(49), 0, "the server found malformed records")
        self.assertEqual(c.counter(53), 0, "the server dropped responses")
        print("\nstress: %d requests + %d responses, %.1f MB of payload in %.1f s (%.0f records/s), "
              "%d deferred by back pressure" % (requests, responses, data_bytes / 1e6, elapsed,
                                                 (requests + responses) / elapsed, c.counter(54)),
              file=sys.stderr)

    def test_should_answer_every_request_when_the_client_stops_consuming(self):
        """Back pressure (§7.6): 200 READ_DATA of 32 KiB (6.4 MB of answers for a 256 KiB response ring)
        sent without reading a response; the server defers, nothing is dropped, all arrive in order."""
        c = self.connect()
        instance = 2
        self.assertEqual(c.register(instance, LAYOUT).status, Status.OK)
        store = c.prepare_store(instance, [(0xB9, 0)])
        data = os.urandom(store.chunk_bytes)
        self.assertEqual(c.write_chunk(store, 0, data), Status.OK)
        self.assertEqual(c.commit_store(instance, store).status, Status.OK)
        got = c.prepare_retrieve(instance, [(0xB9, 0)])
        deferred = c.counter(54)
        step = c.max_inline_bytes
        sent = []
        for k in range(200):
            offset = (k * step) % store.chunk_bytes
            sent.append((c.send(RequestType.READ_DATA, instance, got.transfer_id,
                                body=d.DATA_BODY.pack(0, step, offset)), offset))
        self.assertEqual(c._stash, {})
        for correlation, offset in sent:
            r = c.receive(correlation)
            self.assertEqual((r.status, r.extra), (Status.OK, data[offset:offset + step]))
        self.assertEqual(c._stash, {})
        self.assertGreater(c.counter(54), deferred, "the server never had to defer")
        self.assertEqual(c.counter(53), 0)
        self.assertEqual(c.commit_retrieve(instance, got).status, Status.OK)

    def check_write(self, c, pending, offsets, chunk):
        correlation, slot = pending
        r = c.receive(correlation)
        self.assertEqual(r.correlation_id, correlation)
        self.assertEqual((r.status, r.request_type), (Status.OK, RequestType.WRITE_DATA), r)
        self.assertEqual(r.slots, [kvstash.SlotEntry(slot, r.slots[0].generation, offsets[slot])])
        self.assertEqual(r.chunk_bytes, chunk)
        return 1

    def check_read(self, c, pending, mirror):
        correlation, slot, offset, length = pending
        r = c.receive(correlation)
        self.assertEqual((r.correlation_id, r.status), (correlation, Status.OK), r)
        expected = bytes(mirror[slot][offset:offset + length])
        if r.extra != expected:
            self.fail("READ_DATA slot %d offset %d length %d: %d bytes differ"
                      % (slot, offset, length, sum(a != b for a, b in zip(r.extra, expected))))
        return 1


if __name__ == "__main__":
    unittest.main()
