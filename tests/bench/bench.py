#!/usr/bin/python3
"""bench.py - the fanhub benchmark: what the hub costs above raw libzmq.

Run by scripts/bench (which installs what is missing and builds
build/bench first); it can also be run by hand:

    /usr/bin/python3 tests/bench/bench.py --build build/bench [--quick]

Every case runs in one go on one machine, each repeated (median reported),
once with the publisher pinned to CPU 0 and the hub (or the raw
subscriber) to CPU 1 (taskset), and once unpinned:

  throughput  `fanhub pub` at full speed into `fanhub run` with K null
              consumers (every message goes to every consumer); in/s and
              deliveries/s over the wall time from publisher start to the
              last delivery; hub CPU per delivery from the process CPU
              clock; zero loss checked on the hub's own counters. The
              baseline is bench_raw, a raw libzmq SUB fed by the very same
              publisher command.
  latency     publish -> consume start at fixed rates, K latency plugins
              (tests/bench/latency_plugin.c) vs bench_raw at the same rate.
  routing     100 consumers with distinct prefix and glob patterns, each
              message matching 3: hub CPU per message.
  metrics     the K=4 throughput case while STATS is scraped 10 times a
              second, against no scraping (interleaved pairs).
  memory      4 consumers held (sleep plugin, release_file) on N queued
              1 KiB messages: VmRSS against the unique payload bytes.
  spill/pool  hooks: measured once `fanhub check` accepts the config.
  amqp        the RabbitMQ bridge (amqp plugin) with publisher confirms
              against amqp_pub, a minimal librabbitmq publisher with the
              same confirm window, one private broker (bench_amqp.py).
  cluster     keyed work on RabbitMQ shard queues: 3 worker hubs against 1
              with an I/O-bound consumer (1 ms per message), one private
              broker, the same run (bench_cluster.py; target >= 2.7x).
  worker      Python consumers (plugin: python, the runner parsing 100 B
              JSON bodies), a no-op one and a worker-bound one (parses a
              ~2 KiB Fedora body), in 1 and 2 worker processes: msg/s, CPU
              a message of hub and workers, the CPU ceiling of two workers;
              the no-op one at prefetch 10 against 1000 (and a
              --baseline-build tree); one Moksha consumer class under
              fanhub's runner and, with --moksha-path, under moksha-hub
              (bench_worker.py, bench_moksha_hub.py).
  callgrind   instructions per delivery under valgrind --tool=callgrind,
              K=4 null consumers: a machine-noise free regression figure.

Publishers are C (`fanhub pub`); Python only orchestrates. Everything is
on 127.0.0.1, every wait has a deadline, processes are stopped by PID.
Results: OUT/results.json, OUT/results.md, OUT/*.png (gnuplot).
"""

import argparse
import atexit
import importlib
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import fanhublib  # noqa: E402  (the integration tests' helpers)
from bench_common import BOUND_MARGIN, QUIET, TARGETS, log
from bench_report import charts, compare, load_results, machine, markdown

TOPIC = "org.fanhub.bench.message"

PROFILES = {
    "quick": dict(
        reps=1, tp_n=300_000, tp_n_large=5_000, tp_sizes=[100, 65536], tp_ks=[1, 4],
        fanin_n=300_000, scale_consumers=1000, scale_n=2_000, neighbour_n=20_000,
        check_consumers=20_000,
        lat_rates=[(10_000, 1.0)], lat_ks=[1, 8],
        route_n=100_000, metrics_reps=1, metrics_n=300_000, neighbour_reps=1,
        mem_n=100_000, mem_reps=1,
        pool_n=2_000, pool_keys=100, pool_single_n=500, spill_n=20_000,
        cg_n=20_000, cg_ks=[4], cg_reps=1, k1_n=300_000, k1_reps=3),
    "full": dict(
        reps=3, tp_n=1_000_000, tp_n_large=10_000, tp_sizes=[100, 1024, 65536],
        tp_ks=[1, 2, 4, 8], fanin_n=1_000_000, scale_consumers=1000, scale_n=5_000,
        # neighbour: runs of a second. In a tenth of one, what the spill
        # costs once a run (its start) weighed some 100 ns a message: it
        # added 265 ns at 100,000, 197 at 300,000 and 160 at 1,000,000
        # (docs/performance.md, "The spill's added CPU and the run's length").
        neighbour_n=1_000_000, check_consumers=20_000,
        lat_rates=[(100, 20.0), (1_000, 10.0), (10_000, 5.0), (100_000, 3.0)], lat_ks=[1, 8],
        route_n=500_000, metrics_reps=5, metrics_n=1_000_000, neighbour_reps=5,
        mem_n=1_000_000, mem_reps=3,
        pool_n=100_000, pool_keys=1_000, pool_single_n=10_000, spill_n=200_000,
        cg_n=20_000, cg_ks=[1, 4], cg_reps=1, k1_n=1_000_000, k1_reps=5),
}

# ---------------------------------------------------------------------------
# Small helpers

ZCTX = zmq.Context.instance()
CHILDREN = []  # Popen objects still to stop at exit
VERBOSE = False


def debug(msg):
    if VERBOSE:
        log(msg)


class BenchError(Exception):
    pass


