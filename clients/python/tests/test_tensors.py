"""Tensors into and out of the pool (kvstash.tensors) against a real server: slot tensors of every dtype,
contiguous and paged (vLLM layouts) store/retrieve checked bit for bit against an independent gather, the
fencing of PROTOCOL §3.3, a worker killed mid-copy, and the CUDA path when a GPU is present.

torch is optional for the package; these tests skip with the reason when it is missing (``.ci/run`` installs
it in its virtual environment, so CI always runs them). The CUDA tests skip, loudly, without a GPU.
"""

import signal
import subprocess
import sys
import textwrap
import time
import unittest

from support import CLIENT_ROOT, READABLE_CHUNKS, ServerTestCase, counter, evict_least_recent, wait_until

import kvstash
from kvstash import Status

try:
    import torch
except ImportError:                                                # pragma: no cover - depends on the machine
    torch = None
NO_TORCH = "torch is not installed (pip install 'kvstash[torch]'; .ci/run installs it)"
NO_CUDA = "no CUDA device: the GPU tests run on a machine with one (torch.cuda.is_available() is False)"
HAS_CUDA = torch is not None and torch.cuda.is_available()
if torch is not None:
    # On a 2-core machine whose other core runs the server, torch's intra-op thread pool stalls small
    # index kernels by milliseconds each (its workers wait for a core); one thread keeps the tests quick.
    torch.set_num_threads(1)

RESERVED, PINNED = 1, 2
DTYPES = ("bfloat16", "float16", "float32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8")
C = 16                                                              # the test server's chunk tokens
BLOCK = 4                                                           # engine block size: 4 blocks a chunk
N = C // BLOCK


