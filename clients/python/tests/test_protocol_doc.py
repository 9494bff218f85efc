"""Offline checks of the client against docs/PROTOCOL.md itself: the hash test vectors (§8.4) and the
worked bytes of the appendix (§10), both parsed from the repository, no server needed."""

import os
import re
import unittest

from support import HASH_VECTORS, REPO
from test_wire_contract import java_counter_names, java_counter_table, sources

import kvstash
from kvstash import descriptor as d
from kvstash.client import Client, Response
from kvstash.ring import Ring, RingCorrupt

PROTOCOL = os.path.join(REPO, "docs", "PROTOCOL.md")


def _hex_text(field):
    return None if field == "-" else bytes.fromhex(field).decode("utf-8")


class HashVectorsTest(unittest.TestCase):
    """Every line of wire/src/test/resources/hash-vectors.txt (§8.4)."""

    def test_should_match_every_vector_when_hashing_locally(self):
        counts = {"chunk": 0, "salt": 0, "ns": 0}
        with open(HASH_VECTORS) as f:
            for line in f:
                if not line.strip() or line.startswith("#"):
                    continue
                parts = line.split()
                kind = parts[0]
                counts[kind] += 1
                if kind == "chunk":
                    chunk_tokens = int(parts[1])
                    tokens = [] if parts[2] == "-" else [int(t) for t in parts[2].split(",")]
                    expected = [] if parts[3] == "-" else [
                        tuple(int(h, 16) for h in pair.split(":")) for pair in parts[3].split(",")]
                    self.assertEqual(kvstash.chunk_hashes(tokens, chunk_tokens), expected, line)
                elif kind == "salt":
                    self.assertEqual(kvstash.salt_value(_hex_text(parts[1])), int(parts[2], 16), line)
                else:
                    model = _hex_text(parts[1]) or ""
                    self.assertEqual(kvstash.namespace(model, int(parts[2]), int(parts[3]), int(parts[4], 16)),
                                     int(parts[5], 16), line)
        self.assertTrue(all(counts.values()), counts)

    def test_should_give_zero_salt_when_salt_is_none_or_empty(self):
        self.assertEqual(kvstash.salt_value(None), 0)
        self.assertEqual(kvstash.salt_value(""), 0)

    def test_should_hash_every_token_container_alike(self):
        import array
        tokens = list(range(-5, 59))
        expected = kvstash.chunk_hashes(tokens, 16)
        self.assertEqual(len(expected), 4)
        self.assertEqual(kvstash.chunk_hashes(array.array("i", tokens), 16), expected)
        self.assertEqual(kvstash.chunk_hashes(tokens + [1, 2, 3], 16), expected)


def _protocol_text():
    with open(PROTOCOL, encoding="utf-8") as f:
        return f.read()