def free_port():
    # Reserved for this process (fanhublib.free_port), not bind(0)-and-hope.
    return fanhublib.free_port()


def spawn(cmd, cpu=None, stdout=None, stderr=None, stdin=subprocess.DEVNULL):
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    debug("spawn: " + " ".join(cmd))
    p = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, stdin=stdin)
    CHILDREN.append(p)
    return p


def stop(p, sig=signal.SIGTERM, timeout=15.0):
    """Signals p (by PID), waits up to timeout, then kills it."""
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    if p in CHILDREN:
        CHILDREN.remove(p)
    return p.returncode


def wait_exit(p, timeout, what):
    try:
        p.wait(timeout=max(0.1, timeout))
    except subprocess.TimeoutExpired:
        stop(p, signal.SIGKILL)
        raise BenchError(f"{what}: still running after {timeout:.0f} s; killed")
    if p in CHILDREN:
        CHILDREN.remove(p)
    return p.returncode


@atexit.register
def _cleanup():
    for p in list(CHILDREN):
        try:
            stop(p, timeout=5)
        except Exception:
            pass


def cpu_clock(pid):
    """CPU seconds of process pid, all threads, ns resolution (the process
    CPU-time clock: clock_getcpuclockid(pid))."""
    return time.clock_gettime(((~pid) << 3) | 2)


