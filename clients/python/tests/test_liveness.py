"""Liveness (PROTOCOL §2.5, §4.4, §4.5): a killed Python worker is reclaimed within a second; a server
restart gives a clear error, never a crash, and the client reconnects; refusals and detaches."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest

from support import CLIENT_ROOT, Server, ServerTestCase, counter, wait_until

import kvstash
from kvstash import Status
from kvstash.client import Client

LAYOUT = kvstash.Layout("py-live", layers=2, hidden=64, dtype="float16")

LOCK_PROBE = textwrap.dedent("""
    import fcntl, os, sys
    fd = os.open(sys.argv[1], os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("FREE")
    except OSError:
        print("HELD")
    finally:
        os.close(fd)
""")


def _probe_lock(path):
    """HELD or FREE: whether a process other than this one finds the file's POSIX lock taken."""
    return subprocess.run([sys.executable, "-c", LOCK_PROBE, path], stdout=subprocess.PIPE, text=True,
                          check=True, timeout=30).stdout.strip()
RESERVED, PINNED, DEAD_CLIENTS, CLIENTS = 1, 2, 21, 52

WORKER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, %r)
    import kvstash
    c = kvstash.connect(sys.argv[1])
    instance = int(sys.argv[2])
    assert c.register(instance, kvstash.Layout("py-live", layers=2, hidden=64, dtype="float16")).ok
    base = [(7, k) for k in range(4)]
    stored = c.prepare_store(instance, base)
    c.commit_store(instance, stored)
    pinned = c.lookup(instance, base, pin=True)                  # 4 pins held
    prepared = c.prepare_store(instance, [(8, k) for k in range(5)])
    for i in range(2):                                           # killed mid-write: 2 of 5 chunks written
        c.write_chunk(prepared, i, b"\\xab" * prepared.chunk_bytes)
    print("PREPARED", len(prepared.slots), pinned.hit_chunks, c.client_file, flush=True)
    time.sleep(60)
