"""Python and Java workers on one server: chunks stored by one language are retrieved by the other, bytes
verified by SHA-256 both ways, on both transports (Java peer: io.kvstash.testkit.TestWorker, server:
io.kvstash.testkit.TestServer)."""

import hashlib
import itertools
import os
import unittest

from support import ServerTestCase, java_random_bytes, run_peer

import kvstash
from kvstash import Status

_ids = itertools.count(70_000)
MODEL, LAYERS, HIDDEN, DTYPE = "interop", 2, 64, "float16"
LAYOUT = kvstash.Layout(MODEL, layers=LAYERS, hidden=HIDDEN, dtype=DTYPE)
CHUNKS = 3


def tokens_of(base, chunk_tokens):
    return list(range(base, base + CHUNKS * chunk_tokens))


class InteropTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 64 << 20, "chunk_tokens": 16}
    _bases = itertools.count(1_000_000, 10_000)

    def python_store(self, base, copy_transport):
        c = self.connect(copy_transport=copy_transport)
        instance = next(_ids)
        self.assertEqual(c.register(instance, LAYOUT).status, Status.OK)
        prepared = c.prepare_store(instance, tokens=tokens_of(base, c.chunk_tokens))
        self.assertEqual(len(prepared.slots), CHUNKS, prepared)
        digests = {}
        for i, entry in enumerate(prepared.slots):
            data = os.urandom(prepared.chunk_bytes)
            self.assertEqual(c.write_chunk(prepared, i, data), Status.OK)
            digests[entry.range_index] = hashlib.sha256(data).hexdigest()
        self.assertEqual(c.commit_store(instance, prepared).status, Status.OK)
        return digests

    def python_retrieve(self, base, copy_transport):
        c = self.connect(copy_transport=copy_transport)
        instance = next(_ids)
        self.assertEqual(c.register(instance, LAYOUT).status, Status.OK)
        prepared = c.prepare_retrieve(instance, kvstash.chunk_hashes(tokens_of(base, c.chunk_tokens), c.chunk_tokens))
        self.assertEqual(prepared.status, Status.OK, prepared)
        chunks = {e.range_index: c.read_chunk(prepared, i) for i, e in enumerate(prepared.slots)}
        self.assertEqual(c.commit_retrieve(instance, prepared).status, Status.OK)
        return chunks

    def java(self, command, base, *extra):
        code, digests, done = run_peer(command, self.server.directory, next(_ids), MODEL, LAYERS, HIDDEN, DTYPE,
                                       base, CHUNKS, *extra)
        self.assertEqual(code, 0, done)
        return digests

    def test_should_retrieve_in_java_what_python_stored(self):
        for python_copy, java_copy in ((False, False), (True, True)):
            with self.subTest(python_copy=python_copy, java_copy=java_copy):
                base = next(self._bases)
                stored = self.python_store(base, python_copy)
                self.assertEqual(self.java("retrieve", base, *(["copy"] if java_copy else [])), stored)

    def test_should_retrieve_in_python_what_java_stored(self):
        for java_copy, python_copy in ((False, False), (True, True)):
            with self.subTest(java_copy=java_copy, python_copy=python_copy):
                base, seed = next(self._bases), 4242
                stored = self.java("store", base, seed, *(["copy"] if java_copy else []))
                self.assertEqual(sorted(stored), list(range(CHUNKS)))
                chunks = self.python_retrieve(base, python_copy)
                self.assertEqual({k: hashlib.sha256(v).hexdigest() for k, v in chunks.items()}, stored)
                self.assertEqual(chunks[1], java_random_bytes(seed + 1, len(chunks[1])))


if __name__ == "__main__":
    unittest.main()
