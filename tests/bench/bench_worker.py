"""bench_worker.py - the benchmark's worker case (bench.py --cases
worker): Python consumers through the shipped runner (`plugin: python`,
consumers/worker/), each 100 B body a JSON object the runner parses before
the call, with `workers: 1` and `workers: 2`, for two consumers
(bench_worker_consumer.py):

- no-op: the callable does nothing, so the hub and the runner's own cost
  set the pace (the targets of issue 24);
- worker-bound: each call parses a real ~2 KiB Fedora message body and
  walks it, so the worker process, not the hub, is the bottleneck: what
  `workers: 2` buys when the consumer does real work.

Fed by bench_pub at full speed (--json). Per run: the rate (N over first
send to the hub's last busy moment with all N completed), the CPU a
message of the hub (its CPU clock) and of the worker processes (their
/proc stat, summed; clock ticks over a run of seconds) and of both, and
the publisher's own rate beside it. Unpinned only: pinning the hub would
pin its workers with it (they inherit its CPU set).

Each pair also gets its CPU ceiling: the machine has C CPUs, so no rate
can pass C / (hub + worker CPU a message); with the CPU a message two
workers cost, two workers can reach at most that rate, and 1.6x one
worker would need 1.6 x (one worker's rate) x (two workers' CPU a
message) CPUs. On a shared machine the CPU a message is the figure to
compare; wall-clock rates follow the other work.

Targets (issue 24, the no-op consumer): one worker >= 60,000 msg/s and
<= 15 us of CPU a message, hub and worker together; two workers >= 1.6 x
one.
"""
import os
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TARGET_RATE = 60_000
TARGET_CPU_US = 15.0
TARGET_SPEEDUP = 1.6
# (name, callable in bench_worker_consumer, what it does)
CASES = (("no-op", "noop", "does nothing"),
         ("worker-bound", "fedora", "parses and walks a ~2 KiB Fedora body"))


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


def cpus():
    """The CPUs this process (and so the unpinned hub) may run on."""
    return len(os.sched_getaffinity(0))


def _run_once(b, bench, callable_name, workers, n):
    consumer = ("  - {name: py, plugin: python, workers: %d, max_pending: 4000, "
                "queue: {capacity: %d}, options: {callable: \"bench_worker_consumer:%s\", "
                "path: [\"%s\"]}}" % (workers, n + 1024, callable_name, HERE))
    hub = b.Hub(bench, [consumer])
    try:
        deadline = time.monotonic() + 30
        while len(_children(hub.pid)) < workers:
            if time.monotonic() > deadline:
                raise b.BenchError("the workers did not start\n" + b.tail(hub.logfile))
            time.sleep(0.05)
        kids = _children(hub.pid)
        busy = b.wait_quiet()  # the share of the machine other work took just before
        c0, w0 = hub.cpu(), _cpu_of(b, kids)
        pub = b.blast(bench, hub.bus, n, size=100, json_body=True)
        t_done, c_done, st = hub.wait_done(
            lambda s: s["consumers"][0]["completed"] + s["consumers"][0]["failed"] >= n,
            120 + n / 2000)
        w1 = _cpu_of(b, kids)
    finally:
        hub.stop()
    c = st["consumers"][0]
    if c["failed"] or c["restarts"]:
        raise b.BenchError("worker case: %d failed, %d restarts" % (c["failed"], c["restarts"]))
    wall = t_done - pub["t_first_ns"] / 1e9
    hub_us, worker_us = (c_done - c0) / n * 1e6, (w1 - w0) / n * 1e6
    return dict(workers=workers, n=n, rate=n / wall, hub_cpu_us=hub_us, worker_cpu_us=worker_us,
                cpu_us=hub_us + worker_us, pub_send_rate=pub["send_rate"], other_busy=busy,
                bound_by=b.bound_by(pub["send_rate"], n / wall))


def ceiling(one, two, ncpu):
    """What the CPU allows a pair of rows on ncpu CPUs: the cores one
    worker keeps busy, the most two workers can reach at their CPU a
    message (msg/s and x one), and the CPUs 1.6x would need."""
    busy = (one.get("other_busy", 0) + two.get("other_busy", 0)) / 2
    return dict(cpus=ncpu, one_cores=one["cpu_us"] * one["rate"] / 1e6,
                other_busy=busy,
                two_cores=two["cpu_us"] * two["rate"] / 1e6,
                max_rate=ncpu / (two["cpu_us"] / 1e6),
                max_speedup=ncpu / (two["cpu_us"] / 1e6) / one["rate"],
                cpus_for_target=TARGET_SPEEDUP * one["rate"] * two["cpu_us"] / 1e6)


