"""Start-up of a kvstash server as a user sees it: from exec of ``./kvstash serve`` to its ``kvstash ready`` line, and
to the first LOOKUP a fresh Python client has answered (connect, REGISTER, LOOKUP). Medians of ``--runs`` starts.
With ``--first N`` it also times the first N one-chunk LOOKUPs of each fresh server (the JIT is cold), and with
``--again`` the N after them (warm), and counts the server's sleeps and doorbell wake-ups during them (0 under a
closed loop). Options after ``--`` go to ``serve``.

    python3 clients/python/bench_startup.py --pool 1g --runs 5
    python3 clients/python/bench_startup.py --pool 16g --runs 5
    python3 clients/python/bench_startup.py --pool 1g --runs 3 --first 20000 [--again]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kvstash  # noqa: E402

SLEEPS, DOORBELL_WAKEUPS = 55, 56


def timed_lookups(client, n):
    tokens = list(range(1000, 1016))
    lat = []
    for _ in range(n):
        start = time.perf_counter_ns()
        client.lookup(1, tokens=tokens)
        lat.append(time.perf_counter_ns() - start)
    lat.sort()
    return [lat[min(n - 1, int(q * n))] / 1000 for q in (0.5, 0.99, 0.999)] + [lat[-1] / 1000]


def one_start(args, run):
    directory = "/dev/shm/kvstash-startup-%d-%d" % (os.getpid(), run)
    t0 = time.monotonic()
    server = subprocess.Popen([args.launcher, "serve", "--dir", directory, "--pool-size", args.pool] + args.serve,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in server.stdout:
        if line.startswith("kvstash ready"):
            break
    ready = time.monotonic() - t0
    client = kvstash.connect(directory, pretouch=args.pretouch)
    client.register(1, kvstash.Layout("startup", layers=2, hidden=64, dtype="float16"))
    client.lookup(1, tokens=list(range(16)))
    answered = time.monotonic() - t0
    tails = None
    if args.first:
        sleeps, wakeups = client.counter(SLEEPS), client.counter(DOORBELL_WAKEUPS)
        tails = timed_lookups(client, args.first)
        if args.again:
            tails = timed_lookups(client, args.first)
        print("run %d: %s %d LOOKUPs p50 %.0f p99 %.0f p99.9 %.0f max %.0f us; server sleeps %d, doorbell wake-ups %d"
              % ((run, "next" if args.again else "first", args.first) + tuple(tails) +
                 (client.counter(SLEEPS) - sleeps, client.counter(DOORBELL_WAKEUPS) - wakeups)))
    client.close()
    server.terminate()
    server.wait()
    shutil.rmtree(directory, ignore_errors=True)
    print("run %d: ready %.3f s, first LOOKUP answered %.3f s" % (run, ready, answered), flush=True)
    return ready, answered, tails


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pool", default="1g")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--again", action="store_true")
    parser.add_argument("--pretouch", type=int, default=0,
                        help="the client maps the pool with MAP_POPULATE "
                             "(default 0: its cost is the pool's, not start-up's)")
    parser.add_argument("--launcher", default=os.path.join(HERE, "..", "..", "kvstash"))
    parser.add_argument("serve", nargs="*")
    args = parser.parse_args()
    results = [one_start(args, run) for run in range(args.runs)]
    print("pool %s, %d runs: exec->ready median %.3f s, exec->first LOOKUP answered median %.3f s" % (
        args.pool, args.runs, statistics.median(r[0] for r in results), statistics.median(r[1] for r in results)))
    if args.first:
        print("  %d LOOKUPs, medians over runs: p50 %.0f, p99 %.0f, p99.9 %.0f, max %.0f us" % (
            (args.first,) + tuple(statistics.median(r[2][i] for r in results) for i in range(4))))


if __name__ == "__main__":
    main()
