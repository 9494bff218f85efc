"""bench_peers.py's kvstash part, in a process of its own as a user runs it (``--only kvstash --quick``): it execs a
real ``./kvstash serve``, and every chunk it stored comes back byte for byte; the figures the table is made of are
there. Needs none of the peers' venvs (the peers are left out); about 10 seconds."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(HERE), "bench_peers.py")


class BenchPeersKvStashTest(unittest.TestCase):

    def test_quick_kvstash_run_verifies_every_byte(self):
        with tempfile.TemporaryDirectory(prefix="kvstash-bench-peers-test-") as tmp:
            out = os.path.join(tmp, "peers.json")
            done = subprocess.run([sys.executable, SCRIPT, "--only", "kvstash", "--quick", "--json", out, "--markdown"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            self.assertEqual(0, done.returncode, done.stdout[-4000:])
            with open(out) as f:
                result = json.load(f)

        run = result["runs"]["kvstash"][0]
        self.assertTrue(run["ok"], run.get("error", "") + run.get("traceback", ""))
        verified = run["verified"]
        self.assertEqual(0, verified["mismatches"], verified)
        self.assertEqual(0, verified["failed_requests"], verified)
        sizes = {int(size): phase for size, phase in run["sizes"].items()}
        self.assertEqual({4 << 10, 256 << 10, 2 << 20}, set(sizes))
        counts = result["params"]["counts"]
        expected = sum(int(size) * count for size, count in counts.items())
        self.assertEqual(expected, verified["bytes"])                  # every retrieved chunk compared, all equal
        self.assertEqual(sum(counts.values()), verified["chunks"])
        for size, phase in sizes.items():
            self.assertEqual(counts[str(size)], phase["store"]["count"])
            self.assertEqual(counts[str(size)], phase["retrieve"]["count"])
            self.assertGreater(phase["retrieve_gbps"], 0)
        self.assertEqual(0, run["lookup"]["misses"])
        self.assertEqual(result["params"]["lookups"], run["lookup"]["count"])
        self.assertGreater(run["ready_s"], 0)
        self.assertGreater(run["memory_idle_kib"]["VmRSS"], 0)
        self.assertIn("LOOKUP", run["server_hlog"])                     # the server's own latency log was read
        for figure in ("server_cpu_per_1000", "server_cpu_idle_s"):
            self.assertIn(figure, run)
        self.assertIn("| lookup p99 (us) |", done.stdout)


if __name__ == "__main__":
    unittest.main()