def random_tensor(shape, dtype, device="cpu", seed=0):
    """Random bits of any dtype (float8 included): drawn as bytes, viewed as ``dtype``."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    itemsize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
    count = 1
    for d in shape:
        count *= d
    raw = torch.randint(0, 256, (count * itemsize,), dtype=torch.uint8, generator=gen)
    return raw.view(getattr(torch, dtype)).view(shape).to(device)


KINDS = ("kv_blocks", "blocks_kv", "blocks_heads", "mla")


def paged_shape(kind, blocks, heads=2, head=8):
    if kind == "kv_blocks":
        return (2, blocks, BLOCK, heads, head)
    if kind == "blocks_kv":
        return (blocks, 2, BLOCK, heads, head)
    if kind == "blocks_heads":
        return (blocks, heads, BLOCK, 2 * head)
    return (blocks, BLOCK, heads * head)


def reference_chunk(caches, kind, block_ids):
    """The chunk a gather must produce, built block by block with plain slicing (independent of PagedKV):
    [2, L, C, H], or [L, C, H] for MLA, as raw bytes."""
    layers = []
    for cache in caches:
        if kind == "kv_blocks":
            kv = [torch.cat([cache[j, b].reshape(BLOCK, -1) for b in block_ids]) for j in range(2)]
            layers.append(torch.stack(kv))
        elif kind == "blocks_kv":
            kv = [torch.cat([cache[b, j].reshape(BLOCK, -1) for b in block_ids]) for j in range(2)]
            layers.append(torch.stack(kv))
        elif kind == "blocks_heads":          # K = [..., :d], V = [..., d:] of [heads, bs, 2d], token-major
            d = cache.shape[3] // 2
            kv = [torch.cat([cache[b].transpose(0, 1)[:, :, j * d:(j + 1) * d].reshape(BLOCK, -1)
                             for b in block_ids]) for j in range(2)]
            layers.append(torch.stack(kv))
        else:
            layers.append(torch.cat([cache[b] for b in block_ids]))
    chunk = torch.stack(layers, dim=1 if kind != "mla" else 0)
    return chunk.contiguous().view(torch.uint8).reshape(-1)


def block_bytes(cache, kind, block):
    part = cache[:, block] if kind == "kv_blocks" else cache[block]
    return part.contiguous().view(torch.uint8).reshape(-1)


@unittest.skipIf(torch is None, NO_TORCH)
class TensorTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 64 << 20, "chunk_tokens": C}
    _next = [50_000]

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with kvstash.connect(cls.server.directory) as c:             # the largest layout sets the slot size
            assert c.register(1, kvstash.Layout("t-size", layers=4, hidden=64, dtype="float32")).ok

    def instance(self, client, layout):
        self._next[0] += 1
        r = client.register(self._next[0], layout)
        self.assertEqual(r.status, Status.OK, r)
        return self._next[0]

    def tokens(self, chunks, extra=0):
        self._next[0] += 1
        base = self._next[0] * 1000
        return list(range(base, base + chunks * C + extra))

    def test_should_give_a_zero_copy_slot_tensor_of_the_layout_dtype_and_shape(self):
        c = self.connect()
        for dtype in DTYPES:
            for mla in (False, True):
                layout = kvstash.Layout("t-view-%s-%s" % (dtype, mla), layers=3, hidden=8, dtype=dtype, mla=mla)
                worker = self.instance(c, layout)
                tokens = self.tokens(1)
                p = c.prepare_store(worker, tokens=tokens)
                view = c.slot_tensor(p, 0)
                self.assertEqual(view.dtype, getattr(torch, dtype))
                self.assertEqual(tuple(view.shape), layout.shape(C))
                self.assertEqual(view.device.type, "cpu")
                data = random_tensor(layout.shape(C), dtype, seed=len(dtype))
                view.copy_(data)                                     # written through the tensor ...
                self.assertEqual(c.commit_store(worker, p).status, Status.OK)
                del view
                r = c.prepare_retrieve(worker, tokens=tokens)        # ... read back through the byte API
                self.assertEqual(r.status, Status.OK, r)
                self.assertEqual(bytes(c.read_chunk(r, 0)), data.view(torch.uint8).numpy().tobytes())
                self.assertEqual(c.commit_retrieve(worker, r).status, Status.OK)

    def test_should_store_and_retrieve_contiguous_tensors_of_every_dtype(self):
        c = self.connect()
        for dtype in DTYPES:
            layout = kvstash.Layout("t-bulk-" + dtype, layers=2, hidden=16, dtype=dtype)
            worker = self.instance(c, layout)
            tokens = self.tokens(3)
            source = random_tensor((3,) + layout.shape(C), dtype, seed=3)
            stored = c.store_tensors(worker, source, tokens=tokens)
            self.assertTrue(stored.ok, stored)
            self.assertEqual(stored.done, [0, 1, 2])
            self.assertEqual(stored.bytes, 3 * layout.chunk_bytes(C))
            again = c.store_tensors(worker, source, tokens=tokens)              # already stored: skipped
            self.assertTrue(again.ok, again)
            self.assertEqual((again.done, again.present), ([], [0, 1, 2]))
            flat = [torch.zeros(layout.chunk_bytes(C) // source.element_size(), dtype=source.dtype)
                    for _ in range(3)]                                          # any shape of the same size
            got = c.retrieve_tensors(worker, flat, tokens=tokens)
            self.assertTrue(got.ok, got)
            for k in range(3):
                self.assertTrue(torch.equal(flat[k].view(torch.uint8), source[k].reshape(-1).view(torch.uint8)))
        self.assertEqual(counter(c, RESERVED), 0)
        self.assertEqual(counter(c, PINNED), 0)

    def test_should_gather_and_scatter_every_paged_layout_exactly(self):
        c = self.connect()
        for kind in KINDS:
            for dtype in DTYPES:
                with self.subTest(kind=kind, dtype=dtype):
                    self._paged_round_trip(c, kind, dtype)

    def _paged_round_trip(self, c, kind, dtype):
        blocks, layers, first = 37, 3, 2
        src = [random_tensor(paged_shape(kind, blocks), dtype, seed=11 + layer) for layer in range(layers)]
        paged = kvstash.PagedKV(src)
        self.assertEqual(paged.kind, kind)
        worker = self.instance(c, paged.layout("t-paged-%s-%s" % (kind, dtype)))
        tokens = self.tokens(5, extra=BLOCK + 1)                    # 5 full chunks and a partial one
        table = torch.randperm(blocks, generator=torch.Generator().manual_seed(5))[:6 * N]
        # Chunks 2..4 of the prompt: their blocks start mid-way through the request's block table.
        stored = c.store_paged(worker, paged, table[first * N:], tokens=tokens, from_chunk=first)
        self.assertTrue(stored.ok, stored)
        self.assertEqual(stored.done, [0, 1, 2])
        self.assertEqual(c.lookup(worker, tokens=tokens).hit_chunks, 0)      # chunks 0, 1 were not stored
        self.assertEqual(c.lookup(worker, tokens=tokens, from_chunk=first).hit_chunks, 3)   # never the partial
        r = c.prepare_retrieve(worker, tokens=tokens, from_chunk=first)
        for i in range(3):
            ids = table[(first + i) * N:(first + i + 1) * N].tolist()
            chunk = torch.frombuffer(c.read_chunk(r, i), dtype=torch.uint8)
            self.assertTrue(torch.equal(chunk, reference_chunk(src, kind, ids)), "chunk %d" % i)
        c.commit_retrieve(worker, r)
        dst = [torch.zeros(paged_shape(kind, blocks), dtype=getattr(torch, dtype)) for _ in range(layers)]
        out_table = torch.randperm(blocks, generator=torch.Generator().manual_seed(9))[:3 * N]
        got = c.retrieve_paged(worker, kvstash.PagedKV(dst, kind), out_table, tokens=tokens, from_chunk=first)
        self.assertTrue(got.ok, got)
        for layer in range(layers):
            for k in range(3 * N):
                self.assertTrue(torch.equal(block_bytes(dst[layer], kind, int(out_table[k])),
                                            block_bytes(src[layer], kind, int(table[first * N + k]))),
                                "layer %d block %d" % (layer, k))
        untouched = set(range(blocks)) - set(out_table.tolist())
        for layer in range(layers):
            for b in untouched:
                self.assertEqual(int(block_bytes(dst[layer], kind, b).count_nonzero()), 0)

    def test_should_leave_blocks_marked_minus_one_unwritten_on_retrieve(self):
        c = self.connect()
        for kind in ("kv_blocks", "blocks_heads", "mla"):
            blocks = 3 * N + 2
            src = [random_tensor(paged_shape(kind, blocks), "float16", seed=21 + layer) for layer in range(2)]
            worker = self.instance(c, kvstash.PagedKV(src).layout("t-skip-" + kind))
            keys = [(worker, k) for k in range(2)]
            self.assertTrue(c.store_paged(worker, kvstash.PagedKV(src), list(range(2 * N)), keys).ok)
            dst = [torch.zeros_like(t) for t in src]
            # The engine already holds the first block of chunk 0 (a local prefix hit): it is not written.
            table = [-1] + list(range(N + 1, 3 * N + 1))
            got = c.retrieve_paged(worker, kvstash.PagedKV(dst, kind), table, keys)
            self.assertTrue(got.ok, got)
            for layer in range(2):
                for k in range(1, 2 * N):
                    self.assertTrue(torch.equal(block_bytes(dst[layer], kind, table[k]),
                                                block_bytes(src[layer], kind, k)))
                for b in range(N + 1):
                    self.assertEqual(int(block_bytes(dst[layer], kind, b).count_nonzero()), 0, "block %d" % b)
        with self.assertRaisesRegex(ValueError, "every block"):
            c.store_paged(worker, kvstash.PagedKV(src), [-1] + list(range(1, 2 * N)), [(worker, 9), (worker, 10)])
        self.assertEqual(counter(c, RESERVED), 0)

    def test_should_refuse_tensors_that_do_not_fit_before_leaving_a_reservation(self):
        c = self.connect()
        layout = kvstash.Layout("t-wrong", layers=2, hidden=16, dtype="bfloat16")
        worker = self.instance(c, layout)
        with self.assertRaisesRegex(TypeError, "float16.*bfloat16"):
            c.store_tensors(worker, torch.zeros((1,) + layout.shape(C), dtype=torch.float16), tokens=self.tokens(1))
        with self.assertRaisesRegex(ValueError, "elements"):
            c.store_tensors(worker, torch.zeros((1, 7), dtype=torch.bfloat16), tokens=self.tokens(1))
        with self.assertRaisesRegex(ValueError, "do not fill chunks"):
            c.store_paged(worker, kvstash.PagedKV([torch.zeros(paged_shape("mla", 8), dtype=torch.bfloat16)]),
                          list(range(N)), tokens=self.tokens(1))
        self.assertEqual(counter(c, RESERVED), 0)
        self.assertEqual(c.lookup(worker, tokens=self.tokens(1)).hit_chunks, 0)

    def test_should_refuse_an_ambiguous_or_unknown_paged_shape(self):
        with self.assertRaisesRegex(ValueError, "cannot tell"):
            kvstash.PagedKV([torch.zeros((2, 2, BLOCK, 2, 8))])
        with self.assertRaisesRegex(ValueError, "5 or 4 dimensions"):
            kvstash.PagedKV([torch.zeros((2, 3))])
        with self.assertRaisesRegex(ValueError, "must be even"):
            kvstash.PagedKV([torch.zeros((2, 3, 4, 5))])
        with self.assertRaisesRegex(ValueError, "layer 1"):
            kvstash.PagedKV([torch.zeros(paged_shape("mla", 8)), torch.zeros(paged_shape("mla", 9))])
        self.assertEqual(kvstash.PagedKV([torch.zeros((2, 2, BLOCK, 2, 8))], "blocks_kv").num_blocks, 2)

    @unittest.skipIf(HAS_CUDA, "this machine has CUDA")
    def test_should_say_clearly_that_there_is_no_cuda_and_keep_working(self):
        c = self.connect()
        with self.assertRaisesRegex(kvstash.CudaUnavailableError, "no CUDA device") as raised:
            c.pin_pool()
        # A KvStashError that leaves the connection usable: callers that drop a lost connection keep this one.
        self.assertIsInstance(raised.exception, kvstash.KvStashError)
        self.assertIs(kvstash.Reason.CUDA_UNAVAILABLE, raised.exception.reason)
        self.assertFalse(raised.exception.connection_lost)
        self.assertIsNone(c.pin_info)
        worker = self.instance(c, kvstash.Layout("t-nocuda", layers=1, hidden=8, dtype="float16"))
        self.assertTrue(c.store_tensors(worker, torch.ones((1, 2, 1, C, 8), dtype=torch.float16),
                                        tokens=self.tokens(1)).ok)
        with self.assertRaises(kvstash.CudaUnavailableError):
            kvstash.connect(self.server.directory, cuda=True)


@unittest.skipIf(torch is None, NO_TORCH)
class LongRangeTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 64 << 20, "chunk_tokens": C}

    def test_should_store_and_retrieve_a_range_over_the_servers_limit_in_one_call(self):
        c = self.connect()
        layout = kvstash.Layout("t-long", layers=1, hidden=8, dtype="float16")     # 4 KiB slots: 5,000 fit
        worker = 77
        self.assertTrue(c.register(worker, layout).ok)
        chunks = 5000                                               # the server takes 1,024 a request
        tokens = list(range(3, 3 + chunks * C + 3))
        source = random_tensor((chunks,) + layout.shape(C), "float16", seed=50)
        stored = c.store_tensors(worker, source, tokens=tokens)
        self.assertTrue(stored.ok, stored)
        self.assertEqual(stored.done, list(range(chunks)))
        self.assertEqual(len(stored.parts), 5)
        # The client hashed the tokens as the server does: the server's own hashing finds the same chunks.
        self.assertEqual(c.lookup(worker, tokens=tokens[:1000 * C]).hit_chunks, 1000)
        self.assertEqual(c.lookup(worker, tokens=tokens).hit_chunks, chunks)
        with self.assertRaisesRegex(ValueError, "at most 1024"):
            c.lookup(worker, tokens=tokens, pin=True)
        out = torch.zeros_like(source)
        got = c.retrieve_tensors(worker, out, tokens=tokens)
        self.assertTrue(got.ok, got)
        self.assertTrue(torch.equal(out.view(torch.uint8), source.view(torch.uint8)))
        # All or nothing across the pieces: a miss in the last one leaves no pin of the first four.
        longer = tokens[:chunks * C] + [9] * C
        self.assertEqual(c.retrieve_tensors(worker, torch.zeros((chunks + 1,) + layout.shape(C), dtype=torch.float16),
                                            tokens=longer).status, Status.MISS)
        self.assertEqual(counter(c, PINNED), 0)
        self.assertEqual(c.clear().count, chunks)


@unittest.skipIf(torch is None, NO_TORCH)
class PrefixTensorTest(ServerTestCase):
    """``prefix=True`` through a real server whose pool (LRU, 4 KiB slots) evicts one chunk of a stored range: the
    leading chunks come back exactly, ``missing`` lists the rest, nothing of theirs is written, no pin is left."""
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": C}
    LAYOUT = kvstash.Layout("t-prefix", layers=1, hidden=16, dtype="float16")     # 1 KiB chunks, 4 KiB slots
    _next = [90_000]

    def setUp(self):
        self.c = self.connect()
        self.c.clear(force=True)                    # one test's chunks never stand in the LRU order of another's
        self._next[0] += 1
        self.worker = self._next[0]
        registered = self.c.register(self.worker, self.LAYOUT)
        self.assertEqual(registered.status, Status.OK, registered)
        self.capacity = registered.slot_capacity

    def stored_with_a_gap(self, chunks, gap, store):
        """Stores ``chunks`` chunks with ``store(keys)``, then evicts chunk ``gap`` only: the chunks before it are
        read again (most recently used), new chunks fill the pool, the least recently used goes."""
        keys = [(self.worker, k) for k in range(chunks)]
        stored = store(keys)
        self.assertTrue(stored.ok, stored)
        for first in range(0, gap, self.c.max_chunks):
            touched = self.c.prepare_retrieve(self.worker, keys[first:min(gap, first + self.c.max_chunks)])
            self.assertEqual(self.c.commit_retrieve(self.worker, touched).status, Status.OK)
        evict_least_recent(self.c, self.worker, self.capacity)
        self.assertEqual(self.c.lookup(self.worker, keys[gap:gap + 1]).hit_chunks, 0, "chunk %d evicted" % gap)
        if gap + 1 < chunks:
            self.assertEqual(self.c.lookup(self.worker, keys[gap + 1:gap + 2]).hit_chunks, 1, "only it")
        return keys

    def assert_nothing_held(self):
        self.assertEqual(counter(self.c, PINNED), 0)
        readable = counter(self.c, READABLE_CHUNKS)
        self.assertEqual(self.c.clear().count, readable, "no pin left: a CLEAR without force removes every chunk")
        self.assertEqual(counter(self.c, READABLE_CHUNKS), 0)

    def test_should_read_the_leading_chunks_and_list_the_rest_as_missing(self):
        source = random_tensor((8,) + self.LAYOUT.shape(C), "float16", seed=81)
        keys = self.stored_with_a_gap(8, 3, lambda k: self.c.store_tensors(self.worker, source, k))
        out = torch.zeros_like(source)
        miss = self.c.retrieve_tensors(self.worker, out, keys)
        self.assertEqual((miss.status, miss.missing), (Status.MISS, []), "without prefix: all or nothing, as before")
        got = self.c.retrieve_tensors(self.worker, out, keys, prefix=True)
        self.assertEqual(got.status, Status.OK, got)
        self.assertFalse(got.ok, "chunks are missing")
        self.assertEqual((got.done, got.failed, got.missing), ([0, 1, 2], [], [3, 4, 5, 6, 7]))
        self.assertEqual(got.bytes, 3 * self.LAYOUT.chunk_bytes(C))
        self.assertIn("missing=[3, 4, 5, 6, 7]", repr(got))
        self.assertTrue(torch.equal(out[:3].view(torch.uint8), source[:3].view(torch.uint8)))
        self.assertEqual(int(out[3:].view(torch.uint8).count_nonzero()), 0, "no missing chunk written")
        self.assertEqual(counter(self.c, PINNED), 0)
        whole = self.c.retrieve_tensors(self.worker, out, keys[:3], prefix=True)
        self.assertTrue(whole.ok, whole)
        self.assertEqual(whole.missing, [])
        gone = self.c.retrieve_tensors(self.worker, out, keys[3:], prefix=True)    # its chunk 0 is the gap
        self.assertEqual((gone.status, gone.done, gone.missing), (Status.MISS, [], [0, 1, 2, 3, 4]))
        self.assertFalse(gone.ok)
        self.assert_nothing_held()

    def test_should_write_no_block_of_a_missing_chunk_when_paged(self):
        blocks = 8 * N + 3
        src = [random_tensor(paged_shape("kv_blocks", blocks), "float16", seed=31 + layer) for layer in range(1)]
        paged = kvstash.PagedKV(src)
        self.assertEqual(paged.layout("t-prefix"), self.LAYOUT)
        table = list(range(8 * N))
        keys = self.stored_with_a_gap(6, 2, lambda k: self.c.store_paged(self.worker, paged, table, k))
        dst = [torch.zeros_like(t) for t in src]
        out_table = [blocks - 1 - b for b in range(6 * N)]
        got = self.c.retrieve_paged(self.worker, kvstash.PagedKV(dst, "kv_blocks"), out_table, keys, prefix=True)
        self.assertEqual((got.status, got.done, got.missing), (Status.OK, [0, 1], [2, 3, 4, 5]), got)
        for k in range(6 * N):
            written = block_bytes(dst[0], "kv_blocks", out_table[k])
            if k < 2 * N:
                self.assertTrue(torch.equal(written, block_bytes(src[0], "kv_blocks", table[k])), "block %d" % k)
            else:
                self.assertEqual(int(written.count_nonzero()), 0, "block %d of missing chunk %d" % (k, k // N))
        self.assert_nothing_held()

    def test_should_end_the_prefix_within_a_piece_of_a_range_over_the_servers_limit(self):
        chunks, gap = 2500, 1500                # pieces of 1,024: the gap in the second one
        src = [random_tensor(paged_shape("kv_blocks", chunks * N), "float16", seed=41)]
        paged = kvstash.PagedKV(src)
        table = list(range(chunks * N))
        keys = self.stored_with_a_gap(chunks, gap, lambda k: self.c.store_paged(self.worker, paged, table, k))
        dst = [torch.zeros_like(src[0])]
        got = self.c.retrieve_paged(self.worker, kvstash.PagedKV(dst, "kv_blocks"), table, keys, prefix=True)
        self.assertEqual(got.status, Status.OK, got)
        self.assertEqual((got.done, got.failed, got.missing), (list(range(gap)), [], list(range(gap, chunks))))
        self.assertEqual(len(got.parts), 2, "the third piece is not prepared")
        self.assertEqual([len(p.prepare.slots) for p in got.parts], [1024, gap - 1024])
        bits, expected = dst[0].view(torch.int16), src[0].view(torch.int16)       # random bits: NaNs compare unequal
        self.assertTrue(torch.equal(bits[:, :gap * N], expected[:, :gap * N]))
        self.assertEqual(int(bits[:, gap * N:].count_nonzero()), 0, "no block of a missing chunk written")
        self.assert_nothing_held()

    def test_should_end_the_prefix_at_a_piece_that_misses_over_the_servers_limit(self):
        chunks, gap = 2100, 1024                # the gap is chunk 0 of the second piece: that piece is a MISS
        source = random_tensor((chunks,) + self.LAYOUT.shape(C), "float16", seed=42)
        keys = self.stored_with_a_gap(chunks, gap, lambda k: self.c.store_tensors(self.worker, source, k))
        out = torch.zeros_like(source)
        got = self.c.retrieve_tensors(self.worker, out, keys, prefix=True)
        self.assertEqual(got.status, Status.OK, got)
        self.assertEqual((got.done, got.missing), (list(range(gap)), list(range(gap, chunks))))
        self.assertFalse(got.ok)
        self.assertIn("missing=%d (%d..%d)" % (chunks - gap, gap, chunks - 1), repr(got))
        self.assertTrue(torch.equal(out[:gap].view(torch.uint8), source[:gap].view(torch.uint8)))
        self.assertEqual(int(out[gap:].view(torch.uint8).count_nonzero()), 0)
        self.assertEqual(self.c.retrieve_tensors(self.worker, out, keys).status, Status.MISS)
        self.assert_nothing_held()


@unittest.skipIf(torch is None, NO_TORCH)
class TensorFencingTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": C, "lease_ms": 300}
    LAYOUT = kvstash.Layout("t-fence", layers=2, hidden=16, dtype="bfloat16")

    def test_should_refuse_the_write_when_the_lease_has_ended(self):
        c = self.connect()
        self.assertTrue(c.register(61, self.LAYOUT).ok)
        keys = [(61, k) for k in range(2)]
        p = c.prepare_store(61, keys)
        self.assertEqual(len(p.slots), 2)
        time.sleep(0.35)                                             # past the lease: too late to start
        source = torch.ones((2,) + self.LAYOUT.shape(C), dtype=torch.bfloat16)
        self.assertEqual(c.write_tensors(p, source), [Status.UNKNOWN_TRANSFER] * 2)
        self.assertTrue(wait_until(lambda: counter(c, RESERVED) == 0, 2.0), "the expired store was not reclaimed")
        # The server has ended it: the slot words say so, and the fence holds without the client's deadline.
        p.deadline_ns = 0
        self.assertEqual(c.write_tensors(p, source), [Status.UNKNOWN_TRANSFER] * 2)
        self.assertEqual(c.commit_store(61, p).status, Status.UNKNOWN_TRANSFER)
        self.assertEqual(c.lookup(61, keys).hit_chunks, 0)

    def test_should_report_a_read_whose_slot_was_reclaimed(self):
        c = self.connect()
        self.assertTrue(c.register(62, self.LAYOUT).ok)
        keys = [(62, k) for k in range(2)]
        source = torch.full((2,) + self.LAYOUT.shape(C), 3.0, dtype=torch.bfloat16)
        self.assertTrue(c.store_tensors(62, source, keys).ok)
        g = c.prepare_retrieve(62, keys)
        self.assertEqual(g.status, Status.OK)
        self.assertTrue(wait_until(lambda: counter(c, PINNED) == 0, 2.0), "the pins outlived their lease")
        self.assertEqual(c.clear().count, 2)                         # evicted: the slots are FREE now
        out = torch.zeros_like(source)
        self.assertEqual(c.read_tensors(g, out), [Status.UNKNOWN_TRANSFER] * 2)
        self.assertEqual(c.commit_retrieve(62, g).status, Status.UNKNOWN_TRANSFER)
        # The bulk call reports the same as a whole: nothing is trusted.
        self.assertTrue(c.store_tensors(62, source, keys).ok)
        paged = kvstash.PagedKV([torch.zeros(paged_shape("kv_blocks", 2 * N, 8, 2), dtype=torch.bfloat16)
                                 for _ in range(2)])
        g = c.prepare_retrieve(62, keys)
        self.assertTrue(wait_until(lambda: counter(c, PINNED) == 0, 2.0))
        c.clear()
        self.assertEqual(c.read_paged(g, paged, list(range(2 * N))), [Status.UNKNOWN_TRANSFER] * 2)


KILLED_WORKER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, %r)
    import torch, kvstash
    class Slow:                                  # chunk 2 never comes: the worker is killed copying it
        def __init__(self, t): self.t = t
        def __getitem__(self, k):
            if k == 2:
                print("COPYING", flush=True)
                time.sleep(60)
            return self.t[k]
    c = kvstash.connect(sys.argv[1])
    layout = kvstash.Layout("t-kill", layers=2, hidden=16, dtype="bfloat16")
    assert c.register(4801, layout).ok
    c.store_tensors(4801, Slow(torch.ones((4,) + layout.shape(%d), dtype=torch.bfloat16)),
                    [(48, k) for k in range(4)])
""") % (CLIENT_ROOT, C)