def proc_stat_cpu(pid):
    """utime + stime from /proc/PID/stat, seconds (clock-tick resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid, prefix):
    """CPU seconds of the threads of pid whose name starts with prefix
    (/proc/PID/task/*/schedstat, ns resolution)."""
    total = 0
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(task + "/comm") as f:
                if not f.read().startswith(prefix):
                    continue
            with open(task + "/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass  # the thread ended meanwhile
    return total / 1e9


def ctx_switches(pid):
    """Voluntary + involuntary context switches of all threads of pid."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def proc_status(pid, key):
    """A field of /proc/PID/status: sizes (kB) in bytes, counts as read
    times 1024 (divide Threads by 1024)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def machine_busy(interval=0.15):
    """Fraction of all CPUs busy (not idle, not iowait) over interval s."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        return idle, sum(v[:8])
    i0, t0 = sample()
    time.sleep(interval)
    i1, t1 = sample()
    return 1 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet():
    """Before a run: waits (up to QUIET max_wait s) until the machine is
    nearly idle, so that other work does not land in the figures. Keeps the
    load seen last, for the report."""
    start = time.monotonic()
    deadline = start + min(QUIET["max_wait"], max(0.0, QUIET["budget"]))
    while True:
        busy = machine_busy()
        if busy <= QUIET["threshold"] or time.monotonic() >= deadline:
            break
        time.sleep(0.3)
    QUIET["budget"] -= time.monotonic() - start
    QUIET["samples"].append(busy)
    if busy > QUIET["threshold"]:
        log(f"warning: the machine is {busy*100:.0f} % busy with other work; "
            "figures of this run are disturbed")
    return busy


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def tail(path, lines=12):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


# Histogram buckets: keep in step with bench_hist.h.
HIST_SUB_BITS = 7
HIST_SUB = 1 << HIST_SUB_BITS


def hist_low(i):
    if i < 2 * HIST_SUB:
        return i
    shift = i // HIST_SUB - 1
    return (i - shift * HIST_SUB) << shift


def hist_summary(hists):
    """Merges the sparse bucket lists of several histograms (dicts as the C
    side prints them) and answers count and percentiles in ns."""
    buckets = {}
    count = 0
    vmax = 0
    vmin = None
    total = 0.0
    for h in hists:
        count += h["count"]
        if h["count"]:
            vmax = max(vmax, h["max_ns"])
            vmin = h["min_ns"] if vmin is None else min(vmin, h["min_ns"])
            total += h["mean_ns"] * h["count"]
        for i, c in h["buckets"]:
            buckets[i] = buckets.get(i, 0) + c
    out = {"count": count, "max_ns": vmax, "min_ns": vmin or 0,
           "mean_ns": total / count if count else 0}
    order = sorted(buckets)
    for name, q in (("p50_ns", 0.5), ("p90_ns", 0.9), ("p99_ns", 0.99), ("p999_ns", 0.999)):
        rank = max(1, int(q * count + 0.999999))
        seen = 0
        value = vmax
        for i in order:
            seen += buckets[i]
            if seen >= rank:
                low, high = hist_low(i), hist_low(i + 1)
                value = min(max(low + (high - low) // 2, vmin or 0), vmax)
                break
        out[name] = value if count else 0
    return out


# ---------------------------------------------------------------------------
# The pieces: hub, raw subscriber, publisher

class Bench:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.fanhub = os.path.join(self.build, "bin", "fanhub")
        self.bench_raw = os.path.join(self.build, "bin", "bench_raw")
        self.bench_pub = os.path.join(self.build, "bin", "bench_pub")
        self.latency_so = os.path.join(self.build, "bench-plugins", "latency.so")
        self.sleep_so = os.path.join(self.build, "test-plugins", "sleep.so")
        self.spill_floor = os.path.join(self.build, "bin", "spill_floor")
        for path in (self.fanhub, self.bench_raw, self.bench_pub, self.latency_so,
                     self.sleep_so, self.spill_floor):
            if not os.path.exists(path):
                raise BenchError(f"{path} is missing: build first (scripts/bench does)")
        self.tmp = tempfile.mkdtemp(prefix="fanhub-bench-")
        if not args.keep_tmp:
            atexit.register(shutil.rmtree, self.tmp, True)
        else:
            log(f"keeping {self.tmp}")
        self.seq = 0
        ncpu = os.cpu_count() or 1
        # (label, publisher cpu, hub cpu)
        self.placements = [("pinned", 0, 1), ("unpinned", None, None)]
        if ncpu < 2 or args.placement == "unpinned":
            self.placements = [p for p in self.placements if p[0] == "unpinned"]
        elif args.placement == "pinned":
            self.placements = [p for p in self.placements if p[0] == "pinned"]

    def path(self, name):
        self.seq += 1
        return os.path.join(self.tmp, f"{self.seq:04d}-{name}")


def stats_call(endpoint, timeout_ms=2000, command=b"STATS"):
    sock = ZCTX.socket(zmq.REQ)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVTIMEO, timeout_ms)
    sock.setsockopt(zmq.SNDTIMEO, timeout_ms)
    try:
        sock.connect(endpoint)
        sock.send(command)
        reply = sock.recv()
    except zmq.Again:
        return None
    finally:
        sock.close()
    if command != b"STATS":
        return reply
    return json.loads(reply)


class _Scratch(fanhublib.Workdir):
    """fanhublib's Workdir on the bench's scratch directory (which the
    bench removes itself)."""

    def __init__(self, path):
        self.path = path


class Hub(fanhublib.Hub):
    """One `fanhub run` with a generated configuration: the integration
    tests' Hub (tests/integration/fanhublib.py), started pinned or under
    valgrind when asked, and waited for; with what a benchmark reads of
    it (its CPU clock, when it has gone idle, STATS without disturbing
    it more than once)."""

    def __init__(self, bench, consumers, cpu=None, extra="", shutdown_timeout=5,
                 valgrind=None, rcvhwm=None, ready_timeout=20.0, curve=None, bus_extra=""):
        self.bench = bench
        self.bus = f"tcp://127.0.0.1:{free_port()}"
        lines = [f"bus:\n  bind: {self.bus}"]
        if rcvhwm is not None:
            lines.append(f"  rcvhwm: {rcvhwm}")
        if bus_extra:
            lines.append(bus_extra.rstrip("\n"))
        if curve:
            lines.append(f"  curve:\n    secret_key_file: \"{curve.hub_secret_file}\"\n"
                         f"    allow: [\"{curve.pub_public}\"]")
        lines.append(f"shutdown_timeout: {shutdown_timeout}")
        if extra:
            lines.append(extra.rstrip("\n"))
        lines.append("consumers:")
        lines.extend(consumers)
        prefix = (["taskset", "-c", str(cpu)] if cpu is not None else []) + list(valgrind or [])
        fanhublib.BIN = bench.fanhub
        name = os.path.basename(bench.path("hub"))  # a name of its own for each run
        super().__init__(_Scratch(bench.tmp), "\n".join(lines) + "\n", name=name,
                         extra_args=["-q"], prefix=prefix)
        CHILDREN.append(self.proc)
        debug("spawn: " + " ".join(prefix + [bench.fanhub, "run", "-c", self.config, "-q"]))
        self.pid = self.proc.pid
        self.logfile = self.stderr_path
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise BenchError(f"fanhub run exited ({self.proc.returncode}):\n"
                                 + tail(self.logfile))
            if time.monotonic() > deadline:
                self.stop()
                raise BenchError("fanhub run: no answer on the control socket\n"
                                 + tail(self.logfile))
            if stats_call(self.control, 300, b"PING") == b"PONG":
                break
            time.sleep(0.02)

    def stats(self, timeout_ms=5000):
        s = stats_call(self.control, timeout_ms)
        if s is None:
            raise BenchError("fanhub run: STATS timed out\n" + tail(self.logfile))
        return s

    def cpu(self):
        return cpu_clock(self.pid)

    def stop(self, timeout=30.0):
        """SIGTERM, then SIGKILL after timeout s: its exit status."""
        rc = stop(self.proc, timeout=timeout)
        self.err.close()
        self.out.close()
        return rc

    def wait_idle(self, deadline_s, busy_frac=0.05, idle_s=2.0):
        """Waits until the process used less than busy_frac of one CPU over
        the last idle_s seconds, without asking the hub anything (its
        timers still run now and then, hence a window, not a gap)."""
        deadline = time.monotonic() + deadline_s
        samples = [(time.monotonic(), self.cpu())]
        while time.monotonic() < deadline:
            time.sleep(0.1)
            t, c = time.monotonic(), self.cpu()
            samples.append((t, c))
            while len(samples) > 2 and samples[1][0] <= t - idle_s:
                samples.pop(0)
            t0, c0 = samples[0]
            if t - t0 >= idle_s and c - c0 < busy_frac * (t - t0):
                return
        raise BenchError(f"the hub was still busy after {deadline_s:.0f} s")

    def wait_done(self, done, deadline_s, busy_frac=0.1, idle_s=0.03):
        """Waits until the hub has gone idle and done(stats) holds. Returns
        (t_last_busy, cpu_at_last_busy, stats). Idleness is read from the
        process CPU clock (the hub is not disturbed); STATS is asked only
        when the hub looks idle."""
        deadline = time.monotonic() + deadline_s
        prev_t, prev_c = time.monotonic(), self.cpu()
        busy_t, busy_c = prev_t, prev_c
        while time.monotonic() < deadline:
            time.sleep(0.002)
            t, c = time.monotonic(), self.cpu()
            if c - prev_c > busy_frac * (t - prev_t):
                busy_t, busy_c = t, c
            prev_t, prev_c = t, c
            if t - busy_t >= idle_s:
                s = self.stats()
                if done(s):
                    return busy_t, busy_c, s
                busy_t = prev_t = time.monotonic()
                prev_c = self.cpu()
                if self.proc.poll() is not None:
                    raise BenchError("fanhub run died\n" + tail(self.logfile))
        s = self.stats()
        raise BenchError(f"the hub did not finish within {deadline_s:.0f} s: received "
                         f"{s['hub']['received']}, endpoints {s['hub'].get('endpoints')}, "
                         "consumers "
                         + ", ".join(f"{c['name']}: completed {c['completed']} dropped "
                                     f"{c['dropped']} backlog {c['backlog']}"
                                     for c in s["consumers"][:8])
                         + f"; hub log ({self.logfile}):\n" + tail(self.logfile))


def publish(bench, endpoint, n, cpu=None, size=100, rate=None, jsonl=None, topic=TOPIC,
            stamp=True, wait_subscribers=1, deadline_s=None):
    """Runs `fanhub pub --connect endpoint` to the end. Returns
    (t_spawn, t_exit, send_rate) with monotonic seconds."""
    cmd = [bench.fanhub, "pub", "--connect", endpoint, "--wait-subscribers", str(wait_subscribers),
           "--timeout", "20", "-n", str(n), "--linger-ms", "-1"]
    if jsonl:
        cmd += ["--jsonl", jsonl]
    else:
        cmd += ["--size", str(size), "-t", topic]
    if rate:
        cmd += ["--rate", str(rate)]
    if stamp:
        cmd += ["--stamp"]
    errfile = bench.path("pub.err")
    with open(errfile, "w") as err:
        t0 = time.monotonic()
        p = spawn(cmd, cpu=cpu, stdout=subprocess.DEVNULL, stderr=err)
        if deadline_s is None:
            deadline_s = 60 + (n / rate if rate else n / 50_000)
        rc = wait_exit(p, deadline_s, "fanhub pub")
        t1 = time.monotonic()
    text = tail(errfile)
    if rc != 0:
        raise BenchError(f"fanhub pub failed ({rc}): {text}")
    m = re.search(r"sent (\d+) messages .*\(([0-9.]+) msg/s\)", text)
    if m and int(m.group(1)) != n:
        raise BenchError(f"fanhub pub sent {m.group(1)} of {n} messages: {text}")
    return t0, t1, float(m.group(2)) if m else None


def blast(bench, endpoint, n, cpu=None, size=100, topic=TOPIC, topics_file=None,
          connections=1, stamp=True, subscriptions=1, deadline_s=None, curve=None,
          json_body=False, seq=False):
    """Runs bench_pub (the full-speed publisher) to the end, a CURVE client
    with the keys of curve (CurveKeys) when given. Returns its
    JSON: sent, send_rate (its own rate, first to last send), t_first_ns,
    t_last_ns, t_flushed_ns (CLOCK_MONOTONIC, as time.monotonic)."""
    cmd = [bench.bench_pub, "--connect", endpoint, "-n", str(n), "--size", str(size),
           "--connections", str(connections), "--subscriptions", str(subscriptions),
           "--timeout", "120"]
    cmd += ["--topics", topics_file] if topics_file else ["--topic", topic]
    if not stamp:
        cmd.append("--no-stamp")
    if json_body:
        cmd.append("--json")
    if seq:
        cmd.append("--seq")  # {"i": N, ...}: the consumer checks its order
    if curve:
        cmd += ["--curve-server-key", curve.hub_public, "--curve-keys", curve.pub_secret_file]
    errfile = bench.path("bench_pub.err")
    with open(errfile, "w") as err:
        p = spawn(cmd, cpu=cpu, stdout=subprocess.PIPE, stderr=err)
        out, _ = p.communicate(timeout=deadline_s or 60 + n / 20_000)
        if p in CHILDREN:
            CHILDREN.remove(p)
    lines = out.decode(errors="replace").split()
    if p.returncode != 0 or not lines or lines[0] != "ready":
        raise BenchError(f"bench_pub failed ({p.returncode}): {tail(errfile)}")
    result = json.loads(lines[-1])
    if result["sent"] != n:
        raise BenchError(f"bench_pub sent {result['sent']} of {n}")
    return result




def bound_by(pub_rate, recv_rate):
    if not pub_rate or not recv_rate:
        return "unknown"
    return "receiver" if pub_rate >= BOUND_MARGIN * recv_rate else "publisher"


def raw_run(bench, n, size, placement, rate=None, connections=1):
    """bench_raw fed by bench_pub (fanhub pub at a fixed rate). Returns its
    JSON plus rate figures."""
    _, pub_cpu, sub_cpu = placement
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    errfile = bench.path("raw.err")
    busy = wait_quiet()
    deadline_s = 60 + (n / rate if rate else n / 20_000)
    with open(errfile, "w") as err:
        sub = spawn([bench.bench_raw, "--bind", endpoint, "-n", str(n), "--timeout",
                     str(int(deadline_s))], cpu=sub_cpu, stdout=subprocess.PIPE, stderr=err)
        line = sub.stdout.readline()
        if line.strip() != b"ready":
            stop(sub)
            raise BenchError("bench_raw did not start: " + tail(errfile))
        if rate:
            t0, _, send_rate = publish(bench, endpoint, n, cpu=pub_cpu, size=size, rate=rate)
        else:
            pub = blast(bench, endpoint, n, cpu=pub_cpu, size=size, connections=connections,
                        deadline_s=deadline_s)
            t0, send_rate = pub["t_first_ns"] / 1e9, pub["send_rate"]
        out = sub.stdout.read()
        rc = wait_exit(sub, deadline_s, "bench_raw")
    result = json.loads(out)
    if rc != 0 or result["received"] != n:
        raise BenchError(f"bench_raw: received {result['received']} of {n} (rc {rc})")
    wall = result["t_last_ns"] / 1e9 - t0
    result.update(busy_before=busy, rate=n / wall, cpu_per_msg_ns=result["cpu_s"] / n * 1e9,
                  wall_s=wall, pub_send_rate=send_rate, loss=n - result["received"],
                  ctx_per_msg=result.get("ctx_switches", 0) / n,
                  bound_by=bound_by(send_rate, n / wall), connections=connections)
    return result


def null_consumers(k, capacity):
    return [f"  - {{name: n{i}, plugin: \"null\", queue: {{capacity: {capacity}}}}}"
            for i in range(k)]


def hub_throughput(bench, k, size, n, placement, scrape_hz=0, consumers=None,
                   jsonl=None, extra="", expect_deliveries=None, wait_subscribers=1,
                   perf_data=None, topics_file=None, connections=1, curve=None,
                   done_file=None, bus_extra=""):
    """K null consumers (or the given ones) at full speed, fed by bench_pub
    (by `fanhub pub` when the bodies come from jsonl). With curve
    (CurveKeys), the bus is CURVE: the hub the server, bench_pub a client
    it allows. The run ends when the hub has gone idle with every delivery
    made; with done_file (a log consumer's file), when that file was last
    written (the consumer writes what it buffered when its queue runs
    empty), so other consumers' work after it does not count in its rate.
    Returns figures."""
    label, pub_cpu, hub_cpu = placement
    hub = Hub(bench, consumers or null_consumers(k, n + 1024), cpu=hub_cpu, extra=extra,
              curve=curve, bus_extra=bus_extra)
    try:
        expect_deliveries = expect_deliveries if expect_deliveries is not None else n * k
        stop_scrape = threading.Event()
        scrapes = [0]

        def scraper():
            period = 1.0 / scrape_hz
            nxt = time.monotonic()
            while not stop_scrape.is_set():
                if stats_call(hub.control, 2000) is not None:
                    scrapes[0] += 1
                nxt += period
                stop_scrape.wait(max(0.0, nxt - time.monotonic()))

        busy = wait_quiet()
        perf = None
        if perf_data:
            perf = spawn(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4999", "-g",
                          "-o", perf_data, "-p", str(hub.pid)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        thread = None
        if scrape_hz:
            thread = threading.Thread(target=scraper, daemon=True)
            thread.start()
        rss_idle, threads = proc_status(hub.pid, "VmRSS"), proc_status(hub.pid, "Threads")
        c0, s0, x0 = hub.cpu(), proc_stat_cpu(hub.pid), ctx_switches(hub.pid)
        control0 = thread_cpu(hub.pid, "fh:control")
        if jsonl:
            t0, t_pub_exit, send_rate = publish(bench, hub.bus, n, cpu=pub_cpu, size=size,
                                                jsonl=jsonl, wait_subscribers=wait_subscribers)
        else:
            pub = blast(bench, hub.bus, n, cpu=pub_cpu, size=size, topics_file=topics_file,
                        connections=connections, subscriptions=wait_subscribers, curve=curve)
            t0, t_pub_exit = pub["t_first_ns"] / 1e9, pub["t_flushed_ns"] / 1e9
            send_rate = pub["send_rate"]

        def done(s):
            return (s["hub"]["received"] >= n
                    and sum(c["completed"] + c["failed"] + c["dropped"]
                            for c in s["consumers"]) >= expect_deliveries)

        t_done, c_done, st = hub.wait_done(done, 120 + n / 20_000)
        control_cpu = thread_cpu(hub.pid, "fh:control") - control0
        t_idle = t_done
        if done_file:
            # Its last write, on the monotonic clock of t0.
            t_done = os.stat(done_file).st_mtime_ns / 1e9 - (time.time() - time.monotonic())
        s1, x1 = proc_stat_cpu(hub.pid), ctx_switches(hub.pid)
        rss_after = proc_status(hub.pid, "VmRSS")
        stop_scrape.set()
        if thread:
            thread.join(5)
        if perf:
            stop(perf, signal.SIGINT, timeout=60)
    finally:
        hub.stop()
    wall = t_done - t0
    received = st["hub"]["received"]
    completed = sum(c["completed"] for c in st["consumers"])
    dropped = sum(c["dropped"] for c in st["consumers"])
    cpu = c_done - c0
    return dict(placement=label, k=k, size=size, n=n, wall_s=wall, in_rate=n / wall,
                idle_after_s=t_idle - t_done,
                deliveries=completed, deliveries_rate=completed / wall,
                hub_cpu_s=cpu, hub_cpu_stat_s=s1 - s0, control_cpu_s=control_cpu,
                cpu_per_delivery_ns=cpu / max(1, completed) * 1e9,
                cpu_per_msg_ns=cpu / n * 1e9, received=received, loss=n - received,
                dropped=dropped, failed=sum(c["failed"] for c in st["consumers"]),
                backlog_max=max(c["backlog_max"] for c in st["consumers"]),
                pub_send_rate=send_rate, pub_exit_s=t_pub_exit - t0, scrapes=scrapes[0],
                ctx_per_msg=(x1 - x0) / n, ctx_per_delivery=(x1 - x0) / max(1, completed),
                busy_before=busy, bound_by=bound_by(send_rate, n / wall),
                connections=connections, rss_idle=rss_idle, rss_after=rss_after,
                threads=threads // 1024)


def hub_latency(bench, k, rate, n, placement):
    label, pub_cpu, hub_cpu = placement
    paths = [bench.path(f"lat{i}.json") for i in range(k)]
    consumers = [f"  - {{name: l{i}, plugin: \"{bench.latency_so}\", "
                 f"queue: {{capacity: {n + 1024}}}, options: {{path: \"{p}\"}}}}"
                 for i, p in enumerate(paths)]
    hub = Hub(bench, consumers, cpu=hub_cpu)
    try:
        busy = wait_quiet()
        x0 = ctx_switches(hub.pid)
        publish(bench, hub.bus, n, cpu=pub_cpu, size=100, rate=rate)
        _, _, st = hub.wait_done(
            lambda s: s["hub"]["received"] >= n
            and all(c["completed"] + c["dropped"] >= n for c in s["consumers"]), 60)
        x1 = ctx_switches(hub.pid)
    finally:
        hub.stop()
    hists = []
    for p in paths:
        with open(p) as f:
            hists.append(json.load(f))
    summary = hist_summary(hists)
    summary.update(busy_before=busy, placement=label, k=k, rate=rate, n=n,
                   ctx_per_msg=(x1 - x0) / n,
                   received=st["hub"]["received"],
                   dropped=sum(c["dropped"] for c in st["consumers"]),
                   no_stamp=sum(h["no_stamp"] for h in hists))
    return summary


# ---------------------------------------------------------------------------
# Cases

def retry(fn, *args, **kwargs):
    """One run, tried a second time when it fails: on a shared machine a
    stray signal or a stall can spoil one run; two in a row fail the case."""
    try:
        return fn(*args, **kwargs)
    except BenchError as e:
        log(f"{fn.__name__} failed, trying once more: {str(e).splitlines()[0][:300]}")
        return fn(*args, **kwargs)


def rep_median(runs, keys):
    out = dict(runs[0])
    for key in keys:
        out[key] = median([r.get(key) for r in runs])
    out["reps"] = len(runs)
    out["runs"] = [{key: r.get(key) for key in keys} for r in runs]
    received = out.get("in_rate", out.get("rate"))
    if "pub_send_rate" in out and received:
        out["bound_by"] = bound_by(out["pub_send_rate"], received)
    return out


TP_KEYS = ["rate", "in_rate", "deliveries_rate", "cpu_per_msg_ns", "cpu_per_delivery_ns",
           "cpu_s", "hub_cpu_s", "hub_cpu_stat_s", "wall_s", "pub_send_rate", "loss",
           "dropped", "backlog_max", "pub_exit_s", "scrapes", "p99_ns", "ctx_per_msg",
           "ctx_per_delivery", "idle_after_s", "control_cpu_s"]
LAT_KEYS = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "count",
            "ctx_per_msg"]


def tp_count(prof, size):
    """Messages per throughput run: fewer for large bodies (the backlog of
    a fast publisher may be held in memory whole)."""
    return prof["tp_n"] if size <= 1024 else prof["tp_n_large"]




ROUTE_SERVICES, ROUTE_EVENTS, ROUTE_KINDS = 40, 10, 5


def routing_setup(bench, capacity):
    """100 consumers: 40 prefixes (one per service), 50 globs
    org.bench.*.evB.kC, 10 globs *.evB.*; each topic matches exactly 3.
    Topics: org.bench.sAA.evB.kC, 2000 of them, cycled by --jsonl."""
    consumers, patterns = [], []
    for a in range(ROUTE_SERVICES):
        patterns.append(f"org.bench.s{a:02d}.")
    for b in range(ROUTE_EVENTS):
        for c in range(ROUTE_KINDS):
            patterns.append(f"org.bench.*.ev{b}.k{c}")
    for b in range(ROUTE_EVENTS):
        patterns.append(f"*.ev{b}.*")
    for i, pat in enumerate(patterns):
        consumers.append(f"  - {{name: r{i:03d}, plugin: \"null\", topics: [\"{pat}\"], "
                         f"queue: {{capacity: {capacity}}}}}")
    path = os.path.join(bench.tmp, "routing.jsonl")
    if not os.path.exists(path):
        # a fixed, shuffled order (a multiplicative walk over the 2000 topics)
        total = ROUTE_SERVICES * ROUTE_EVENTS * ROUTE_KINDS
        with open(path, "w") as f:
            for j in range(total):
                x = (j * 1237) % total
                a, rest = divmod(x, ROUTE_EVENTS * ROUTE_KINDS)
                b, c = divmod(rest, ROUTE_KINDS)
                topic = f"org.bench.s{a:02d}.ev{b}.k{c}"
                f.write(json.dumps({"topic": topic, "body": {"pad": "x" * 90}}) + "\n")
    topics = os.path.join(bench.tmp, "routing.topics")
    if not os.path.exists(topics):
        with open(path) as f, open(topics, "w") as out:
            for line in f:
                out.write(json.loads(line)["topic"] + "\n")
    return consumers, topics, len(patterns)


def scale_setup(bench, count, routed):
    """count null consumers with the default queue capacity. routed: each
    has the pattern org.bench.gNNN. shared by three (groups of 3), and the
    topics (one per full group) each match exactly 3; else no topics."""
    consumers = []
    for i in range(count):
        topics = f", topics: [\"org.bench.g{i // 3:03d}.\"]" if routed else ""
        consumers.append(f"  - {{name: c{i:04d}, plugin: \"null\"{topics}}}")
    path = os.path.join(bench.tmp, f"scale-{count}.topics")
    with open(path, "w") as f:
        for g in range(count // 3):
            f.write(f"org.bench.g{g:03d}.event\n")
    # The hub subscribes once per prefix: the publisher waits for them all
    # (a message sent before its prefix arrives is filtered out, unseen).
    subscriptions = (count + 2) // 3 if routed else 1
    return consumers, path, subscriptions


def case_cluster(bench, prof, results):
    """3 worker hubs against 1 on RabbitMQ shard queues:
    tests/bench/bench_cluster.py."""
    import bench_cluster
    bench_cluster.run(sys.modules[__name__], bench, prof, results)


def case_signatures(bench, prof, results):
    """The input rate with bus.validate_signatures on against off:
    tests/bench/bench_signatures.py."""
    import bench_signatures
    bench_signatures.run(sys.modules[__name__], bench, prof, results)


def case_worker(bench, prof, results):
    """Python consumers (no-op and worker-bound) in 1 and 2 worker
    processes: tests/bench/bench_worker.py."""
    import bench_worker
    bench_worker.run(sys.modules[__name__], bench, prof, results)


def case_amqp(bench, prof, results):
    """The RabbitMQ bridge with confirms against a minimal librabbitmq
    publisher: tests/bench/bench_amqp.py."""
    import bench_amqp
    bench_amqp.run(sys.modules[__name__], bench, prof, results)


def fanhub_check(bench, text):
    path = bench.path("check.yaml")
    with open(path, "w") as f:
        f.write(text)
    p = subprocess.run([bench.fanhub, "check", "-c", path], capture_output=True, text=True,
                       timeout=30)
    why = (p.stderr or p.stdout).strip().splitlines()
    return p.returncode == 0, (why[0] if why else f"exit {p.returncode}")


# ---------------------------------------------------------------------------
# Cases to run

CASES = ["throughput", "k1-paired", "fanin", "latency", "routing", "scale", "check", "metrics",
         "memory", "spill", "neighbour", "curve", "signatures", "pool", "amqp", "cluster",
         "worker", "callgrind"]
EXTRA_CASES = ["profile"]  # only when asked for with --cases
# Cases in modules of their own (tests/bench/MODULE.py, case_CASE there,
# which reads this module as its `b`); the others are above, or take this
# module as an argument of their module's run().
CASE_MODULES = {"throughput": "bench_throughput", "fanin": "bench_throughput",
                "latency": "bench_throughput", "routing": "bench_scale", "scale": "bench_scale",
                "check": "bench_scale", "callgrind": "bench_callgrind", "profile": "bench_callgrind",
                "spill": "bench_spill", "neighbour": "bench_spill",
                "metrics": "bench_resources", "memory": "bench_resources",
                "pool": "bench_resources", "curve": "bench_curve", "k1-paired": "bench_k1"}


def case_function(case):
    if case not in CASE_MODULES:
        return globals()[f"case_{case}"]
    module = importlib.import_module(CASE_MODULES[case])
    module.b = sys.modules[__name__]
    return getattr(module, "case_" + case.replace("-", "_"))


def main():
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the build tree (bin/fanhub, ...)")
    ap.add_argument("--out", default="bench-results", help="where results go")
    ap.add_argument("--quick", action="store_true", help="the short run (< 2 minutes)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset")
    ap.add_argument("--placement", choices=["both", "pinned", "unpinned"], default="both")
    ap.add_argument("--reps", type=int, help="repetitions (default 3; 1 with --quick)")
    ap.add_argument("--rates", help="the latency case's rates (msg/s, comma-separated; "
                                    "default 100,1000,10000,100000; 10000 with --quick)")
    ap.add_argument("--quiet-wait", type=float,
                    help="seconds to wait before each run for the machine to go idle "
                         "(default 10; 2 with --quick)")
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the scratch directory (configurations, logs)")
    ap.add_argument("--moksha-path", metavar="DIR",
                    help="the worker case: where moksha.hub, moksha.common and their "
                         "dependencies import from (':'-separated); adds the moksha-hub "
                         "rows beside the runner's (skipped without it)")
    ap.add_argument("--baseline-build", metavar="DIR",
                    help="the worker case: the build tree of another commit (bin/fanhub "
                         "and its python plugin); its no-op row runs beside this tree's")
    ap.add_argument("--k1-messages", type=int, metavar="N",
                    help="the k1-paired case: messages a run (default 1,000,000; 300,000 "
                         "with --quick)")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--compare", nargs="+", metavar="JSON",
                    help="OLD.json: after the run, print each figure of this run against "
                         "OLD's; OLD.json NEW.json: compare two runs, run nothing")
    args = ap.parse_args()
    VERBOSE = args.verbose
    if args.compare and len(args.compare) > 2:
        ap.error("--compare takes OLD.json, or OLD.json NEW.json")
    if args.compare and len(args.compare) == 2:
        print(compare(load_results(args.compare[0]), load_results(args.compare[1])))
        return 0
    prof = dict(PROFILES["quick" if args.quick else "full"])
    if args.reps:
        prof["reps"] = args.reps
        prof["metrics_reps"] = max(args.reps, prof["metrics_reps"] if not args.quick else 1)
        prof["mem_reps"] = args.reps
        prof["neighbour_reps"] = args.reps
        prof["k1_reps"] = args.reps
    if args.k1_messages is not None:
        if args.k1_messages <= 0:
            ap.error("--k1-messages: give a count above 0")
        prof["k1_n"] = args.k1_messages
    if args.rates:
        try:
            rates = [int(r) for r in args.rates.split(",") if r]
        except ValueError:
            ap.error(f"--rates: {args.rates!r} is not a list of whole numbers")
        if not rates or min(rates) <= 0:
            ap.error("--rates: give at least one rate above 0")
        # A rate of the profile keeps its length; another gets 2,000
        # samples (a p99 of 20), at least 3 s.
        known = dict(PROFILES["full"]["lat_rates"])
        prof["lat_rates"] = [(r, known.get(r, max(3.0, 2000 / r))) for r in rates]
    QUIET["max_wait"] = args.quiet_wait if args.quiet_wait is not None else (
        2.0 if args.quick else 10.0)
    QUIET["budget"] = 15.0 if args.quick else 900.0  # seconds of waiting in all
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in CASES + EXTRA_CASES:
            ap.error(f"unknown case {c}; cases: {', '.join(CASES + EXTRA_CASES)}")
    bench = Bench(args)
    outdir = os.path.abspath(args.out)
    os.makedirs(outdir, exist_ok=True)
    version = subprocess.run([bench.fanhub, "--version"], capture_output=True,
                             text=True).stdout.strip()
    here = os.path.dirname(os.path.abspath(__file__))
    git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True,
                         text=True, cwd=here).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=here).stdout.strip()
    results = dict(profile="quick" if args.quick else "full",
                   started=time.strftime("%Y-%m-%d %H:%M:%S %Z"), machine=machine(),
                   fanhub_version=version, git=git, git_commit=commit, reps=prof["reps"],
                   placements=[p[0] for p in bench.placements], params=prof, targets=TARGETS)
    t_start = time.monotonic()
    failures = []
    for case in cases:
        log(f"== {case}")
        try:
            if case in ("callgrind", "profile"):
                case_function(case)(bench, prof, results, outdir)
            else:
                case_function(case)(bench, prof, results)
        except (BenchError, subprocess.SubprocessError, OSError, KeyError, ValueError) as e:
            failures.append(f"{case}: {e}")
            log(f"{case} FAILED: {e}")
            results.setdefault("failures", []).append(f"{case}: {e}")
    results["elapsed_s"] = time.monotonic() - t_start
    if QUIET["samples"]:
        results["background_busy"] = dict(median=median(QUIET["samples"]),
                                          max=max(QUIET["samples"]),
                                          runs=len(QUIET["samples"]))
    with open(os.path.join(outdir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    md = markdown(results)
    if failures:
        md += "\n## Failures\n\n" + "\n".join(f"- {x}" for x in failures) + "\n"
    with open(os.path.join(outdir, "results.md"), "w") as f:
        f.write(md)
    charts(results, outdir)
    log(f"done in {results['elapsed_s']:.0f} s: {outdir}/results.md")
    print(md)
    if args.compare:
        text = compare(load_results(args.compare[0]), results)
        with open(os.path.join(outdir, "compare.md"), "w") as f:
            f.write(text)
        print(text)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
