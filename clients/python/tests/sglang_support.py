"""Helpers of the SGLang backend's tests (test_sglang*.py)."""

import glob
import os
import signal
import time


def stop_process(pid, timeout=5.0):
    """SIGSTOP ``pid`` and wait until every thread of it is stopped: kill() returns before a thread running on
    another core has stopped, and a spinning server would still answer a request sent in that moment."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = []
        for stat in glob.glob("/proc/%d/task/*/stat" % pid):
            try:
                with open(stat) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except (OSError, IndexError):
                continue                    # a thread that just ended
        if states and all(state in ("T", "t") for state in states):
            return
        time.sleep(0.001)
    raise AssertionError("process %d did not stop within %.1f s" % (pid, timeout))


def continue_process(pid):
    """SIGCONT after stop_process."""
    os.kill(pid, signal.SIGCONT)
