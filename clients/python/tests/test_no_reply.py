"""Retrieves in one round trip (docs/PROTOCOL.md §6.2 NO_REPLY, §7.7) from Python against a real server: the
COMMIT_RETRIEVE goes without an answer once the chunks are read and checked, the pins still go, nothing is left
behind in the client or the rings, failures are counted, and the slot-word fence still catches a reused slot."""

import hashlib
import itertools
import os
import time
import unittest

from support import ServerTestCase, counter_named

import kvstash
from kvstash import RequestType, Status, transfers
from kvstash import descriptor as d

_ids = itertools.count(70_000)
LAYOUT = kvstash.Layout("py-noreply", layers=2, hidden=64, dtype="float16")     # 8 KiB chunks at C = 16


def digest(data):
    return hashlib.sha256(data).hexdigest()


class _NoReplyCase(ServerTestCase):
    def setUp(self):
        self.c = self.connect()
        self.instance = next(_ids)
        self.assertEqual(self.c.register(self.instance, LAYOUT).status, Status.OK)

    def stored(self, keys):
        """Stores random chunks under ``keys``; returns {range index: digest}."""
        p = self.c.prepare_store(self.instance, keys)
        self.assertEqual(p.status, Status.OK, p)
        written = {}
        for i, entry in enumerate(p.slots):
            data = os.urandom(p.chunk_bytes)
            self.assertEqual(self.c.write_chunk(p, i, data), Status.OK)
            written[entry.range_index] = digest(data)
        self.assertEqual(self.c.commit_store(self.instance, p).status, Status.OK)
        return written

    def count(self, name):
        """A counter once everything this client sent before is decided: the PING is answered after it."""
        return counter_named(self.c, name)

    def assert_nothing_answered(self):
        """No response is waiting for anyone: the PING of ``count`` was the only record that came back."""
        self.c.ping()
        self.assertEqual(self.c._stash, {}, "a response came for a request that asked for none")
        self.assertIsNone(self.c._response.poll(), "a response is still in the ring")


class OneRoundTripTest(_NoReplyCase):
    SERVER_OPTIONS = {"pool_bytes": 4 << 20, "chunk_tokens": 16}               # 512 slots of 8 KiB

    def test_should_return_verified_bytes_in_one_round_trip_and_release_the_pins(self):
        self.assertTrue(self.c.no_reply, "a 3.1 server takes NO_REPLY")
        keys = [(0xA1, k) for k in range(3)]
        written = self.stored(keys)
        commits, retrieved = self.count("requests.commit_retrieve.ok"), self.count("retrieved_chunks")
        failures = self.count("no_reply_failures")
        sent = self.c._next_correlation

        r = self.c.prepare_retrieve(self.instance, keys)
        self.assertEqual(r.status, Status.OK, r)
        read = {e.range_index: digest(self.c.read_chunk(r, i)) for i, e in enumerate(r.slots)}
        self.assertEqual(read, written)
        self.assertEqual(self.count("pinned_chunks"), 3)
        self.assertIsNone(self.c.commit_retrieve(self.instance, r, reply=False))

        self.assertEqual(self.c._next_correlation - sent, 3, "PREPARE, PING, COMMIT: nothing else was sent")
        self.assertEqual(self.count("pinned_chunks"), 0, "the pins went without an answer")
        self.assertEqual(self.count("pending_transfers"), 0)
        self.assertEqual(self.count("requests.commit_retrieve.ok") - commits, 1, "counted as any commit")
        self.assertEqual(self.count("retrieved_chunks") - retrieved, 3)
        self.assertEqual(self.count("no_reply_failures") - failures, 0)
        self.assert_nothing_answered()
        self.assertEqual(self.c.commit_retrieve(self.instance, r).status, Status.UNKNOWN_TRANSFER, "already committed")

    def test_should_commit_a_tensor_transfer_without_waiting_and_with_a_reply_when_asked(self):
        keys = [(0xA2, k) for k in range(4)]
        written = self.stored(keys)
        chunks = {}

        def read(prepare, first):
            out = []
            for i, entry in enumerate(prepare.slots):
                data = self.c.read_chunk(prepare, i)
                chunks[first + entry.range_index] = digest(data) if data is not None else None
                out.append(Status.OK if data is not None else Status.UNKNOWN_TRANSFER)
            return out

        commits = self.count("requests.commit_retrieve.ok")
        result = transfers.retrieve(self.c, self.instance, read, keys)
        self.assertTrue(result.ok, result)
        self.assertEqual(sorted(result.done), [0, 1, 2, 3])
        self.assertEqual(chunks, written)
        self.assertEqual(self.count("pinned_chunks"), 0)
        self.assertEqual(self.count("requests.commit_retrieve.ok") - commits, 1)
        self.assert_nothing_answered()
        answered = transfers.retrieve(self.c, self.instance, read, keys, reply=True)
        self.assertTrue(answered.ok, answered)
        self.assertEqual(self.count("requests.commit_retrieve.ok") - commits, 2)
        self.assert_nothing_answered()

    def test_should_keep_no_response_and_no_transfer_after_thousands_of_retrieves_in_one_round_trip(self):
        keys = [(0xA3, 0)]
        written = self.stored(keys)
        commits = self.count("requests.commit_retrieve.ok")
        back_pressure, dropped = self.count("back_pressure"), self.count("responses_dropped")
        n = 5000
        for _ in range(n):
            r = self.c.prepare_retrieve(self.instance, keys)
            self.assertEqual(digest(self.c.read_chunk(r, 0)), written[0])
            self.assertIsNone(self.c.commit_retrieve(self.instance, r, reply=False))
        self.assert_nothing_answered()
        self.assertEqual(self.count("requests.commit_retrieve.ok") - commits, n)
        self.assertEqual(self.count("pinned_chunks"), 0)
        self.assertEqual(self.count("pending_transfers"), 0, "no transfer left behind")

        # Back to back, with no request in between that waits: were they answered, the answers would fill the
        # response ring (the server would defer requests for room) and land in the client's stash.
        failures = self.count("no_reply_failures")
        burst = 4 * self.c.response_capacity // 64
        for k in range(burst):
            self.c.release(self.instance, 0x5EED0000 + k, reply=False)
        self.assertEqual(self.count("no_reply_failures") - failures, burst)
        self.assertEqual(self.count("back_pressure") - back_pressure, 0, "no answer took room in the response ring")
        self.assertEqual(self.count("responses_dropped") - dropped, 0)
        self.assert_nothing_answered()

    def test_should_count_a_failed_commit_that_asked_for_no_answer_and_answer_nothing(self):
        failures = self.count("no_reply_failures")
        unknown = self.count("requests.commit_retrieve.unknown_transfer")
        self.assertIsNone(self.c.commit_retrieve(self.instance, 0xBAD0BAD, reply=False))
        self.assertEqual(self.count("no_reply_failures") - failures, 1)
        self.assertEqual(self.count("requests.commit_retrieve.unknown_transfer") - unknown, 1)
        self.assertIsNone(self.c.release(self.instance, 0xBAD0BAD, reply=False))
        self.assertEqual(self.count("no_reply_failures") - failures, 2)
        self.assert_nothing_answered()

    def test_should_refuse_no_reply_on_every_other_type_and_answer_the_refusal(self):
        for request_type in (RequestType.PING, RequestType.LOOKUP, RequestType.COMMIT_STORE, RequestType.ABORT_STORE,
                             RequestType.PREPARE_RETRIEVE, RequestType.STATS):
            r = self.c.receive(self.c.send(request_type, self.instance, 1, flags=d.FLAG_NO_REPLY))
            self.assertEqual((r.status, r.message),
                             (Status.INVALID_REQUEST, "NO_REPLY is a COMMIT_RETRIEVE and RELEASE flag"), request_type)
        self.assert_nothing_answered()

    def test_should_wait_for_the_answer_of_a_server_without_no_reply(self):
        keys = [(0xA4, 0)]
        self.stored(keys)
        self.c.no_reply = False                     # as a 3.0 server's control file says
        r = self.c.prepare_retrieve(self.instance, keys)
        sent = self.c._next_correlation
        self.assertIsNone(self.c.commit_retrieve(self.instance, r, reply=False))
        self.assertEqual(self.c._stash, {}, "its answer was awaited, not left behind")
        self.assertEqual(self.c._next_correlation - sent, 1)
        self.assertEqual(self.count("pinned_chunks"), 0)


