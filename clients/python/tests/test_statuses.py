"""Every status of docs/PROTOCOL.md §6.9 reached from Python against a real server."""

import itertools
import struct
import time
import unittest

from support import ServerTestCase, counter

import kvstash
from kvstash import RequestType, Status
from kvstash import descriptor as d
from kvstash.keyrange import key_range

_ids = itertools.count(50_000)
LAYOUT = kvstash.Layout("py-status", layers=2, hidden=64, dtype="float16")     # 8 KiB chunks at C = 16
RESERVED, PINNED, EMPTY_PREPARES, RECLAIMED, WIRE_MALFORMED, NO_SPACE_COUNT = 1, 2, 20, 16, 49, 18


def ids(n, tag):
    return [(tag, k) for k in range(n)]


class StatusTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 4 << 20, "chunk_tokens": 16}               # 512 slots of 8 KiB

    def setUp(self):
        self.c = self.connect()
        self.instance = next(_ids)
        self.assertEqual(self.c.register(self.instance, LAYOUT).status, Status.OK)

    def stored(self, keys):
        p = self.c.prepare_store(self.instance, keys)
        self.assertEqual(p.status, Status.OK, p)
        for i in range(len(p.slots)):
            self.assertEqual(self.c.write_chunk(p, i, bytes([i & 0xFF]) * p.chunk_bytes), Status.OK)
        if p.transfer_id:
            self.assertEqual(self.c.commit_store(self.instance, p).status, Status.OK)
        return p

    def test_should_return_early_without_transfer_when_nothing_to_reserve(self):
        keys = ids(3, 0xA1)
        self.stored(keys)
        before = counter(self.c, EMPTY_PREPARES)
        again = self.c.prepare_store(self.instance, keys)
        self.assertEqual((again.status, again.transfer_id, again.slots, again.chunk_bytes),
                         (Status.OK, 0, [], 0))
        empty = self.c.prepare_store(self.instance)                               # key mode 0: empty range
        self.assertEqual((empty.status, empty.transfer_id, empty.slots), (Status.OK, 0, []))
        self.assertEqual(counter(self.c, EMPTY_PREPARES) - before, 2)
        self.assertEqual(self.c.commit_store(self.instance, 0).status, Status.UNKNOWN_TRANSFER)
        partly = self.c.prepare_store(self.instance, keys + ids(1, 0xA2))         # present chunks skipped
        self.assertEqual([e.range_index for e in partly.slots], [3])
        self.assertEqual(self.c.abort_store(self.instance, partly).status, Status.OK)

    def test_should_answer_unknown_transfer_when_committing_twice(self):
        p = self.c.prepare_store(self.instance, ids(2, 0xB1))
        self.assertEqual(self.c.commit_store(self.instance, p).status, Status.OK)
        second = self.c.commit_store(self.instance, p)
        self.assertEqual(second.status, Status.UNKNOWN_TRANSFER)
        self.assertTrue(second.message)
        aborted = self.c.prepare_store(self.instance, ids(2, 0xB2))
        self.assertEqual(self.c.abort_store(self.instance, aborted).status, Status.OK)
        self.assertEqual(self.c.commit_store(self.instance, aborted).status, Status.UNKNOWN_TRANSFER)
        self.assertEqual(self.c.abort_store(self.instance, aborted).status, Status.UNKNOWN_TRANSFER)
        other = next(_ids)
        self.c.register(other, LAYOUT)
        mine = self.c.prepare_store(self.instance, ids(1, 0xB3))
        self.assertEqual(self.c.commit_store(other, mine).status, Status.UNKNOWN_TRANSFER)   # other instance
        self.assertEqual(self.c.commit_retrieve(self.instance, mine).status, Status.UNKNOWN_TRANSFER)  # kind
        self.assertEqual(self.c.commit_store(self.instance, mine).status, Status.OK)
        self.assertEqual(self.c.commit_store(self.instance, 0x7777_0000_0001).status, Status.UNKNOWN_TRANSFER)

    def test_should_miss_and_pin_nothing_when_retrieving_a_partial_range(self):
        keys = ids(3, 0xC1)
        self.stored(keys[:2])
        pinned = counter(self.c, PINNED)
        miss = self.c.prepare_retrieve(self.instance, keys)
        self.assertEqual((miss.status, miss.transfer_id, miss.slots), (Status.MISS, 0, []))
        self.assertEqual(counter(self.c, PINNED), pinned)
        self.assertEqual(self.c.lookup(self.instance, keys).hit_chunks, 2)
        hit = self.c.prepare_retrieve(self.instance, keys[:2])
        self.assertEqual(hit.status, Status.OK)
        self.assertEqual(self.c.commit_retrieve(self.instance, hit).status, Status.OK)
        reserved = self.c.prepare_store(self.instance, keys[2:])                   # reserved: still a miss
        self.assertEqual(self.c.prepare_retrieve(self.instance, keys).status, Status.MISS)
        self.assertEqual(self.c.abort_store(self.instance, reserved).status, Status.OK)

    def test_should_refuse_prefix_on_another_type_or_with_from_lookup(self):
        keys = ids(2, 0xC2)
        self.stored(keys)
        _, body = key_range(keys, None, 0, -1)
        for request_type in (RequestType.LOOKUP, RequestType.PREPARE_STORE, RequestType.COMMIT_RETRIEVE):
            r = self.c.receive(self.c.send(request_type, self.instance, flags=d.FLAG_PREFIX,
                                           key_mode=d.KEY_MODE_HASHES, body=body))
            self.assertEqual((r.status, r.message), (Status.INVALID_REQUEST, "PREFIX is a PREPARE_RETRIEVE flag"))
        pinned = self.c.lookup(self.instance, keys, pin=True)
        both = self.c.receive(self.c.send(RequestType.PREPARE_RETRIEVE, self.instance, pinned.transfer_id,
                                          flags=d.FLAG_PREFIX | d.FLAG_FROM_LOOKUP))
        self.assertEqual((both.status, both.message), (Status.INVALID_REQUEST, "PREFIX and FROM_LOOKUP together"))
        with self.assertRaisesRegex(ValueError, "prefix"):
            self.c.prepare_retrieve(self.instance, lookup=pinned, prefix=True)
        self.assertEqual(self.c.release(self.instance, pinned).status, Status.OK, "the lookup was not taken over")
        self.assertEqual(counter(self.c, PINNED), 0)

    def test_should_reserve_nothing_when_there_is_no_space(self):
        too_many = self.c.prepare_store(self.instance, ids(600, 0xD1))             # more than 512 slots
        self.assertEqual((too_many.status, too_many.transfer_id), (Status.NO_SPACE, 0))
        self.assertEqual(counter(self.c, RESERVED), 0)
        everything = self.c.prepare_store(self.instance, ids(512, 0xD2))           # evicts what is readable
        self.assertEqual((everything.status, len(everything.slots)), (Status.OK, 512), everything)
        no_space = counter(self.c, NO_SPACE_COUNT)
        one_more = self.c.prepare_store(self.instance, ids(1, 0xD3))
        self.assertEqual(one_more.status, Status.NO_SPACE)
        self.assertEqual(counter(self.c, NO_SPACE_COUNT) - no_space, 1)
        self.assertEqual(counter(self.c, RESERVED), 512)
        self.assertEqual(self.c.abort_store(self.instance, everything).status, Status.OK)
        self.assertEqual(counter(self.c, RESERVED), 0)
        self.assertEqual(self.c.prepare_store(self.instance, ids(1, 0xD3)).status, Status.OK)

    def test_should_refuse_another_layout_for_a_registered_instance(self):
        other = LAYOUT._replace(hidden=128)
        mismatch = self.c.register(self.instance, other)
        self.assertEqual(mismatch.status, Status.LAYOUT_MISMATCH)
        self.assertEqual(self.c.register(next(_ids), other).status, Status.LAYOUT_MISMATCH)  # same model/rank
        self.assertEqual(self.c.register(self.instance, LAYOUT).status, Status.OK)          # idempotent

    def test_should_refuse_invalid_layouts(self):
        for layout in (LAYOUT._replace(layers=0), LAYOUT._replace(model=""), LAYOUT._replace(rank=1),
                       LAYOUT._replace(model="py-huge", hidden=1 << 20)):
            self.assertEqual(self.c.register(next(_ids), layout).status, Status.INVALID_LAYOUT, layout)
        body = d.REGISTER_BODY.pack(1, 0, 2, 64, 99, 0, 4, 0) + b"py-x"            # unknown dtype code
        r = self.c.receive(self.c.send(RequestType.REGISTER, next(_ids), body=body))
        self.assertEqual(r.status, Status.INVALID_LAYOUT)

    def test_should_answer_unknown_instance_when_not_registered(self):
        stranger = next(_ids)
        for r in (self.c.prepare_store(stranger, ids(1, 0xE1)), self.c.lookup(stranger, ids(1, 0xE1)),
                  self.c.prepare_retrieve(stranger, ids(1, 0xE1)), self.c.commit_store(stranger, 1 << 32)):
            self.assertEqual(r.status, Status.UNKNOWN_INSTANCE, r)
        unknown = counter(self.c, 19)
        self.assertEqual(self.c.unregister(stranger).status, Status.OK)             # counted, not refused
        self.assertEqual(counter(self.c, 19) - unknown, 1)
        self.c.prepare_store(self.instance, ids(2, 0xE2))
        self.c.lookup(self.instance, ids(1, 0xE2), pin=True)                        # reserved: no hit, no pin
        ended = self.c.unregister(self.instance)
        self.assertEqual((ended.status, ended.count), (Status.OK, 1))               # the pending store
        self.assertEqual(counter(self.c, RESERVED), 0)
        self.assertEqual(self.c.lookup(self.instance, ids(1, 0xE1)).status, Status.UNKNOWN_INSTANCE)

    def test_should_answer_decoding_statuses_for_bad_records(self):
        c = self.c
        self.assertEqual(c.receive(c.send(99)).status, Status.UNKNOWN_TYPE)
        self.assertEqual(c.receive(c.send(RequestType.SWEEP)).status, Status.UNKNOWN_TYPE)
        self.assertEqual(c.receive(c.send(RequestType.PING, flags=64)).status, Status.INVALID_REQUEST)
        self.assertEqual(c.receive(c.send(RequestType.LOOKUP, self.instance, key_mode=5)).status,
                         Status.MALFORMED)
        self.assertEqual(c.receive(c.send(RequestType.REGISTER, self.instance, body=b"\0" * 8)).status,
                         Status.MALFORMED)
        too_far = c.prepare_store(self.instance, tokens=list(range(32)), to_chunk=3)
        self.assertEqual(too_far.status, Status.INVALID_REQUEST)
        self.assertEqual(c.lookup_all_ranks("py-status", 0, ids(1, 0xF1)).status, Status.INVALID_REQUEST)
        count = struct.pack("<ii", c.max_chunks + 1, 0)
        self.assertEqual(c.receive(c.send(RequestType.LOOKUP, self.instance, key_mode=1, body=count)).status,
                         Status.INVALID_REQUEST)
        store = c.prepare_store(self.instance, ids(1, 0xF4))                       # copy-transport checks
        for slot, offset, length in ((1, 0, 8), (0, -1, 8), (0, store.chunk_bytes - 4, 8),
                                     (0, 0, c.max_inline_bytes + 8)):
            body = d.DATA_BODY.pack(slot, length, offset)
            r = c.receive(c.send(RequestType.WRITE_DATA, self.instance, store.transfer_id, body=body,
                                 data=bytes(length)))
            self.assertEqual(r.status, Status.INVALID_REQUEST, (slot, offset, length))
        self.assertEqual(c.write_data(self.instance, store, 0, 0, b"").status, Status.OK)
        self.assertEqual(c.read_data(self.instance, store, 0, 0, 8).status, Status.UNKNOWN_TRANSFER)  # a store
        self.assertEqual(c.abort_store(self.instance, store).status, Status.OK)
        # A record without a readable correlation id is consumed and never answered.
        malformed = counter(c, WIRE_MALFORMED)
        c.send_raw(RequestType.PING, b"\1\2\3")
        self.assertEqual(c.ping().status, Status.OK)
        self.assertEqual(counter(c, WIRE_MALFORMED) - malformed, 1)

    def test_should_answer_busy_when_the_instance_limit_is_reached(self):
        c = self.c
        registered, busy = [], None
        model = LAYOUT.model.encode()
        body = d.REGISTER_BODY.pack(1, 0, 2, 64, int(LAYOUT.dtype), 0, len(model), 0) + model
        for _ in range(0, 4200, 256):                     # pipelined: 256 REGISTERs in flight per batch
            batch = []
            for _ in range(256):
                instance = next(_ids)
                batch.append((instance, c.send(RequestType.REGISTER, instance, body=body)))
            for instance, correlation in batch:
                r = c.receive(correlation)
                if r.status == Status.OK:
                    registered.append(instance)
                elif r.status == Status.BUSY:
                    busy = r
                else:
                    self.fail(r)
            if busy is not None:
                break
        self.assertIsNotNone(busy, "no BUSY after %d instances" % len(registered))
        pending = [c.send(RequestType.UNREGISTER, instance) for instance in registered]
        self.assertTrue(all(c.receive(p).status == Status.OK for p in pending))
        self.assertEqual(c.register(next(_ids), LAYOUT).status, Status.OK)

    def test_should_clear_unpinned_chunks_and_force_the_rest(self):
        keys = ids(2, 0xF2)
        self.stored(keys)
        pinned = self.c.lookup(self.instance, keys, pin=True)
        self.assertEqual(pinned.hit_chunks, 2)
        reserved = self.c.prepare_store(self.instance, ids(1, 0xF3))
        self.c.clear()
        self.assertEqual(self.c.lookup(self.instance, keys).hit_chunks, 2)          # pinned ones stay
        forced = self.c.clear(force=True)
        self.assertEqual(forced.status, Status.OK)
        self.assertGreaterEqual(forced.count, 2)
        self.assertEqual(self.c.lookup(self.instance, keys).hit_chunks, 0)
        self.assertEqual(self.c.release(self.instance, pinned).status, Status.UNKNOWN_TRANSFER)
        self.assertEqual(self.c.commit_store(self.instance, reserved).status, Status.UNKNOWN_TRANSFER)
        self.assertEqual(counter(self.c, RESERVED), 0)


class LeaseTest(ServerTestCase):
    """A short lease (300 ms): an expired reservation is fenced and its commit changes nothing."""
    SERVER_OPTIONS = {"pool_bytes": 4 << 20, "chunk_tokens": 16, "lease_ms": 300}

    def test_should_fence_and_refuse_a_commit_when_the_lease_expired(self):
        c = self.connect()
        instance = next(_ids)
        self.assertEqual(c.register(instance, LAYOUT).status, Status.OK)
        p = c.prepare_store(instance, ids(2, 0x1EA5E))
        self.assertTrue(c.is_still_reserved(p, 0))
        reclaimed = counter(c, RECLAIMED)
        time.sleep(0.6)
        self.assertFalse(c.is_still_reserved(p, 0))
        self.assertEqual(c.write_chunk(p, 0, b"late"), Status.UNKNOWN_TRANSFER)
        self.assertEqual(c.commit_store(instance, p).status, Status.UNKNOWN_TRANSFER)
        self.assertEqual(counter(c, RECLAIMED) - reclaimed, 1)
        self.assertEqual(c.lookup(instance, ids(2, 0x1EA5E)).hit_chunks, 0)
        self.assertEqual(counter(c, RESERVED), 0)


if __name__ == "__main__":
    unittest.main()