""") % CLIENT_ROOT


class DeadWorkerTest(ServerTestCase):
    SERVER_OPTIONS = {"pool_bytes": 16 << 20, "chunk_tokens": 16}

    def test_should_reclaim_a_killed_worker_within_a_second(self):
        observer = self.connect()
        dead_before = observer.counter(DEAD_CLIENTS)
        worker = subprocess.Popen([sys.executable, "-c", WORKER, self.server.directory, "4711"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            line = worker.stdout.readline().split()
            self.assertEqual(line[:3], ["PREPARED", "5", "4"], line)
            client_file = line[3]
            self.assertEqual(counter(observer, RESERVED), 5)
            self.assertEqual(counter(observer, PINNED), 4)
            worker.send_signal(signal.SIGKILL)
            worker.wait()
            killed = time.monotonic()
            self.assertTrue(wait_until(lambda: observer.counter(RESERVED) == 0 and observer.counter(PINNED) == 0,
                                       1.0, 0.005), "reserved %d, pinned %d one second after kill -9" %
                            (observer.counter(RESERVED), observer.counter(PINNED)))
            reclaimed_in = time.monotonic() - killed
            self.assertEqual(observer.counter(DEAD_CLIENTS) - dead_before, 1)
            self.assertTrue(wait_until(lambda: not os.path.exists(client_file), 1.0))
            # Nothing of the dead store is readable: the half-written chunks were never published.
            mine = 4712
            self.assertEqual(observer.register(mine, LAYOUT).status, Status.OK)
            self.assertEqual(observer.lookup(mine, [(8, k) for k in range(5)]).hit_chunks, 0)
            self.assertEqual(observer.lookup(mine, [(7, k) for k in range(4)]).hit_chunks, 4)
            print("\nkill -9 reclaimed in %.0f ms" % (reclaimed_in * 1000), file=sys.stderr)
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
            worker.stdout.close()

    def test_should_hold_its_file_lock_from_connect_to_close_as_another_process_sees_it(self):
        # A POSIX lock falls when its process closes ANY descriptor of the file: only another process can tell
        # whether the client still holds it.
        c = self.connect()
        self.assertEqual(_probe_lock(c.client_file), "HELD")
        self.assertEqual(c.register(4713, LAYOUT).status, Status.OK)
        stored = c.prepare_store(4713, [(9, k) for k in range(2)])
        c.commit_store(4713, stored)
        self.assertEqual(c.ping().status, Status.OK)
        self.assertEqual(_probe_lock(c.client_file), "HELD")
        path = c.client_file
        c.close()
        self.assertTrue(wait_until(lambda: not os.path.exists(path), 2.0), "reaped, so the next test counts 1")

    def test_should_keep_an_idle_client(self):
        c = self.connect()
        attached = c.counter(CLIENTS)
        time.sleep(0.5)                                           # > 4 lock probes
        self.assertEqual(c.ping().status, Status.OK)
        self.assertEqual(c.counter(CLIENTS), attached)

    def test_should_neither_refuse_nor_drop_a_live_server_when_this_wall_clock_steps(self):
        import kvstash.liveness as liveness_module
        real_wall_ms = liveness_module._wall_ms
        for prefix, step_ms in ((51, 3_600_000), (52, -3_600_000)):
            liveness_module._wall_ms = lambda step_ms=step_ms: real_wall_ms() + step_ms
            try:
                # the first check finds the heartbeat an hour off, watches it move and connects
                c = self.connect(timeout=10.0)
                until = time.monotonic() + 0.5
                while time.monotonic() < until:
                    self.assertTrue(c.alive(), "a live server looked dead with the wall clock %+d ms" % step_ms)
                    time.sleep(0.02)
                self.assertTrue(c.register(50, LAYOUT).ok)
                keys = [(prefix, k) for k in range(2)]                # new keys: each prepare reserves
                stored = c.prepare_store(50, keys)
                self.assertEqual(Status.OK, stored.status)
                self.assertEqual(Status.OK, c.commit_store(50, stored).status)
                self.assertEqual(2, c.lookup(50, keys).hit_chunks)
                c.close()
            finally:
                liveness_module._wall_ms = real_wall_ms

    def test_should_time_out_when_no_answer_comes(self):
        c = kvstash.connect(self.server.directory, timeout=10.0)  # attaching may be slow on a loaded machine
        self.addCleanup(c.close)
        c.timeout = 0.3                                           # the wait under test
        start = time.monotonic()
        with self.assertRaises(kvstash.KvStashTimeoutError):
            c.receive(123456)                                     # a correlation id never sent
        self.assertLess(time.monotonic() - start, 2.0)

    def test_should_raise_detached_when_the_server_ends_the_session(self):
        c = self.connect()
        ring = c._request
        index = ring._position & ring.mask
        ring._words[(index >> 2) + 1] = 0
        ring._words[index >> 2] = ring.capacity + 8              # a length no ring can hold: corrupt
        with self.assertRaises(kvstash.DetachedError):
            for _ in range(100):
                c.check_connection()
                time.sleep(0.02)
        with self.assertRaises(kvstash.DetachedError):
            c.ping()

    def test_should_delete_its_own_file_when_rejected(self):
        class WrongIncarnation(Client):
            def _open_control(self):
                super()._open_control()
                self.incarnation ^= 1

        before = set(os.listdir(self.server.directory))
        with self.assertRaises(kvstash.RejectedError) as caught:
            WrongIncarnation(self.server.directory, 5.0, copy_transport=True)
        self.assertEqual(caught.exception.reject_reason, 2)
        self.assertEqual({f for f in os.listdir(self.server.directory) if f.startswith("client-")} - before, set())


class RestartTest(unittest.TestCase):
    """Server killed (-9) or stopped while a client is connected."""

    def setUp(self):
        self.server = Server(pool_bytes=16 << 20, chunk_tokens=16).start()
        self.addCleanup(self.server.close)

    def test_should_raise_restarted_and_reconnect_when_the_server_restarts(self):
        c = kvstash.connect(self.server.directory)
        self.addCleanup(c.close)
        self.assertEqual(c.register(1, LAYOUT).status, Status.OK)
        prepared = c.prepare_store(1, [(1, 1)])
        view = c.slot_view(prepared, 0)
        old = self.server.incarnation
        self.server.kill()
        self.server.start()
        self.assertNotEqual(self.server.incarnation, old)
        with self.assertRaises(kvstash.ServerRestartedError) as caught:
            c.ping()
        self.assertIn("restarted", str(caught.exception))
        with self.assertRaises(kvstash.ServerRestartedError):
            c.ping()                                              # stays broken
        view[:4] = b"late"                                        # the old (deleted) pool: no SIGBUS
        self.assertEqual(bytes(view[:4]), b"late")
        view.release()
        c.close()
        with kvstash.connect(self.server.directory) as again:
            self.assertEqual(again.incarnation, self.server.incarnation)
            self.assertEqual(again.register(1, LAYOUT).status, Status.OK)
            self.assertEqual(again.ping().status, Status.OK)

    def test_should_raise_gone_and_leave_server_files_when_the_server_dies(self):
        c = kvstash.connect(self.server.directory)
        self.assertEqual(c.ping().status, Status.OK)
        self.server.kill()
        files = sorted(os.listdir(self.server.directory))
        with self.assertRaises(kvstash.ServerGoneError):
            c.ping()
        client_file = c.client_file
        c.close()                                                 # the server is dead: delete our own file
        self.assertFalse(os.path.exists(client_file))
        self.assertEqual(sorted(os.listdir(self.server.directory)),
                         sorted(f for f in files if f != os.path.basename(client_file)))
        self.assertIn("control", files)
        with self.assertRaises(kvstash.ServerGoneError):
            kvstash.connect(self.server.directory, timeout=1.0)
        self.assertEqual([f for f in os.listdir(self.server.directory) if f.startswith("client-")], [])

    def test_should_end_every_wait_of_a_bounded_block_at_its_deadline(self):
        # SIGSTOP: the server's process lives (its pid, its files, its last heartbeat) and answers nothing.
        c = kvstash.connect(self.server.directory, timeout=10.0)
        self.addCleanup(c.close)
        self.assertEqual(c.ping().status, Status.OK)
        self.server.pause()
        self.addCleanup(self.server.resume)
        start = time.monotonic()
        with self.assertRaises(kvstash.KvStashTimeoutError):
            with c.bounded(0.3):
                with c.bounded(5.0):                              # an inner bound never extends the outer one
                    c.ping()
        took = time.monotonic() - start
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 0.3 + 0.5, "a bounded wait took %.2f s" % took)
        self.assertIsNone(c.deadline)                             # the bound ended with its block
        self.assertEqual(c.timeout, 10.0)

    def test_should_raise_gone_when_the_server_shuts_down(self):
        c = kvstash.connect(self.server.directory)
        self.addCleanup(c.close)
        self.assertEqual(c.ping().status, Status.OK)
        self.server.stop()                                        # State CLOSED, files deleted
        with self.assertRaises(kvstash.ServerGoneError):
            c.ping()
        with self.assertRaises(kvstash.ServerGoneError):
            kvstash.connect(self.server.directory, timeout=1.0)


if __name__ == "__main__":
    unittest.main()
