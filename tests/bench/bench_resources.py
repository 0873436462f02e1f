"""bench_resources.py - the benchmark's resource cases (bench.py --cases
metrics, memory, pool): what scraping STATS and pushing to collectd cost
in throughput, RSS per queued message, and an ordered worker pool's
speed-up over one worker.
"""
import json
import os
import socket
import threading

b = None  # the bench module (bench.py), set by its case_function


def collectd_config(bench):
    """The metrics: block for a collectd push to a dummy unixsock server,
    or None when fanhub check refuses metrics.collectd.socket."""
    sock = os.path.join(bench.tmp, "collectd.sock")
    for interval in ("0.1", "1"):
        extra = f"metrics:\n  collectd:\n    socket: {sock}\n    interval: {interval}\n"
        ok, _ = b.fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\n" + extra
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
            off.append(b.retry(b.hub_throughput, bench, k, 100, n, placement))
            on.append(b.retry(b.hub_throughput, bench, k, 100, n, placement, scrape_hz=10))
            if push:
                server = DummyCollectd(push[0])
                try:
                    r = b.retry(b.hub_throughput, bench, k, 100, n, placement, extra=push[1])
                    r["collectd_lines"] = server.lines
                    coll.append(r)
                finally:
                    server.close()
        row = dict(placement=placement[0], k=k, n=n, reps=len(off))
        for name, runs in (("off", off), ("scrape10hz", on), ("collectd", coll)):
            if runs:
                row[name] = b.rep_median(runs, b.TP_KEYS)
        # Each repetition's pair (off, then on, back to back), and their
        # median: the machine's slow and fast phases last longer than a
        # pair, so a ratio of two medians can compare one phase with the
        # other. The control thread's CPU is what serving the scrapes took.
        row["cost_pairs"] = [1 - a["deliveries_rate"] / o["deliveries_rate"]
                             for o, a in zip(off, on)]
        row["cost"] = b.median(row["cost_pairs"])
        row["cpu_cost"] = b.median([a["cpu_per_delivery_ns"] / o["cpu_per_delivery_ns"] - 1
                                    for o, a in zip(off, on)])
        row["control_share"] = b.median([a["control_cpu_s"] / a["hub_cpu_s"] for a in on])
        row["control_share_off"] = b.median([o["control_cpu_s"] / o["hub_cpu_s"] for o in off])
        if coll:
            row["collectd_cost"] = 1 - (row["collectd"]["deliveries_rate"]
                                        / row["off"]["deliveries_rate"])
        out.append(row)
        b.log(f"metrics {placement[0]}: off {row['off']['deliveries_rate']:,.0f}/s, 10 Hz "
            f"{row['scrape10hz']['deliveries_rate']:,.0f}/s: cost {row['cost']*100:+.1f} % "
            f"(CPU/delivery {row['cpu_cost']*100:+.1f} %; pairs "
            f"{', '.join(f'{c*100:+.1f}' for c in row['cost_pairs'])} %; control thread "
            f"{row['control_share']*100:.2f} % of the hub's CPU, "
            f"{row['control_share_off']*100:.2f} % without the scrapes)")


def memory_run(bench, k, n, placement, size=1024):
    label, pub_cpu, hub_cpu = placement
    release = bench.path("release-never")
    consumers = [f"  - {{name: m{i}, plugin: \"{bench.sleep_so}\", queue: {{capacity: {n + 16}}},"
                 f" options: {{release_file: \"{release}\"}}}}" for i in range(k)]
    hub = b.Hub(bench, consumers, cpu=hub_cpu, shutdown_timeout=0)
    try:
        b.wait_quiet()
        rss0 = b.proc_status(hub.pid, "VmRSS")
        b.publish(bench, hub.bus, n, cpu=pub_cpu, size=size, stamp=False)
        _, _, st = hub.wait_done(
            lambda s: s["hub"]["received"] >= n
            and all(c["enqueued"] + c["dropped"] >= n for c in s["consumers"]), 120)
        rss = b.proc_status(hub.pid, "VmRSS")
        hwm = b.proc_status(hub.pid, "VmHWM")
    finally:
        open(release, "w").close()
        hub.stop(timeout=10)
    payload = n * (len(b.TOPIC) + size)
    return dict(placement=label, k=k, n=n, size=size, rss=rss, rss_idle=rss0, vm_hwm=hwm,
                payload=payload, ratio=rss / payload,
                limit=b.TARGETS["mem_factor"] * payload + b.TARGETS["mem_slack"],
                queued=min(c["enqueued"] for c in st["consumers"]),
                dropped=sum(c["dropped"] for c in st["consumers"]))


def case_memory(bench, prof, results):
    out = results.setdefault("memory", [])
    keys = ["rss", "rss_idle", "vm_hwm", "ratio", "queued", "dropped"]
    for placement in bench.placements:
        for k in (4, 1):
            runs = [b.retry(memory_run, bench, k, prof["mem_n"], placement)
                    for _ in range(prof["mem_reps"])]
            r = b.rep_median(runs, keys)
            out.append(r)
            b.log(f"memory K={k} {placement[0]}: RSS {r['rss']/2**20:.0f} MiB for "
                f"{r['payload']/2**20:.0f} MiB payload (x{r['ratio']:.2f}), "
                f"limit {r['limit']/2**20:.0f} MiB")


def pool_jsonl(bench, keys):
    path = os.path.join(bench.tmp, f"pool-{keys}.jsonl")
    with open(path, "w") as f:
        for i in range(keys):
            f.write(json.dumps({"topic": b.TOPIC, "body": {"vm": f"vm-{i:04d}", "pad": "x" * 60}})
                    + "\n")
    return path


def case_pool(bench, prof, results):
    """Ordered worker pool: workers 8 vs 1 on the sleep plugin (ms: 1),
    order_by json /vm. Measured only once fanhub check takes the config."""
    entry = (f"  - {{name: pool, plugin: \"{bench.sleep_so}\", workers: {{W}}, "
             f"order_by: {{json: /vm}}, queue: {{capacity: {{CAP}}}}, options: {{ms: 1}}}}")
    ok, why = b.fanhub_check(bench, "bus: {bind: tcp://127.0.0.1:1}\nconsumers:\n"
                           + entry.replace("{W}", "8").replace("{CAP}", "1000") + "\n")
    if not ok:
        results["pool"] = {"status": f"not measured: requires workers: / order_by: ({why})"}
        b.log(results["pool"]["status"])
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
                    r = b.hub_throughput(bench, 1, 100, n, placement, consumers=cons,
                                       jsonl=jsonl, expect_deliveries=n)
                    runs.append(r)
                except b.BenchError as e:
                    results["pool"] = {"status": f"not measured: fanhub run failed: {e}"}
                    b.log(results["pool"]["status"])
                    return
            row[f"w{workers}"] = b.rep_median(runs, b.TP_KEYS)
            row[f"w{workers}"]["n"] = n
        row["speedup"] = row["w8"]["deliveries_rate"] / row["w1"]["deliveries_rate"]
        rows.append(row)
        b.log(f"pool {placement[0]}: workers 8 {row['w8']['deliveries_rate']:,.0f}/s vs 1 "
            f"{row['w1']['deliveries_rate']:,.0f}/s: x{row['speedup']:.2f}")
    results["pool"] = {"status": "measured", "rows": rows}