@unittest.skipIf(torch is None, NO_TORCH)
class TensorWorkerKillTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": C}

    def test_should_reclaim_a_worker_killed_mid_copy(self):
        observer = self.connect()
        worker = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, self.server.directory],
                                  stdout=subprocess.PIPE, text=True)
        try:
            self.assertEqual(worker.stdout.readline().strip(), "COPYING")
            self.assertEqual(counter(observer, RESERVED), 4)        # two chunks written, two not
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            self.assertTrue(wait_until(lambda: observer.counter(RESERVED) == 0, 1.0, 0.005),
                            "reserved %d one second after kill -9" % observer.counter(RESERVED))
            layout = kvstash.Layout("t-kill", layers=2, hidden=16, dtype="bfloat16")
            self.assertTrue(observer.register(4802, layout).ok)
            keys = [(48, k) for k in range(4)]
            self.assertEqual(observer.lookup(4802, keys).hit_chunks, 0)          # nothing half-written published
            stored = observer.store_tensors(4802, torch.zeros((4,) + layout.shape(C), dtype=torch.bfloat16), keys)
            self.assertTrue(stored.ok, stored)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            worker.stdout.close()


class WithoutTorchTest(unittest.TestCase):
    def test_should_import_without_torch_and_name_the_install_line_when_needed(self):
        code = textwrap.dedent("""
            import sys
            sys.modules["torch"] = None                      # as if torch were not installed
            sys.path.insert(0, %r)
            import kvstash
            assert "torch" not in sys.modules or sys.modules["torch"] is None
            try:
                kvstash.PagedKV([])
            except ImportError as ex:
                print("IMPORT-ERROR", ex)
        """) % CLIENT_ROOT
        out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=60).stdout
        self.assertIn("IMPORT-ERROR", out)
        self.assertIn("pip install 'kvstash[torch]'", out)