class FenceTest(_NoReplyCase):
    """A short lease (300 ms): a retrieve whose pins ran out and whose slot was reused before it was read fails its
    check, whether the commit goes with an answer or without."""
    SERVER_OPTIONS = {"pool_bytes": 4 << 20, "chunk_tokens": 16, "lease_ms": 300}

    def reused(self, keys):
        """A PREPARE_RETRIEVE of ``keys`` whose lease then ran out and whose chunks were cleared and stored again."""
        self.stored(keys)
        r = self.c.prepare_retrieve(self.instance, keys)
        self.assertEqual(r.status, Status.OK, r)
        time.sleep(0.6)
        self.assertEqual(self.count("pinned_chunks"), 0, "the lease sweep dropped the pins")
        self.assertGreaterEqual(self.c.clear().count, len(keys))
        self.stored(keys)
        return r

    def test_should_catch_a_slot_reused_between_prepare_and_read_and_count_the_late_commit(self):
        keys = [(0xF1, k) for k in range(2)]
        r = self.reused(keys)
        self.assertEqual([self.c.read_chunk(r, i) for i in range(len(r.slots))], [None, None], "fenced")
        failures = self.count("no_reply_failures")
        self.assertIsNone(self.c.commit_retrieve(self.instance, r, reply=False))
        self.assertEqual(self.count("no_reply_failures") - failures, 1, "its lease was over: UNKNOWN_TRANSFER")
        self.assert_nothing_answered()

    def test_should_list_the_reused_chunks_of_a_tensor_transfer_as_failed(self):
        keys = [(0xF2, k) for k in range(2)]
        self.stored(keys)

        def read(prepare, first):
            time.sleep(0.6)                         # the lease runs out while the chunks are read ...
            self.c.clear()                          # ... and their slots are reused
            self.stored(keys)
            return [Status.OK if self.c.read_chunk(prepare, i) is not None else Status.UNKNOWN_TRANSFER
                    for i in range(len(prepare.slots))]

        result = transfers.retrieve(self.c, self.instance, read, keys)
        self.assertEqual((result.status, result.done, sorted(result.failed)), (Status.OK, [], [0, 1]))
        answered = transfers.retrieve(self.c, self.instance, read, keys, reply=True)
        self.assertEqual((answered.status, sorted(answered.failed)), (Status.UNKNOWN_TRANSFER, [0, 1]))
        self.assert_nothing_answered()


if __name__ == "__main__":
    unittest.main()