class ContractTextTest(unittest.TestCase):
    """What §6.2, §2.1 and §2.3 state against the constants this client sends, writes and reads (descriptor.py, itself
    checked against the Java sources by test_wire_contract) and against the counter table (CountersDescriptor)."""

    def test_should_list_every_flag_the_client_may_send_in_the_flags_table(self):
        text = _protocol_text()
        header = text[text.index("### 6.2 "):text.index("### 6.3 ")]
        section = header[header.index("- **Flags**"):header.index("- **Key Mode**")]
        rows = re.findall(r"^\s*\| (\d+) \| ([A-Z0-9_]+) \| (.*) \| (.*) \|$", section, re.M)
        self.assertEqual({name: int(value) for value, name, _, _ in rows},
                         {name[len("FLAG_"):]: value for name, value in vars(d).items() if name.startswith("FLAG_")})
        used_by = {name: types for _, name, _, types in rows}
        self.assertTrue(used_by["PREFIX"].startswith("PREPARE_RETRIEVE"), used_by["PREFIX"])
        self.assertIn("FROM_LOOKUP", used_by["PREFIX"], "the table says PREFIX does not go with FROM_LOOKUP")

    def test_should_state_the_version_this_client_writes(self):
        text = _protocol_text()
        version = "%d.%d.%d" % (d.major(d.VERSION), d.minor(d.VERSION), d.VERSION & 0xFF)
        self.assertIn("Today it is `0x%08x` (%s)" % (d.VERSION, version), text)
        self.assertIn("Layout versions described here: control file %s, pool file %s, client file %s"
                      % (version, version, version), text)
        any_minor = "(any %d.x)" % d.MAJOR_VERSION
        for place in ("- Version: `0x%08x`", "- Version `0x%08x` " + any_minor, "**Write `Version` = `0x%08x`"):
            self.assertIn(place % d.VERSION, text)
        history = text[text.index("Layout versions described here"):text.index("Contents")]
        for minor in range(1, d.MINOR_VERSION + 1):
            self.assertIn("minor %d:" % minor, history, "the version history names what minor %d added" % minor)
        self.assertNotIn("minor %d:" % (d.MINOR_VERSION + 1), history)


    def test_should_list_every_named_counter_of_the_table_in_section_2_3(self):
        text = _protocol_text()
        section = text[text.index("### 2.3 "):text.index("### 2.4 ")]
        rows = re.findall(r"^\| (\d+) \| `([a-z0-9_.]+)` \| (.*) \|$", section, re.M)
        java = sources()
        self.assertEqual({int(counter_id): name for counter_id, name, _ in rows}, java_counter_names(java))
        count, base = java.value("CountersDescriptor.COUNT"), java.value("CountersDescriptor.REQUESTS_BASE")
        self.assertIn("%d counters, each an `i64` at `Counters Offset + 8 × id`" % count, section)
        self.assertIn("at `id = %d + type × %d + status`" % (base, java.value("Status.COUNT")), section)
        self.assertEqual(java_counter_table(java)[base], "requests.ping.ok", "the example of the text")

    def test_should_state_the_labels_layout_this_client_reads(self):
        text = _protocol_text()
        section = text[text.index("**Labels section**"):text.index("### 2.4 ")]
        count = sources().value("CountersDescriptor.COUNT")
        stride, longest = d.COUNTER_LABEL_LENGTH, d.COUNTER_LABEL_MAX_LENGTH
        self.assertIn("One record of %d bytes per counter" % stride, section)
        self.assertIn("`Labels Offset + %d × n`" % stride, section)
        self.assertIn("`Labels Length / %d` (%d)" % (stride, count), section)
        self.assertIn("Label Length i32 (0..%d)" % longest, section)
        self.assertIn("%d bytes at relative %d..%d" % (longest, d.COUNTER_LABEL_OFFSET, stride - 1), section)
        header = text[text.index("### 2.1 "):text.index("### 2.2 ")]
        self.assertIn("%3d  | Labels Offset i32 = 3584" % d.CTL_LABELS_OFFSET_OFFSET, header)
        self.assertIn("Labels Length i32 = %d" % (count * stride), header)


def _appendix_dumps():
    """The hex dumps of §10, in document order, as bytes."""
    with open(PROTOCOL, encoding="utf-8") as f:
        text = f.read()
    appendix = text[text.index("## 10. Appendix"):]
    dumps = []
    for block in re.findall(r"```\n(.*?)```", appendix, re.S):
        data = bytearray()
        for line in block.splitlines():
            m = re.match(r"^[0-9a-f]{4}  ((?:[0-9a-f]{2} ){0,15}[0-9a-f]{2})", line)
            if m:
                data += bytes.fromhex(m.group(1))
        if data:
            dumps.append(bytes(data))
    return dumps


class _LoopbackClient(Client):
    """A Client over two private rings: what it sends lands in ``request``; ``answer`` feeds responses."""

    def __init__(self):                                   # no files, no server
        self._broken = None
        self._closed = False
        self._stash = {}
        self._next_correlation = 1
        self._layouts = {}
        self._pool = None
        self._tensors = None
        self.chunk_tokens = 16
        self.lease_ns = 30_000_000_000
        self.timeout = 1.0
        self.request_buffer = bytearray(128 + 4096)
        self.response_buffer = bytearray(128 + 4096)
        self._request = Ring(memoryview(self.request_buffer), 0, 4096)
        self._response = Ring(memoryview(self.response_buffer), 0, 4096)
        self._answers = Ring(memoryview(self.response_buffer), 0, 4096)
        self._request.start_as_producer()
        self._response.start_as_consumer()
        self._answers.start_as_producer()

    def answer(self, payload):
        self.assert_true(self._answers.offer(d.RESPONSE_TYPE, payload))

    @staticmethod
    def assert_true(value):
        assert value

    def check_connection(self):
        raise AssertionError("no response queued")

    def close(self):
        self._closed = True


