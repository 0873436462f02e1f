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
              a message of hub and workers, the CPU ceiling of two workers
              (bench_worker.py).
  callgrind   instructions per delivery under valgrind --tool=callgrind,
              K=4 null consumers: a machine-noise free regression figure.

Publishers are C (`fanhub pub`); Python only orchestrates. Everything is
on 127.0.0.1, every wait has a deadline, processes are stopped by PID.
Results: OUT/results.json, OUT/results.md, OUT/*.png (gnuplot).
"""

import argparse
import atexit
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import zmq

from bench_common import BOUND_MARGIN, QUIET, TARGETS, log
from bench_report import charts, compare, load_results, machine, markdown

TOPIC = "org.fanhub.bench.message"

PROFILES = {
    "quick": dict(
        reps=1, tp_n=300_000, tp_n_large=5_000, tp_sizes=[100, 65536], tp_ks=[1, 4],
        fanin_n=300_000, scale_consumers=1000, scale_n=2_000, neighbour_n=20_000,
        check_consumers=20_000,
        lat_rates=[(10_000, 1.0)], lat_ks=[1, 8],
        route_n=100_000, metrics_reps=1, metrics_n=300_000,
        mem_n=100_000, mem_reps=1,
        pool_n=2_000, pool_keys=100, pool_single_n=500, spill_n=20_000,
        cg_n=20_000, cg_ks=[4], cg_reps=1),
    "full": dict(
        reps=3, tp_n=1_000_000, tp_n_large=10_000, tp_sizes=[100, 1024, 65536],
        tp_ks=[1, 2, 4, 8], fanin_n=1_000_000, scale_consumers=1000, scale_n=5_000,
        neighbour_n=100_000, check_consumers=20_000,
        lat_rates=[(1_000, 10.0), (10_000, 5.0), (100_000, 3.0)], lat_ks=[1, 8],
        route_n=500_000, metrics_reps=5, metrics_n=1_000_000,
        mem_n=1_000_000, mem_reps=3,
        pool_n=100_000, pool_keys=1_000, pool_single_n=10_000, spill_n=200_000,
        cg_n=20_000, cg_ks=[1, 4], cg_reps=1),
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
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


class Hub:
    """One `fanhub run` with a generated configuration."""

    def __init__(self, bench, consumers, cpu=None, extra="", shutdown_timeout=5,
                 valgrind=None, rcvhwm=None, ready_timeout=20.0, curve=None, bus_extra=""):
        self.bench = bench
        self.bus = f"tcp://127.0.0.1:{free_port()}"
        self.config = bench.path("hub.yaml")
        self.control = f"ipc://{self.config}.ctl"
        self.logfile = self.config + ".log"
        lines = [f"bus:\n  bind: {self.bus}"]
        if rcvhwm is not None:
            lines.append(f"  rcvhwm: {rcvhwm}")
        if bus_extra:
            lines.append(bus_extra.rstrip("\n"))
        if curve:
            lines.append(f"  curve:\n    secret_key_file: \"{curve.hub_secret_file}\"\n"
                         f"    allow: [\"{curve.pub_public}\"]")
        lines.append(f"control: {self.control}")
        lines.append(f"shutdown_timeout: {shutdown_timeout}")
        if extra:
            lines.append(extra.rstrip("\n"))
        lines.append("consumers:")
        lines.extend(consumers)
        with open(self.config, "w") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [bench.fanhub, "run", "-q", "-c", self.config]
        if valgrind:
            cmd = valgrind + cmd
        self.log = open(self.logfile, "w")
        self.proc = spawn(cmd, cpu=cpu, stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid
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
        rc = stop(self.proc, timeout=timeout)
        self.log.close()
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
          json_body=False):
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
                hub_cpu_s=cpu, hub_cpu_stat_s=s1 - s0,
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
           "ctx_per_delivery", "idle_after_s"]
LAT_KEYS = ["p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns", "mean_ns", "count",
            "ctx_per_msg"]


def tp_count(prof, size):
    """Messages per throughput run: fewer for large bodies (the backlog of
    a fast publisher may be held in memory whole)."""
    return prof["tp_n"] if size <= 1024 else prof["tp_n_large"]


def case_throughput(bench, prof, results):
    out = results.setdefault("throughput", [])
    for placement in bench.placements:
        for size in prof["tp_sizes"]:
            n = tp_count(prof, size)
            runs = [retry(raw_run, bench, n, size, placement)
                    for _ in range(prof["reps"])]
            r = rep_median(runs, TP_KEYS)
            r.update(kind="raw", k=0, size=size, placement=placement[0], n=n)
            for key in ("buckets",):
                r.pop(key, None)
            out.append(r)
            log(f"throughput raw {placement[0]} {size} B: {r['rate']:,.0f} msg/s, "
                f"{r['cpu_per_msg_ns']:.0f} ns CPU/msg; publisher {r['pub_send_rate']:,.0f}/s "
                f"({r['bound_by']}-bound)")
            for k in prof["tp_ks"]:
                runs = [retry(hub_throughput, bench, k, size, n, placement)
                        for _ in range(prof["reps"])]
                r = rep_median(runs, TP_KEYS)
                r.update(kind="hub", loss=max(x["loss"] for x in runs),
                         dropped=max(x["dropped"] for x in runs))
                out.append(r)
                log(f"throughput hub K={k} {placement[0]} {size} B: in {r['in_rate']:,.0f}/s, "
                    f"deliveries {r['deliveries_rate']:,.0f}/s, "
                    f"{r['cpu_per_delivery_ns']:.0f} ns CPU/delivery, loss {r['loss']}, "
                    f"dropped {r['dropped']}; publisher {r['pub_send_rate']:,.0f}/s "
                    f"({r['bound_by']}-bound)")


def case_latency(bench, prof, results):
    out = results.setdefault("latency", [])
    for placement in bench.placements:
        for rate, seconds in prof["lat_rates"]:
            n = int(rate * seconds)
            runs = [retry(raw_run, bench, n, 100, placement, rate=rate)
                    for _ in range(prof["reps"])]
            r = rep_median(runs, LAT_KEYS)
            r = {key: r[key] for key in LAT_KEYS + ["runs", "reps"]}
            r.update(kind="raw", k=0, rate=rate, n=n, placement=placement[0])
            out.append(r)
            log(f"latency raw {placement[0]} {rate}/s: p50 {r['p50_ns']/1e3:.1f} us, "
                f"p99 {r['p99_ns']/1e3:.1f} us, max {r['max_ns']/1e3:.0f} us")
            for k in prof["lat_ks"]:
                runs = [retry(hub_latency, bench, k, rate, n, placement)
                        for _ in range(prof["reps"])]
                r = rep_median(runs, LAT_KEYS)
                r.update(kind="hub", dropped=max(x["dropped"] for x in runs))
                out.append(r)
                log(f"latency hub K={k} {placement[0]} {rate}/s: p50 {r['p50_ns']/1e3:.1f} us, "
                    f"p99 {r['p99_ns']/1e3:.1f} us, max {r['max_ns']/1e3:.0f} us")


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


def case_routing(bench, prof, results):
    out = results.setdefault("routing", [])
    n = prof["route_n"]
    consumers, topics, count = routing_setup(bench, n + 1024)
    for placement in bench.placements:
        runs = [retry(hub_throughput, bench, count, 100, n, placement, consumers=consumers,
                      topics_file=topics, expect_deliveries=3 * n)
                for _ in range(prof["reps"])]
        r = rep_median(runs, TP_KEYS)
        r.update(kind="routing", consumers=count, matches_per_msg=3,
                 loss=max(x["loss"] for x in runs), dropped=max(x["dropped"] for x in runs))
        # The same messages to 3 consumers without topics: the same deliveries,
        # no pattern to try, 3 busy threads instead of 100 mostly idle ones.
        refs = [retry(hub_throughput, bench, 3, 100, n, placement, topics_file=topics)
                for _ in range(prof["reps"])]
        r["reference_k3"] = rep_median(refs, TP_KEYS)
        r["cost_vs_unrouted"] = (r["cpu_per_delivery_ns"]
                                 / r["reference_k3"]["cpu_per_delivery_ns"])
        out.append(r)
        log(f"routing {placement[0]}: in {r['in_rate']:,.0f}/s, {r['cpu_per_msg_ns']:.0f} ns "
            f"hub CPU/msg ({r['deliveries']} deliveries, loss {r['loss']}); 3 consumers "
            f"without topics: {r['reference_k3']['cpu_per_msg_ns']:.0f} ns/msg")


def case_fanin(bench, prof, results):
    """8 publishers at once: bench_pub with 8 connections (a thread and an
    XPUB socket each) into the raw SUB and into the hub, K=1."""
    out = results.setdefault("fanin", [])
    n = prof["fanin_n"]
    for placement in bench.placements:
        raws = [retry(raw_run, bench, n, 100, placement, connections=8)
                for _ in range(prof["reps"])]
        raw = rep_median(raws, TP_KEYS)
        raw.update(kind="raw", k=0, size=100, placement=placement[0], n=n, connections=8)
        raw.pop("buckets", None)
        hubs = [retry(hub_throughput, bench, 1, 100, n, placement, connections=8)
                for _ in range(prof["reps"])]
        hub = rep_median(hubs, TP_KEYS)
        hub.update(kind="hub", loss=max(x["loss"] for x in hubs),
                   dropped=max(x["dropped"] for x in hubs))
        out.extend([raw, hub])
        log(f"fanin {placement[0]}: raw {raw['rate']:,.0f}/s ({raw['bound_by']}-bound), "
            f"hub K=1 {hub['in_rate']:,.0f}/s ({hub['bound_by']}-bound), "
            f"{hub['cpu_per_delivery_ns']:.0f} ns CPU/delivery")


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


def case_scale(bench, prof, results):
    """1,000 consumers on few cores: the idle hub's memory and threads,
    every message to every consumer (deliveries/s, CPU and context
    switches per delivery, memory after), and routing with 3 of the 1,000
    matching each message against the same messages to 3 consumers
    without topics (same deliveries, no routing)."""
    out = results.setdefault("scale", [])
    count, n = prof["scale_consumers"], prof["scale_n"]
    route_n = prof["route_n"]
    broadcast, _, _ = scale_setup(bench, count, routed=False)
    routed, topics, subscriptions = scale_setup(bench, count, routed=True)
    for placement in bench.placements:
        row = dict(placement=placement[0], consumers=count)
        runs = [retry(hub_throughput, bench, count, 100, n, placement, consumers=broadcast)
                for _ in range(prof["reps"])]
        row["broadcast"] = rep_median(runs, TP_KEYS + ["rss_idle", "rss_after"])
        runs = [retry(hub_throughput, bench, count, 100, route_n, placement, consumers=routed,
                      topics_file=topics, expect_deliveries=3 * route_n,
                      wait_subscribers=subscriptions)
                for _ in range(prof["reps"])]
        row["routed"] = rep_median(runs, TP_KEYS + ["rss_idle", "rss_after"])
        refs = [retry(hub_throughput, bench, 3, 100, route_n, placement, topics_file=topics)
                for _ in range(prof["reps"])]
        row["reference_k3"] = rep_median(refs, TP_KEYS)
        row["cost_vs_unrouted"] = (row["routed"]["cpu_per_delivery_ns"]
                                   / row["reference_k3"]["cpu_per_delivery_ns"])
        out.append(row)
        b = row["broadcast"]
        log(f"scale {placement[0]}: {count} consumers idle {b['rss_idle']/2**20:.0f} MiB "
            f"({b['threads']} threads), after {n:,} msgs to all {b['rss_after']/2**20:.0f} MiB; "
            f"{b['deliveries_rate']:,.0f} deliveries/s, {b['cpu_per_delivery_ns']:.0f} ns/delivery; "
            f"routed 3 of {count}: {row['routed']['cpu_per_delivery_ns']:.0f} ns/delivery, "
            f"x{row['cost_vs_unrouted']:.2f} of 3 unrouted")


def _check_run(bench, count):
    """fanhub check of a configuration of `count` null consumers: exit
    status, its message, wall time, CPU and peak RSS (the child's rusage)."""
    path = bench.path(f"check-{count}.yaml")
    with open(path, "w") as f:
        f.write("bus: {bind: tcp://127.0.0.1:1}\nconsumers:\n")
        for i in range(count):
            f.write(f"  - {{name: c{i:05d}, plugin: \"null\"}}\n")
    wait_quiet()
    t0 = time.monotonic()
    p = subprocess.Popen([bench.fanhub, "check", "-c", path], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace").strip()
    p.stderr.close()
    return dict(consumers=count, rc=os.waitstatus_to_exitcode(status), message=err[-300:],
                wall_s=wall, max_rss=usage.ru_maxrss * 1024,
                cpu_s=usage.ru_utime + usage.ru_stime)


# The most consumers one hub runs (hub/config/config.c, S_CONSUMERS_MAX).
HUB_CONSUMERS_MAX = 1024


def case_check(bench, prof, results):
    """fanhub check of 20,000 null consumers, which a hub refuses (it runs at
    most 1,024, a thread each): the refusal must come fast and small, not
    after loading 20,000 plugin instances. And check of 1,024, the most a
    hub accepts: loaded, initialised and released."""
    big = _check_run(bench, prof["check_consumers"])
    if big["rc"] != 2 or "at most" not in big["message"]:
        raise BenchError(f"fanhub check of {big['consumers']} consumers: expected the refusal "
                         f"(exit 2, 'at most'), got {big['rc']}: {big['message']}")
    most = _check_run(bench, HUB_CONSUMERS_MAX)
    if most["rc"] != 0:
        raise BenchError(f"fanhub check of {HUB_CONSUMERS_MAX} consumers failed "
                         f"({most['rc']}): {most['message']}")
    results["check"] = dict(big, accepted=most)
    log(f"check {big['consumers']:,} consumers: refused (exit 2) in {big['wall_s']:.2f} s, "
        f"max RSS {big['max_rss']/2**20:.0f} MiB; {most['consumers']:,} consumers: checked in "
        f"{most['wall_s']:.2f} s, max RSS {most['max_rss']/2**20:.0f} MiB")


def spill_floor(bench, cpu, size=100, pass_size=5000):
    """The least a spilled message costs on one CPU (tests/bench/spill_floor:
    the spool's own work, nothing in the way), pinned like the hub. None,
    logged, when it fails: the ratios measured stand without it."""
    work = os.path.join(bench.tmp, "spill-floor")
    shutil.rmtree(work, ignore_errors=True)
    errfile = bench.path("spill_floor.err")
    with open(errfile, "w") as err:
        p = spawn([bench.spill_floor, "--dir", work, "--size", str(size), "--topic", TOPIC,
                   "--pass", str(pass_size)], cpu=cpu, stdout=subprocess.PIPE, stderr=err)
        try:
            out, _ = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            stop(p, signal.SIGKILL)
            out = b""
        if p in CHILDREN:
            CHILDREN.remove(p)
    shutil.rmtree(work, ignore_errors=True)
    try:
        if p.returncode != 0:
            raise ValueError(f"exit {p.returncode}")
        return json.loads(out.decode().split("\n")[0])
    except ValueError as e:
        log(f"spill_floor failed ({e}): {tail(errfile)}")
        return None


def paired_median(runs, name, f):
    """The median of f(alone run, named run) over the repetitions, each
    pair run back to back (see case_neighbour)."""
    return statistics.median(f(a, b) for a, b in zip(runs["alone"], runs[name]))


def neighbour_budget(row, runs):
    """What the target leaves the spill per message of the hub's CPU, from
    the log consumer alone: alone's CPU/msg x (1/target - 1). It binds when
    the hub is CPU-bound alone (busy near 1: pinned, one CPU for all its
    threads); with CPUs to spare the spill can run beside the log path.
    Differences are medians of each repetition's (see case_neighbour)."""
    alone = row["alone"]
    # The CPU is counted until the hub went idle, after the log's last write.
    busy = alone["hub_cpu_s"] / (alone["wall_s"] + (alone.get("idle_after_s") or 0))
    budget = alone["cpu_per_msg_ns"] * (1 / TARGETS["neighbour"] - 1)

    def added(name):
        return paired_median(runs, name, lambda a, b: b["cpu_per_msg_ns"] - a["cpu_per_msg_ns"])

    # A neighbour that only refuses costs the log path this much already:
    # what is left of the budget is the spill's own.
    refusal = added("beside_refusing")
    return dict(busy=busy, budget_ns=budget, added_ns=added("beside_spill"),
                refusal_ns=refusal, left_ns=budget - refusal)


def case_neighbour(bench, prof, results):
    """A spilling neighbour: the log consumer's rate beside a consumer that
    is held (sleep plugin, queue capacity 1000, overflow: spill) and spills
    with spool.fsync: always, against the log consumer alone, same run.
    Issue 12 asks for >= 0.9x: the spool's writes and fsyncs must not be on
    the bus thread. Beside them, the yardsticks: the same held neighbour
    with overflow: drop-newest (what a second consumer costs when it only
    refuses), and spill_floor (the spool's own work at its least)."""
    state_dir = os.path.join(bench.tmp, "neighbour-state")
    logfile = os.path.join(bench.tmp, "neighbour.log")
    log_entry = (f"  - {{name: log, plugin: \"log\", queue: {{capacity: {{CAP}}}}, "
                 f"options: {{path: \"{logfile}\"}}}}")

    # The spiller is held for good: its release file is never created (one
    # that an earlier placement created let the next one's spiller read its
    # spool back while the log consumer was measured). Each hub's stop
    # gives up on it after shutdown_timeout.
    release = os.path.join(bench.tmp, "neighbour-release-never-created")
    spill_entry = (f"  - {{name: spiller, plugin: \"{bench.sleep_so}\", "
                   f"queue: {{capacity: 1000, overflow: spill}}, "
                   f"options: {{release_file: \"{release}\"}}}}")
    refuse_entry = spill_entry.replace("overflow: spill", "overflow: drop-newest")
    extra = f"state_dir: {state_dir}\nspool: {{fsync: always}}"
    ok, why = fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\n" + extra + "\nconsumers:\n"
                           + log_entry.replace("{CAP}", "1000") + "\n" + spill_entry + "\n")
    if not ok:
        results["neighbour"] = {"status": f"not measured: {why}"}
        log(results["neighbour"]["status"])
        return
    n = prof["neighbour_n"]
    rows = []
    for placement in bench.placements:
        row = dict(placement=placement[0], n=n)
        configs = (("alone", [log_entry]), ("beside_spill", [log_entry, spill_entry]),
                   ("beside_refusing", [log_entry, refuse_entry]))
        runs = {name: [] for name, _ in configs}
        # Each repetition runs the three back to back, and the ratios are
        # the medians of each repetition's: this machine changes speed
        # between runs, and a row's median could come from another phase
        # than the other row's.
        for _ in range(prof["reps"]):
            for name, consumers in configs:
                shutil.rmtree(state_dir, ignore_errors=True)
                if os.path.exists(logfile):
                    os.unlink(logfile)
                cons = [c.replace("{CAP}", str(n + 1024)) for c in consumers]
                # done: the log consumer has every message, at its file's
                # last write (the spiller may still be writing); its
                # deliveries over the wall time.
                runs[name].append(hub_throughput(bench, 1, 100, n, placement, consumers=cons,
                                                 extra=extra, expect_deliveries=n,
                                                 done_file=logfile))
        for name, _ in configs:
            row[name] = rep_median(runs[name], TP_KEYS)

        def ratio(name):
            return paired_median(runs, name,
                                 lambda a, b: b["deliveries_rate"] / a["deliveries_rate"])

        row["ratio"], row["refusing_ratio"] = ratio("beside_spill"), ratio("beside_refusing")
        # The yardstick: the spool's own work on the hub's CPU, in this run.
        row["floor"] = spill_floor(bench, placement[2])
        row.update(neighbour_budget(row, runs))
        rows.append(row)
        log(f"neighbour {placement[0]}: log alone {row['alone']['deliveries_rate']:,.0f}/s, "
            f"beside a spilling neighbour (fsync always) "
            f"{row['beside_spill']['deliveries_rate']:,.0f}/s: x{row['ratio']:.2f} (the hub went "
            f"idle {row['alone'].get('idle_after_s', 0) * 1e3:.0f} ms and "
            f"{row['beside_spill'].get('idle_after_s', 0) * 1e3:.0f} ms after the log consumer's "
            f"last write); beside a held neighbour that only refuses (drop-newest) "
            f"{row['beside_refusing']['deliveries_rate']:,.0f}/s: x{row['refusing_ratio']:.2f} "
            f"(ratios: medians of each repetition's)")
        floor = row["floor"]
        log(f"neighbour {placement[0]}: the hub alone was {row['busy']:.2f} CPUs busy at "
            f"{row['alone']['cpu_per_msg_ns']:,.0f} ns of CPU a message, so "
            f"{TARGETS['neighbour']}x leaves the spill {row['budget_ns']:,.0f} ns a message "
            f"(binding when the hub has one CPU), {row['left_ns']:,.0f} ns once a neighbour that "
            f"only refuses took its {row['refusal_ns']:,.0f} ns; the spill added "
            f"{row['added_ns']:,.0f} ns; the spool's own work, nothing in the way: "
            + (f"{floor['spill_ns']:,.0f} ns (append {floor['append_ns']:,.0f}; the kernel's "
               f"write and fdatasync alone {floor['io_ns']:,.0f}), and releasing the message "
               f"{floor['release_ns']:,.0f} ns" if floor else "not measured"))
    results["neighbour"] = {"status": "measured", "rows": rows}


CURVE_SIZES = [100, 1024]


def zcert_public_key(path):
    """The public key (Z85) of a zcert file, as `fanhub keygen` writes it."""
    with open(path) as f:
        m = re.search(r'^\s*public-key\s*=\s*"(.{40})"', f.read(), re.M)
    if not m:
        raise BenchError(f"{path}: no public-key in this zcert file")
    return m.group(1)


class CurveKeys:
    """The key pairs of a CURVE bus, made by `fanhub keygen` as an operator
    makes them: the hub's (the server; the hub reads hub_secret) and
    bench_pub's (a client; bench_pub reads pub_secret, the hub allows its
    public key)."""

    def __init__(self, bench):
        keydir = os.path.join(bench.tmp, "curve-keys")
        os.makedirs(keydir, mode=0o700, exist_ok=True)
        for name in ("hub", "pub"):
            p = subprocess.run([bench.fanhub, "keygen", os.path.join(keydir, name)],
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                raise BenchError(f"fanhub keygen {name} failed ({p.returncode}): "
                                 + (p.stderr or p.stdout).strip())
        self.hub_secret_file = os.path.join(keydir, "hub_secret")
        self.hub_public = zcert_public_key(os.path.join(keydir, "hub"))
        self.pub_secret_file = os.path.join(keydir, "pub_secret")
        self.pub_public = zcert_public_key(os.path.join(keydir, "pub"))


def case_curve(bench, prof, results):
    """What CURVE on the bus costs: hub K=1 (one null consumer) fed by
    bench_pub at 100 B and 1 KiB, plaintext against CURVE (bus.curve with
    the hub as server, bench_pub a client in its allow list) in the same
    run. The two alternate rep by rep, so that a change in the machine's
    load falls on both. Reports the hub's input rate and CPU per message,
    the publisher's own rate and the bound-by column, and CURVE/plaintext
    for both figures. The encryption of bench_pub's side runs in its
    libzmq I/O thread, after the send loop that send_rate times: a CURVE
    case can be bound by that thread while the column says receiver; the
    table's "hub busy" (hub CPU over wall time) tells the two apart."""
    try:
        keys = CurveKeys(bench)
    except BenchError as e:
        results["curve"] = {"status": f"not measured: {e}"}
        log(results["curve"]["status"])
        return
    rows = []
    for placement in bench.placements:
        for size in CURVE_SIZES:
            n = tp_count(prof, size)
            runs = {"plaintext": [], "curve": []}
            for _ in range(prof["reps"]):
                runs["plaintext"].append(retry(hub_throughput, bench, 1, size, n, placement))
                runs["curve"].append(retry(hub_throughput, bench, 1, size, n, placement,
                                           curve=keys))
            row = dict(placement=placement[0], size=size, n=n)
            for bus, rs in runs.items():
                r = rep_median(rs, TP_KEYS)
                r.update(loss=max(x["loss"] for x in rs), dropped=max(x["dropped"] for x in rs))
                row[bus] = r
            row["in_ratio"] = row["curve"]["in_rate"] / row["plaintext"]["in_rate"]
            row["cpu_ratio"] = (row["curve"]["cpu_per_msg_ns"]
                                / row["plaintext"]["cpu_per_msg_ns"])
            rows.append(row)
            pt, cv = row["plaintext"], row["curve"]
            log(f"curve {placement[0]} {size} B: plaintext in {pt['in_rate']:,.0f}/s "
                f"({pt['cpu_per_msg_ns']:.0f} ns hub CPU/msg, publisher "
                f"{pt['pub_send_rate']:,.0f}/s, {pt['bound_by']}-bound), CURVE in "
                f"{cv['in_rate']:,.0f}/s ({cv['cpu_per_msg_ns']:.0f} ns, publisher "
                f"{cv['pub_send_rate']:,.0f}/s, {cv['bound_by']}-bound): "
                f"x{row['in_ratio']:.2f} rate, x{row['cpu_ratio']:.2f} CPU/msg")
    results["curve"] = {"status": "measured", "rows": rows}


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


def collectd_config(bench):
    """The metrics: block for a collectd push to a dummy unixsock server,
    or None when fanhub check refuses metrics.collectd.socket."""
    sock = os.path.join(bench.tmp, "collectd.sock")
    for interval in ("0.1", "1"):
        extra = f"metrics:\n  collectd:\n    socket: {sock}\n    interval: {interval}\n"
        ok, _ = fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\n" + extra
                             + "consumers: [{name: a, plugin: \"null\"}]\n")
        if ok:
            return sock, extra, interval
    return None


class DummyCollectd:
    """Answers every line on a Unix stream socket as collectd's unixsock
    plugin answers a PUTVAL."""

    def __init__(self, path):
        self.path = path
        self.lines = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(path)
        self.srv.listen(4)
        self.srv.settimeout(0.2)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            conn.settimeout(0.2)
            buf = b""
            while not self.stopped.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not data:
                    break
                buf += data
                while b"\n" in buf:
                    _, buf = buf.split(b"\n", 1)
                    self.lines += 1
                    try:
                        conn.sendall(b"0 Success: 1 value has been dispatched.\n")
                    except OSError:
                        break
            conn.close()

    def close(self):
        self.stopped.set()
        self.srv.close()
        self.thread.join(2)
        try:
            os.unlink(self.path)
        except OSError:
            pass


def case_metrics(bench, prof, results):
    out = results.setdefault("metrics", [])
    n, k = prof["metrics_n"], 4
    push = collectd_config(bench)
    results["collectd_push"] = (f"measured (metrics.collectd.interval {push[2]} s)" if push
                                else "not measured: requires metrics.collectd.socket")
    for placement in bench.placements:
        off, on, coll = [], [], []
        for _ in range(prof["metrics_reps"]):
            off.append(retry(hub_throughput, bench, k, 100, n, placement))
            on.append(retry(hub_throughput, bench, k, 100, n, placement, scrape_hz=10))
            if push:
                server = DummyCollectd(push[0])
                try:
                    r = retry(hub_throughput, bench, k, 100, n, placement, extra=push[1])
                    r["collectd_lines"] = server.lines
                    coll.append(r)
                finally:
                    server.close()
        row = dict(placement=placement[0], k=k, n=n, reps=len(off))
        for name, runs in (("off", off), ("scrape10hz", on), ("collectd", coll)):
            if runs:
                row[name] = rep_median(runs, TP_KEYS)
        row["cost"] = 1 - row["scrape10hz"]["deliveries_rate"] / row["off"]["deliveries_rate"]
        row["cpu_cost"] = (row["scrape10hz"]["cpu_per_delivery_ns"]
                           / row["off"]["cpu_per_delivery_ns"] - 1)
        if coll:
            row["collectd_cost"] = 1 - (row["collectd"]["deliveries_rate"]
                                        / row["off"]["deliveries_rate"])
        out.append(row)
        log(f"metrics {placement[0]}: off {row['off']['deliveries_rate']:,.0f}/s, 10 Hz "
            f"{row['scrape10hz']['deliveries_rate']:,.0f}/s: cost {row['cost']*100:+.1f} % "
            f"(CPU/delivery {row['cpu_cost']*100:+.1f} %)")


def memory_run(bench, k, n, placement, size=1024):
    label, pub_cpu, hub_cpu = placement
    release = bench.path("release-never")
    consumers = [f"  - {{name: m{i}, plugin: \"{bench.sleep_so}\", queue: {{capacity: {n + 16}}},"
                 f" options: {{release_file: \"{release}\"}}}}" for i in range(k)]
    hub = Hub(bench, consumers, cpu=hub_cpu, shutdown_timeout=0)
    try:
        wait_quiet()
        rss0 = proc_status(hub.pid, "VmRSS")
        publish(bench, hub.bus, n, cpu=pub_cpu, size=size, stamp=False)
        _, _, st = hub.wait_done(
            lambda s: s["hub"]["received"] >= n
            and all(c["enqueued"] + c["dropped"] >= n for c in s["consumers"]), 120)
        rss = proc_status(hub.pid, "VmRSS")
        hwm = proc_status(hub.pid, "VmHWM")
    finally:
        open(release, "w").close()
        hub.stop(timeout=10)
    payload = n * (len(TOPIC) + size)
    return dict(placement=label, k=k, n=n, size=size, rss=rss, rss_idle=rss0, vm_hwm=hwm,
                payload=payload, ratio=rss / payload,
                limit=TARGETS["mem_factor"] * payload + TARGETS["mem_slack"],
                queued=min(c["enqueued"] for c in st["consumers"]),
                dropped=sum(c["dropped"] for c in st["consumers"]))


def case_memory(bench, prof, results):
    out = results.setdefault("memory", [])
    keys = ["rss", "rss_idle", "vm_hwm", "ratio", "queued", "dropped"]
    for placement in bench.placements:
        for k in (4, 1):
            runs = [retry(memory_run, bench, k, prof["mem_n"], placement)
                    for _ in range(prof["mem_reps"])]
            r = rep_median(runs, keys)
            out.append(r)
            log(f"memory K={k} {placement[0]}: RSS {r['rss']/2**20:.0f} MiB for "
                f"{r['payload']/2**20:.0f} MiB payload (x{r['ratio']:.2f}), "
                f"limit {r['limit']/2**20:.0f} MiB")


def pool_jsonl(bench, keys):
    path = os.path.join(bench.tmp, f"pool-{keys}.jsonl")
    with open(path, "w") as f:
        for i in range(keys):
            f.write(json.dumps({"topic": TOPIC, "body": {"vm": f"vm-{i:04d}", "pad": "x" * 60}})
                    + "\n")
    return path


def case_pool(bench, prof, results):
    """Ordered worker pool: workers 8 vs 1 on the sleep plugin (ms: 1),
    order_by json /vm. Measured only once fanhub check takes the config."""
    entry = (f"  - {{name: pool, plugin: \"{bench.sleep_so}\", workers: {{W}}, "
             f"order_by: {{json: /vm}}, queue: {{capacity: {{CAP}}}}, options: {{ms: 1}}}}")
    ok, why = fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\nconsumers:\n"
                           + entry.replace("{W}", "8").replace("{CAP}", "1000") + "\n")
    if not ok:
        results["pool"] = {"status": f"not measured: requires workers: / order_by: ({why})"}
        log(results["pool"]["status"])
        return
    jsonl = pool_jsonl(bench, prof["pool_keys"])
    rows = []
    for placement in bench.placements:
        row = dict(placement=placement[0], keys=prof["pool_keys"])
        for workers, n in ((8, prof["pool_n"]), (1, prof["pool_single_n"])):
            runs = []
            for _ in range(prof["reps"]):
                try:
                    cons = [entry.replace("{W}", str(workers)).replace("{CAP}", str(n + 16))]
                    r = hub_throughput(bench, 1, 100, n, placement, consumers=cons,
                                       jsonl=jsonl, expect_deliveries=n)
                    runs.append(r)
                except BenchError as e:
                    results["pool"] = {"status": f"not measured: fanhub run failed: {e}"}
                    log(results["pool"]["status"])
                    return
            row[f"w{workers}"] = rep_median(runs, TP_KEYS)
            row[f"w{workers}"]["n"] = n
        row["speedup"] = row["w8"]["deliveries_rate"] / row["w1"]["deliveries_rate"]
        rows.append(row)
        log(f"pool {placement[0]}: workers 8 {row['w8']['deliveries_rate']:,.0f}/s vs 1 "
            f"{row['w1']['deliveries_rate']:,.0f}/s: x{row['speedup']:.2f}")
    results["pool"] = {"status": "measured", "rows": rows}


def case_spill(bench, prof, results):
    """Spill: a held consumer (capacity 1000, overflow: spill) takes N 1 KiB
    messages at full speed (in/s while spilling), then is released (drain
    msg/s); zero loss. Measured once fanhub check takes the config."""
    state_dir = os.path.join(bench.tmp, "state")
    os.makedirs(state_dir, exist_ok=True)
    release = os.path.join(bench.tmp, "spill-release")
    entry = (f"  - {{name: spill, plugin: \"{bench.sleep_so}\", "
             f"queue: {{capacity: 1000, overflow: spill}}, "
             f"options: {{release_file: \"{release}\"}}}}")
    variants = [f"state_dir: {state_dir}\n", ""]
    extra = None
    why = ""
    for v in variants:
        ok, why0 = fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\n" + v
                                + "consumers:\n" + entry + "\n")
        if ok:
            extra = v
            break
        why = why or why0
    if extra is None:
        results["spill"] = {"status": f"not measured: requires queue.overflow: spill ({why})"}
        log(results["spill"]["status"])
        return
    n = prof["spill_n"]
    rows = []
    for placement in bench.placements:
        runs = []
        for _ in range(prof["reps"]):
            if os.path.exists(release):
                os.unlink(release)
            shutil.rmtree(state_dir, ignore_errors=True)
            os.makedirs(state_dir)
            label, pub_cpu, hub_cpu = placement
            try:
                hub = Hub(bench, [entry], cpu=hub_cpu, extra=extra.rstrip("\n"))
            except BenchError as e:
                results["spill"] = {"status": f"not measured: fanhub run failed: {e}"}
                log(results["spill"]["status"])
                return
            try:
                c0 = hub.cpu()
                t0, _, _ = publish(bench, hub.bus, n, cpu=pub_cpu, size=1024, stamp=False)
                t_in, c_in, st = hub.wait_done(lambda s: s["hub"]["received"] >= n, 120)
                spilled = st["consumers"][0].get("spilled", 0)
                t_rel = time.monotonic()
                open(release, "w").close()
                t_out, c_out, st2 = hub.wait_done(
                    lambda s: s["consumers"][0]["completed"] + s["consumers"][0]["dropped"]
                    >= n, 120 + n / 5_000)
            finally:
                hub.stop()
            c = st2["consumers"][0]
            runs.append(dict(in_rate=n / (t_in - t0),
                             drain_rate=c["completed"] / max(1e-3, t_out - t_rel),
                             spilled=spilled, completed=c["completed"], dropped=c["dropped"],
                             loss=n - c["completed"], cpu_per_msg_ns=(c_out - c0) / n * 1e9))
        r = rep_median(runs, ["in_rate", "drain_rate", "spilled", "completed", "dropped",
                              "loss", "cpu_per_msg_ns"])
        r.update(placement=placement[0], n=n, loss=max(x["loss"] for x in runs),
                 dropped=max(x["dropped"] for x in runs))
        rows.append(r)
        log(f"spill {placement[0]}: in {r['in_rate']:,.0f}/s while spilling "
            f"({r['spilled']} spilled), drain {r['drain_rate']:,.0f}/s, loss {r['loss']}")
    status = "measured"
    if any(r["loss"] or r["dropped"] for r in rows):
        status = ("measured, but **messages were lost**: `fanhub check` takes "
                  "`overflow: spill`, yet the full queue dropped instead of spilling")
    results["spill"] = {"status": status, "rows": rows}


def callgrind_run(bench, k, n, outdir, consumers=None, topics_file=None, deliveries=None,
                  name=None, subscriptions=1):
    """The hub under callgrind: counters zeroed once it answers, dumped once
    the n messages are delivered. Returns Ir per delivery. By default K
    null consumers, each getting every message."""
    name = name or f"k{k}"
    deliveries = deliveries or n * k
    cgout = bench.path(f"callgrind.out.{name}")
    base = os.path.basename(cgout)
    vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cgout}",
          "--dump-instr=no", "--separate-threads=no", "--max-threads=4000"]
    # 1,000 consumers start 1,000 threads under valgrind: on a busy 2-CPU
    # machine that took more than 120 s.
    hub = Hub(bench, consumers or null_consumers(k, n + 1024), valgrind=vg,
              ready_timeout=600)
    try:
        subprocess.run(["callgrind_control", "-z", str(hub.pid)], capture_output=True,
                       timeout=60, check=True)
        blast(bench, hub.bus, n, size=100, topics_file=topics_file, deadline_s=600,
              subscriptions=subscriptions)

        def done(s):
            return (s["hub"]["received"] >= n
                    and sum(c["completed"] for c in s["consumers"]) >= deliveries)

        # STATS would count too (with 1,000 consumers it costs more than the
        # deliveries): wait for a quiet CPU clock, dump, then check.
        for _ in range(20):
            hub.wait_idle(600)
            subprocess.run(["callgrind_control", "-d", str(hub.pid)], capture_output=True,
                           timeout=120, check=True)
            if done(hub.stats(timeout_ms=60_000)):
                break
        else:
            raise BenchError("callgrind: the hub went quiet before delivering everything")
    finally:
        hub.stop(timeout=60)
    # Dumps asked for are base.1, base.2, ... (counters restart at each):
    # the sum of them is the run; the one without a suffix is at exit.
    asked = sorted((f for f in os.listdir(bench.tmp)
                    if f.startswith(base + ".") and f[len(base) + 1:].isdigit()),
                   key=lambda f: int(f[len(base) + 1:]))
    if not asked:
        raise BenchError("callgrind: no dump")
    path = os.path.join(bench.tmp, asked[0])
    total = 0
    for dump in asked:
        with open(os.path.join(bench.tmp, dump)) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total += int(line.split()[1])
                    break
    with open(os.path.join(outdir, f"callgrind-{name}.txt"), "w") as f:
        f.write(callgrind_report(path, total, deliveries))
    shutil.copy(path, os.path.join(outdir, f"callgrind.out.{name}"))
    return dict(k=k, n=n, ir=total, deliveries=deliveries, ir_per_delivery=total / deliveries,
                ir_per_msg=total / n, name=name)


def callgrind_self_costs(path):
    """Self cost (Ir) per (object, function) of a callgrind out file: every
    cost line but those right after a calls= line (those are inclusive
    costs of the call)."""
    names = {"ob": {}, "fn": {}}
    ob = fn = "?"
    costs = {}
    after_call = False
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def resolve(kind, value):
        m = name_re.match(value)
        if not m:
            return value
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), value)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                if len(parts) >= 2 and not after_call:
                    costs[(ob, fn)] = costs.get((ob, fn), 0) + int(parts[1])
                after_call = False
                continue
            key, _, value = line.partition("=")
            if key == "ob":
                ob = resolve("ob", value)
            elif key == "fn":
                fn = resolve("fn", value)
            elif key == "cob":
                resolve("ob", value)
            elif key == "cfn":
                resolve("fn", value)
            elif key == "calls":
                after_call = True
    return costs


def callgrind_report(path, total, deliveries):
    costs = callgrind_self_costs(path)
    by_ob = {}
    for (ob, fn), c in costs.items():
        by_ob[os.path.basename(ob)] = by_ob.get(os.path.basename(ob), 0) + c
    lines = [f"callgrind: {path}", f"total Ir {total:,}, deliveries {deliveries:,}, "
             f"Ir/delivery {total / deliveries:,.0f}", "", "Self cost by object:"]
    for ob, c in sorted(by_ob.items(), key=lambda x: -x[1]):
        if c * 1000 >= total:
            lines.append(f"  {c * 100 / total:5.1f} %  {c / deliveries:8.0f} Ir/delivery  {ob}")
    lines += ["", "Top functions by self cost:"]
    for (ob, fn), c in sorted(costs.items(), key=lambda x: -x[1])[:40]:
        lines.append(f"  {c * 100 / total:5.1f} %  {c / deliveries:8.0f} Ir/delivery  {fn}  "
                     f"[{os.path.basename(ob)}]")
    return "\n".join(lines) + "\n"


def case_callgrind(bench, prof, results, outdir):
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        results["callgrind"] = {"status": "not measured: valgrind is not installed"}
        return
    rows = []
    n = prof["cg_n"]
    routed, topics, count = routing_setup(bench, n + 1024)
    scale, scale_topics, scale_subs = scale_setup(bench, prof["scale_consumers"], routed=True)
    # (label, k, extra arguments): K null consumers; the routing case and
    # its unrouted reference; 3 of 1,000 matching.
    variants = [(f"k{k}", k, {}) for k in prof["cg_ks"]] + [
        ("routing", count, dict(consumers=routed, topics_file=topics, deliveries=3 * n)),
        ("unrouted3", 3, dict(topics_file=topics)),
        ("scale", prof["scale_consumers"], dict(consumers=scale, topics_file=scale_topics,
                                                deliveries=3 * n, subscriptions=scale_subs)),
    ]
    for name, k, extra in variants:
        runs = [retry(callgrind_run, bench, k, n, outdir, name=name, **extra)
                for _ in range(prof["cg_reps"])]
        r = rep_median(runs, ["ir", "ir_per_delivery", "ir_per_msg"])
        rows.append(r)
        log(f"callgrind {name}: {r['ir_per_delivery']:,.0f} Ir per delivery "
            f"({r['ir_per_msg']:,.0f} per message; runs "
            + ", ".join(f"{x['ir_per_delivery']:,.0f}" for x in runs) + ")")
    results["callgrind"] = {"status": "measured", "rows": rows}


def case_profile(bench, prof, results, outdir):
    """Not in the default run: wall-clock profile (perf, cpu-clock sampling:
    kernel time included) of the hub in the K=1 and K=4 throughput cases,
    pinned. The instruction-level profile is the callgrind case."""
    if not shutil.which("perf"):
        results["profile"] = {"status": "not measured: perf is not installed"}
        return
    placement = bench.placements[0]
    rows = []
    for k in (1, 4):
        data = os.path.join(bench.tmp, f"perf.k{k}")
        r = hub_throughput(bench, k, 100, prof["tp_n"], placement, perf_data=data)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                 "--sort", "dso,sym", "-g", "none", "--percent-limit", "0.3"],
                                capture_output=True, text=True, timeout=300).stdout
        by_dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                 "--sort", "dso", "-g", "none"],
                                capture_output=True, text=True, timeout=300).stdout
        with open(os.path.join(outdir, f"perf-k{k}.txt"), "w") as f:
            f.write(f"# hub K={k}, {placement[0]}, {prof['tp_n']:,} x 100 B: "
                    f"{r['deliveries_rate']:,.0f} deliveries/s, "
                    f"{r['cpu_per_delivery_ns']:.0f} ns CPU/delivery\n")
            f.write(by_dso + "\n" + report)
        rows.append(dict(k=k, deliveries_rate=r["deliveries_rate"],
                         cpu_per_delivery_ns=r["cpu_per_delivery_ns"]))
        log(f"profile K={k}: {outdir}/perf-k{k}.txt")
    results["profile"] = {"status": "measured", "rows": rows}


# ---------------------------------------------------------------------------
# Cases to run

CASES = ["throughput", "fanin", "latency", "routing", "scale", "check", "metrics", "memory",
         "spill", "neighbour", "curve", "signatures", "pool", "amqp", "cluster", "worker",
         "callgrind"]
EXTRA_CASES = ["profile"]  # only when asked for with --cases


def main():
    global VERBOSE
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", required=True, help="the build tree (bin/fanhub, ...)")
    ap.add_argument("--out", default="bench-results", help="where results go")
    ap.add_argument("--quick", action="store_true", help="the short run (< 2 minutes)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset")
    ap.add_argument("--placement", choices=["both", "pinned", "unpinned"], default="both")
    ap.add_argument("--reps", type=int, help="repetitions (default 3; 1 with --quick)")
    ap.add_argument("--quiet-wait", type=float,
                    help="seconds to wait before each run for the machine to go idle "
                         "(default 10; 2 with --quick)")
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the scratch directory (configurations, logs)")
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
                globals()[f"case_{case}"](bench, prof, results, outdir)
            else:
                globals()[f"case_{case}"](bench, prof, results)
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