def _measure(b, bench, prof, name, callable_name, n):
    rows = []
    for workers in (1, 2):
        runs = [_run_once(b, bench, callable_name, workers, n) for _ in range(prof["reps"])]
        row = dict(runs[0])
        for key in ("rate", "hub_cpu_us", "worker_cpu_us", "cpu_us", "pub_send_rate",
                    "other_busy"):
            row[key] = b.median([r[key] for r in runs])
        row["consumer"] = name
        row["runs"] = runs
        rows.append(row)
        b.log(f"worker {name}: workers {workers}: {row['rate']:,.0f} msg/s, "
              f"{row['cpu_us']:.1f} us CPU a message (hub {row['hub_cpu_us']:.1f}, workers "
              f"{row['worker_cpu_us']:.1f}), publisher {row['pub_send_rate']:,.0f} msg/s")
    one, two = rows
    cap = ceiling(one, two, cpus())
    b.log(f"worker {name}: workers 2 / 1 = {two['rate'] / one['rate']:.2f}x; CPU ceiling on "
          f"{cap['cpus']} CPUs {cap['max_speedup']:.2f}x ({cap['max_rate']:,.0f} msg/s); "
          f"{TARGET_SPEEDUP}x would need {cap['cpus_for_target']:.1f} CPUs; other work had "
          f"the machine {cap['other_busy'] * 100:.0f} % busy just before")
    return rows, cap


def run(b, bench, prof, results):
    """b: the bench module (Hub, blast, wait_quiet, proc_stat_cpu, median,
    bound_by, log, tail, BenchError)."""
    quick = prof["reps"] == 1
    sizes = {"no-op": 50_000 if quick else 200_000, "worker-bound": 10_000 if quick else 40_000}
    rows, caps = [], {}
    try:
        for name, callable_name, _ in CASES:
            pair, caps[name] = _measure(b, bench, prof, name, callable_name, sizes[name])
            rows += pair
    except b.BenchError as e:
        results["worker"] = {"status": "not measured: %s" % str(e).splitlines()[0]}
        b.log(results["worker"]["status"])
        return
    one, two = rows[0], rows[1]
    results["worker"] = {
        "status": "measured", "rows": rows, "ceiling": caps,
        "speedup": two["rate"] / one["rate"],
        "speedup_bound": rows[3]["rate"] / rows[2]["rate"],
        "met_rate": one["rate"] >= TARGET_RATE, "met_cpu": one["cpu_us"] <= TARGET_CPU_US,
        "met_speedup": two["rate"] / one["rate"] >= TARGET_SPEEDUP}


def markdown(results, w):
    """The case's section of results.md (w writes one line)."""
    entry = results.get("worker")
    if not entry:
        return
    w("## Python consumers in worker processes\n")
    if not entry.get("rows"):
        w("- %s\n" % entry["status"])
        return
    w("`plugin: python`; the runner parses each 100 B JSON body. *no-op*: the callable does "
      "nothing; *worker-bound*: it parses and walks a ~2 KiB Fedora body. Unpinned. CPU a "
      "message: the hub's CPU clock and the workers' /proc stat; on a shared machine compare "
      "these, not the rates.\n")
    w("| consumer | workers | msg/s | CPU/msg (hub + workers) | hub | workers | CPUs busy "
      "| publisher msg/s | bound by |")
    w("|---|---|---|---|---|---|---|---|---|")
    for r in entry["rows"]:
        w("| %s | %d | %s | %.1f us | %.1f us | %.1f us | %.2f | %s | %s |" % (
            r.get("consumer", "no-op"), r["workers"], format(round(r["rate"]), ","), r["cpu_us"],
            r["hub_cpu_us"], r["worker_cpu_us"], r["cpu_us"] * r["rate"] / 1e6,
            format(round(r["pub_send_rate"]), ","), r["bound_by"]))
    w("")
    rows = entry["rows"]
    for i, (name, cap) in enumerate(entry.get("ceiling", {}).items()):
        one, two = rows[2 * i], rows[2 * i + 1]
        w("- %s: workers 2 / 1 = %.2fx. CPU ceiling: one worker keeps %.2f CPUs busy; at "
          "%.1f us a message two workers can reach at most %d / %.1f us = %s msg/s = %.2fx one "
          "on this machine's %d CPUs; %.1fx would need %.1f CPUs.%s" % (
              name, two["rate"] / one["rate"], cap["one_cores"], two["cpu_us"], cap["cpus"],
              two["cpu_us"], format(round(cap["max_rate"]), ","), cap["max_speedup"],
              cap["cpus"], TARGET_SPEEDUP, cap["cpus_for_target"],
              " Other work had the machine %.0f %% busy just before these runs: the rates "
              "show the share of it these runs got (CPUs busy), not the ceiling; compare CPU "
              "a message." % (cap["other_busy"] * 100) if cap.get("other_busy", 0) > 0.1
              else ""))
    w("")
    w("Targets (no-op): one worker >= %s msg/s (%s), <= %.0f us CPU a message (%s); two workers "
      ">= %.1fx one (%.2fx, %s).\n" % (
          format(TARGET_RATE, ","), "met" if entry["met_rate"] else "NOT met", TARGET_CPU_US,
          "met" if entry["met_cpu"] else "NOT met", TARGET_SPEEDUP, entry["speedup"],
          "met" if entry["met_speedup"] else "NOT met"))