class AppendixTest(unittest.TestCase):
    """The client's encoder and decoder against the worked bytes of §10."""

    def setUp(self):
        self.dumps = _appendix_dumps()
        self.assertGreaterEqual(len(self.dumps), 5, "expected 5 dumps in §10")
        self.client = _LoopbackClient()

    def tearDown(self):
        self.client.close()

    def test_should_encode_register_and_decode_its_answer_as_the_appendix_shows(self):
        register_request, register_response = self.dumps[0], self.dumps[1]
        self.client.answer(register_response)
        r = self.client.register(42, kvstash.Layout("demo", 1, 0, 2, 64, "float16", False))
        self.assertEqual(bytes(self.client.request_buffer[128:128 + len(register_request)]), register_request)
        self.assertEqual((r.status, r.request_type, r.correlation_id), (kvstash.Status.OK,
                                                                          kvstash.RequestType.REGISTER, 1))
        self.assertEqual((r.chunk_bytes, r.slot_bytes, r.slot_capacity), (8192, 8192, 8192))
        info = r.register_info
        self.assertIsNotNone(info, "the appendix REGISTER answer carries the Extra of §6.8")
        self.assertEqual((info.pool_data_bytes, info.chunk_tokens, info.lease_ns), (64 << 20, 16, 30 * 10 ** 9))
        self.assertEqual(info.pool_file_name, "pool-%x" % info.incarnation)

    def test_should_encode_prepare_store_and_decode_its_answer_as_the_appendix_shows(self):
        self.client._next_correlation = 2
        request, response = self.dumps[2], self.dumps[3]
        self.client.answer(response)
        keys = kvstash.chunk_hashes(list(range(1000, 1032)), 16)
        self.assertEqual(keys, [(0xf1f346caba9b88e7, 0x85c05ae4251a3734), (0x8e939804496571ba, 0x4cd86d6e20feb633)])
        r = self.client.prepare_store(42, keys)
        self.assertEqual(bytes(self.client.request_buffer[128:128 + len(request)]), request)
        self.assertEqual(r.transfer_id, 0x800000000)
        self.assertEqual(r.slots, [kvstash.SlotEntry(0, 3, 0x2000), kvstash.SlotEntry(1, 3, 0x4000)])
        self.assertEqual((r.chunk_bytes, r.slot_bytes), (8192, 8192))

    def test_should_decode_the_error_answer_of_the_appendix(self):
        r = Response(self.dumps[4])
        self.assertEqual((r.correlation_id, r.status, r.request_type), (4, kvstash.Status.UNKNOWN_TRANSFER,
                                                                        kvstash.RequestType.COMMIT_STORE))
        self.assertEqual(r.message, "transfer not pending for this instance")

    def test_should_send_the_same_tokens_request_for_any_token_container(self):
        import array
        tokens = list(range(1000, 1040))
        self.client.answer(Response_bytes(1))
        self.client.prepare_store(42, tokens=tokens)
        first = bytes(self.client.request_buffer[128:128 + 8 + 56 + 4 * 40])
        client = _LoopbackClient()
        client.answer(Response_bytes(1))
        client.prepare_store(42, tokens=array.array("i", tokens))
        self.assertEqual(bytes(client.request_buffer[128:128 + 8 + 56 + 4 * 40]), first)
        client.close()


def Response_bytes(correlation, status=0, request_type=6):
    return d.RESPONSE_HEADER.pack(correlation, status, request_type, 0, 0, 0, 0, 0, 0, 0, 0)


class RingTest(unittest.TestCase):
    """The ring algorithms of §5 on a private buffer: wrap with padding, zeroing, corrupt length."""

    def test_should_deliver_every_record_in_order_when_records_wrap(self):
        buf = bytearray(128 + 1024)
        producer = Ring(memoryview(buf), 0, 1024)
        consumer = Ring(memoryview(buf), 0, 1024)
        producer.start_as_producer()
        consumer.start_as_consumer()
        sent = received = 0
        for n in range(2000):
            payload = bytes([n & 0xFF]) * (n * 37 % 300)
            while not producer.offer(7, payload):
                msg_type, got = consumer.poll()
                self.assertEqual((msg_type, got), (7, bytes([received & 0xFF]) * (received * 37 % 300)))
                received += 1
            sent += 1
        while received < sent:
            msg_type, got = consumer.poll()
            self.assertEqual(got, bytes([received & 0xFF]) * (received * 37 % 300))
            received += 1
        self.assertIsNone(consumer.poll())
        self.assertEqual(bytes(buf[128:]), bytes(1024), "a consumed ring is all zero")

    def test_should_refuse_more_than_half_the_ring(self):
        ring = Ring(memoryview(bytearray(128 + 1024)), 0, 1024)
        ring.start_as_producer()
        with self.assertRaises(ValueError):
            ring.offer(1, bytes(1024 // 2 - 7))
        self.assertTrue(ring.offer(1, bytes(1024 // 2 - 8)))

    def test_should_report_corrupt_length(self):
        buf = bytearray(128 + 1024)
        buf[128:132] = (5).to_bytes(4, "little")
        ring = Ring(memoryview(buf), 0, 1024)
        ring.start_as_consumer()
        with self.assertRaises(RingCorrupt):
            ring.poll()


if __name__ == "__main__":
    unittest.main()