@unittest.skipUnless(HAS_CUDA, NO_CUDA)
class CudaTensorTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 256 << 20, "chunk_tokens": C}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        with kvstash.connect(cls.server.directory) as c:             # the largest layout sets the slot size
            assert c.register(1, kvstash.Layout("cuda-size", layers=4, hidden=128, dtype="float32")).ok

    def test_should_pin_the_pool_and_move_gpu_tensors_exactly(self):
        c = self.connect(cuda=True)
        info = c.pin_info
        self.assertIsNotNone(info)
        self.assertGreaterEqual(info.bytes, c.pool_data_bytes)
        self.assertGreater(info.seconds, 0)
        self.assertTrue(c.slot_tensor(c.prepare_store(*self._store_args(c)), 0).is_pinned())
        layout = kvstash.Layout("cuda-bulk", layers=4, hidden=128, dtype="bfloat16")
        self.assertTrue(c.register(71, layout).ok)
        source = random_tensor((8,) + layout.shape(C), "bfloat16", device="cuda", seed=1)
        keys = [(71, k) for k in range(8)]
        self.assertTrue(c.store_tensors(71, source, keys).ok)
        out = torch.zeros_like(source)
        got = c.retrieve_tensors(71, out, keys)
        self.assertTrue(got.ok, got)
        self.assertTrue(torch.equal(out.view(torch.uint8), source.view(torch.uint8)))

    def _store_args(self, c):
        layout = kvstash.Layout("cuda-pin", layers=1, hidden=8, dtype="float16")
        self.assertTrue(c.register(70, layout).ok)
        return 70, [(70, 1)]

    def test_should_gather_and_scatter_paged_gpu_caches_through_several_staging_groups(self):
        c = self.connect(cuda=True)
        for worker, kind in enumerate(KINDS, start=81):
            blocks, layers = 64, 3
            src = [random_tensor(paged_shape(kind, blocks, 8, 16), "bfloat16", "cuda", seed=layer)
                   for layer in range(layers)]
            paged = kvstash.PagedKV(src, kind)
            self.assertTrue(c.register(worker, paged.layout("cuda-paged-" + kind)).ok)
            table = torch.randperm(blocks)[:10 * N]
            keys = [(worker, k) for k in range(10)]
            chunk = paged.layout("x").chunk_bytes(C)
            # Staging room for 3 chunks and 2 buffers: 4 groups, each buffer reused.
            stored = c.store_paged(worker, paged, table, keys, staging_bytes=3 * chunk, staging_buffers=2)
            self.assertTrue(stored.ok, stored)
            r = c.prepare_retrieve(worker, keys)
            for i in range(10):
                ids = table[i * N:(i + 1) * N].tolist()
                got = torch.frombuffer(c.read_chunk(r, i), dtype=torch.uint8)
                self.assertTrue(torch.equal(got, reference_chunk([t.cpu() for t in src], kind, ids).cpu()))
            c.commit_retrieve(worker, r)
            dst = [torch.zeros_like(t) for t in src]
            out_table = torch.randperm(blocks)[:10 * N]
            got = c.retrieve_paged(worker, kvstash.PagedKV(dst, kind), out_table, keys, staging_bytes=3 * chunk)
            self.assertTrue(got.ok, got)
            for layer in range(layers):
                for k in range(10 * N):
                    self.assertTrue(torch.equal(block_bytes(dst[layer], kind, int(out_table[k])),
                                                block_bytes(src[layer], kind, int(table[k]))))

    def test_should_unregister_the_pool_on_close(self):
        c = kvstash.connect(self.server.directory, cuda=True)
        ptr = c._tensors.pool.data_ptr()
        c.close()
        # Unregistering again fails only if close() unregistered it (cudaErrorHostMemoryNotRegistered).
        self.assertNotEqual(int(torch.cuda.cudart().cudaHostUnregister(ptr)), 0)
        self.assertIsNone(c.pin_info)

if __name__ == "__main__":
    unittest.main()
