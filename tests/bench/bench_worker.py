"""bench_worker.py - the benchmark's worker case (bench.py --cases
worker): a no-op Python consumer through the shipped runner
(`plugin: python`, consumers/worker/), each 100 B body a JSON object the
runner parses before the call, with `workers: 1` and `workers: 2`.

Fed by bench_pub at full speed (--json). Per run: the rate (N over first
send to the hub's last busy moment with all N completed), the CPU a
message of the hub (its CPU clock) and of the worker processes (their
/proc stat, summed; clock ticks over a run of seconds) and of both, and
the publisher's own rate beside it. Unpinned only: pinning the hub would
pin its workers with it (they inherit its CPU set). Targets (issue 24):
one worker >= 60,000 msg/s and <= 15 us of CPU a message, hub and
worker together; two workers >= 1.6 x one.
"""
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_RATE = 60_000
TARGET_CPU_US = 15.0
TARGET_SPEEDUP = 1.6


def _children(pid):
    kids = []
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _cpu_of(b, pids):
    total = 0.0
    for pid in pids:
        try:
            total += b.proc_stat_cpu(pid)
        except OSError:
            pass
    return total


def _run_once(b, bench, workers, n):
    consumer = ("  - {name: py, plugin: python, workers: %d, max_pending: 4000, "
                "queue: {capacity: %d}, options: {callable: \"bench_worker_consumer:noop\", "
                "path: [\"%s\"]}}" % (workers, n + 1024, HERE))
    hub = b.Hub(bench, [consumer])
    try:
        deadline = time.monotonic() + 30
        while len(_children(hub.pid)) < workers:
            if time.monotonic() > deadline:
                raise b.BenchError("the workers did not start\n" + b.tail(hub.logfile))
            time.sleep(0.05)
        kids = _children(hub.pid)
        b.wait_quiet()
        c0, w0 = hub.cpu(), _cpu_of(b, kids)
        pub = b.blast(bench, hub.bus, n, size=100, json_body=True)
        t_done, c_done, st = hub.wait_done(
            lambda s: s["consumers"][0]["completed"] + s["consumers"][0]["failed"] >= n,
            120 + n / 5000)
        w1 = _cpu_of(b, kids)
    finally:
        hub.stop()
    c = st["consumers"][0]
    if c["failed"] or c["restarts"]:
        raise b.BenchError("worker case: %d failed, %d restarts" % (c["failed"], c["restarts"]))
    wall = t_done - pub["t_first_ns"] / 1e9
    hub_us, worker_us = (c_done - c0) / n * 1e6, (w1 - w0) / n * 1e6
    return dict(workers=workers, n=n, rate=n / wall, hub_cpu_us=hub_us, worker_cpu_us=worker_us,
                cpu_us=hub_us + worker_us, pub_send_rate=pub["send_rate"],
                bound_by=b.bound_by(pub["send_rate"], n / wall))


def run(b, bench, prof, results):
    """b: the bench module (Hub, blast, wait_quiet, proc_stat_cpu, median,
    bound_by, log, tail, BenchError)."""
    n = 50_000 if prof["reps"] == 1 else 200_000
    rows = []
    try:
        for workers in (1, 2):
            runs = [_run_once(b, bench, workers, n) for _ in range(prof["reps"])]
            row = dict(runs[0])
            for key in ("rate", "hub_cpu_us", "worker_cpu_us", "cpu_us", "pub_send_rate"):
                row[key] = b.median([r[key] for r in runs])
            row["runs"] = runs
            rows.append(row)
            b.log(f"worker: workers {workers}: {row['rate']:,.0f} msg/s, {row['cpu_us']:.1f} us "
                  f"CPU a message (hub {row['hub_cpu_us']:.1f}, workers "
                  f"{row['worker_cpu_us']:.1f}), publisher {row['pub_send_rate']:,.0f} msg/s")
    except b.BenchError as e:
        results["worker"] = {"status": "not measured: %s" % str(e).splitlines()[0]}
        b.log(results["worker"]["status"])
        return
    one, two = rows
    results["worker"] = {
        "status": "measured", "rows": rows, "speedup": two["rate"] / one["rate"],
        "met_rate": one["rate"] >= TARGET_RATE, "met_cpu": one["cpu_us"] <= TARGET_CPU_US,
        "met_speedup": two["rate"] / one["rate"] >= TARGET_SPEEDUP}


def markdown(results, w):
    """The case's section of results.md (w writes one line)."""
    entry = results.get("worker")
    if not entry:
        return
    w("## A no-op Python consumer in worker processes\n")
    if not entry.get("rows"):
        w("- %s\n" % entry["status"])
        return
    w("`plugin: python` on a callable that does nothing; the runner parses each 100 B JSON "
      "body. Unpinned. CPU a message: the hub's CPU clock and the workers' /proc stat.\n")
    w("| workers | msg/s | CPU/msg (hub + workers) | hub | workers | publisher msg/s | bound by |")
    w("|---|---|---|---|---|---|---|")
    for r in entry["rows"]:
        w("| %d | %s | %.1f us | %.1f us | %.1f us | %s | %s |" % (
            r["workers"], format(round(r["rate"]), ","), r["cpu_us"], r["hub_cpu_us"],
            r["worker_cpu_us"], format(round(r["pub_send_rate"]), ","), r["bound_by"]))
    w("")
    w("Targets: one worker >= %s msg/s (%s), <= %.0f us CPU a message (%s); two workers "
      ">= %.1fx one (%.2fx, %s).\n" % (
          format(TARGET_RATE, ","), "met" if entry["met_rate"] else "NOT met", TARGET_CPU_US,
          "met" if entry["met_cpu"] else "NOT met", TARGET_SPEEDUP, entry["speedup"],
          "met" if entry["met_speedup"] else "NOT met"))
