"""bench_amqp.py - the benchmark's amqp case (bench.py --cases amqp): the
bridge rate with publisher confirms against a minimal librabbitmq
publisher with the same confirm window, against the same broker, in the
same run.

A private RabbitMQ node (tests/integration/rabbitmq_node.py) gets a durable
queue bound to amq.topic for every routing key, purged before each run.

  bridge    bench_pub (the C publisher of every throughput case) sends N
            messages of 100 B into `fanhub run` whose one consumer is the
            amqp plugin (max_pending 1000: its confirm window); the rate is
            N over the time from bench_pub's first send to the moment the
            consumer's `completed` reaches N (STATS, polled every 20 ms):
            every message confirmed by the broker.
  baseline  tests/bench/amqp_pub: N messages, the same body, routing key,
            persistence and header, one channel in confirm mode with a
            window of 1000; N over first publish to last confirm.

The two alternate, rep by rep, so that the machine's load falls on both;
the medians are reported, and bridge/baseline against the target 0.8.

  recovery  once a run: a bridge publishing to amq.direct, where nothing
            is bound yet, gets 200 messages, which the broker returns (312
            NO_ROUTE) and the plugin holds; then pika binds a queue for
            their routing key. The time from the binding to all 200
            confirmed: the route's probe and the release of its backlog
            (issue 39 item 9: it was a minute).
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

TARGET = 0.8
WINDOW = 1000
SIZE = 100
QUEUE = "bench"
TOPIC = "org.fanhub.bench.message"


def _queue(node, purge_only=False):
    """Declares (or purges) the bench queue with rabbitmqctl-free AMQP:
    amqp_pub cannot declare, so pika does."""
    import pika
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", node.port, "/", pika.PlainCredentials("guest", "guest")))
    ch = conn.channel()
    if purge_only:
        ch.queue_purge(QUEUE)
    else:
        ch.queue_declare(QUEUE, durable=True)
        ch.queue_bind(QUEUE, "amq.topic", "#")
    conn.close()


def _baseline(b, bench, node, n):
    cmd = [os.path.join(bench.build, "bin", "amqp_pub"), "--port", str(node.port), "-n", str(n),
           "--size", str(SIZE), "--window", str(WINDOW), "--routing-key", TOPIC]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + n / 1000)
    if p.returncode != 0:
        raise b.BenchError(f"amqp_pub failed ({p.returncode}): {p.stderr.strip()}")
    out = json.loads(p.stdout.strip().split("\n")[-1])
    if out["confirmed"] != n:
        raise b.BenchError(f"amqp_pub: {out['confirmed']} of {n} confirmed")
    return out["rate"]


def _bridge(b, bench, node, n):
    consumer = ("  - name: bridge\n    plugin: amqp\n    queue: {capacity: %d}\n"
                "    max_pending: %d\n    options: {port: %d}" % (n + 10, WINDOW, node.port))
    hub = b.Hub(bench, [consumer], shutdown_timeout=30)
    try:
        result = b.blast(bench, hub.bus, n, size=SIZE)
        deadline = time.monotonic() + 60 + n / 1000
        while True:
            s = hub.stats()
            c = [x for x in s["consumers"] if x["name"] == "bridge"][0]
            if c["completed"] + c["failed"] >= n:
                t_done = time.monotonic()
                break
            if time.monotonic() > deadline or hub.proc.poll() is not None:
                raise b.BenchError(f"bridge: {c['completed']} of {n} confirmed\n"
                                   + b.tail(hub.logfile))
            time.sleep(0.02)
        if c["failed"] or c["dropped"]:
            raise b.BenchError(f"bridge: failed {c['failed']}, dropped {c['dropped']}")
        return n / (t_done - result["t_first_ns"] / 1e9), c["retried"]
    finally:
        hub.stop()


def _recovery(b, bench, node, n=200):
    """Seconds from a route appearing to the n messages held for it
    confirmed (see the top)."""
    import pika
    consumer = ("  - name: bridge\n    plugin: amqp\n    max_pending: %d\n"
                "    options: {port: %d, exchange: amq.direct}" % (WINDOW, node.port))
    hub = b.Hub(bench, [consumer], shutdown_timeout=30)
    conn = pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", node.port, "/", pika.PlainCredentials("guest", "guest")))
    try:
        ch = conn.channel()
        ch.queue_declare(QUEUE + ".late", durable=True)
        ch.queue_purge(QUEUE + ".late")
        ch.queue_unbind(QUEUE + ".late", "amq.direct", TOPIC)
        b.blast(bench, hub.bus, n, size=SIZE)
        deadline = time.monotonic() + 60
        while True:  # every one handed to the plugin, none confirmed
            c = [x for x in hub.stats()["consumers"] if x["name"] == "bridge"][0]
            if c["dequeued"] >= n and "returned by the broker" in open(hub.logfile).read():
                break
            if time.monotonic() > deadline or c["completed"]:
                raise b.BenchError(f"recovery: {c['dequeued']} handed over, "
                                   f"{c['completed']} confirmed before the route\n"
                                   + b.tail(hub.logfile))
            time.sleep(0.02)
        ch.queue_bind(QUEUE + ".late", "amq.direct", TOPIC)
        t_bound = time.monotonic()
        while c["completed"] < n:
            if time.monotonic() > t_bound + 120:
                raise b.BenchError(f"recovery: {c['completed']} of {n} confirmed\n"
                                   + b.tail(hub.logfile))
            time.sleep(0.02)
            c = [x for x in hub.stats()["consumers"] if x["name"] == "bridge"][0]
        return time.monotonic() - t_bound
    finally:
        conn.close()
        hub.stop()


def run(b, bench, prof, results):
    """b: the bench module (Hub, blast, log, tail, median, BenchError)."""
    import rabbitmq_node
    try:
        import pika  # noqa: F401 (the queue's declaration)
        rabbitmq_node.rabbitmq_server()
        if not os.path.exists(os.path.join(b_plugins(bench), "amqp.so")):
            raise RuntimeError("the amqp plugin was not built (librabbitmq-dev missing)")
    except Exception as e:  # a missing tool: said in the results, not a crash
        results["amqp"] = {"status": f"not measured: {e}"}
        b.log(results["amqp"]["status"])
        return
    n = 20_000 if prof["tp_n"] < 1_000_000 else 50_000  # --quick, or the full run
    node = rabbitmq_node.RabbitNode()
    try:
        _queue(node)
        bridge, baseline, retried = [], [], 0
        for _ in range(prof["reps"]):
            _queue(node, purge_only=True)
            baseline.append(_baseline(b, bench, node, n))
            _queue(node, purge_only=True)
            rate, again = _bridge(b, bench, node, n)
            bridge.append(rate)
            retried += again
        row = dict(n=n, size=SIZE, window=WINDOW, bridge_rate=b.median(bridge),
                   baseline_rate=b.median(baseline), bridge_runs=bridge,
                   baseline_runs=baseline, retried=retried)
        row["recovery_s"] = _recovery(b, bench, node)
        row["ratio"] = row["bridge_rate"] / row["baseline_rate"]
        row["met"] = row["ratio"] >= TARGET
        results["amqp"] = {"status": "measured", "rows": [row], "target": TARGET}
        b.log(f"amqp: bridge with confirms {row['bridge_rate']:,.0f}/s, minimal librabbitmq "
              f"publisher {row['baseline_rate']:,.0f}/s (window {WINDOW}, {n:,} x {SIZE} B, "
              f"persistent, durable queue): x{row['ratio']:.2f} (target >= {TARGET}); "
              f"200 returned messages through {row['recovery_s']:.2f} s after their route "
              f"appeared")
    finally:
        node.cleanup()


def b_plugins(bench):
    return os.path.join(bench.build, "lib", "fanhub", "plugins")


def markdown(results, w):
    """The case's section of results.md (w writes one line)."""
    entry = results.get("amqp")
    if not entry:
        return
    w("## RabbitMQ bridge with publisher confirms\n")
    if not entry.get("rows"):
        w(f"- {entry['status']}\n")
        return
    w("One amqp consumer (confirm window = max_pending 1000) fed by bench_pub, against "
      "amqp_pub, a minimal librabbitmq publisher with the same window, same broker, "
      "persistent messages into one durable queue.\n")
    w("| Messages | Body | bridge/s | minimal publisher/s | bridge/minimal | target | met |")
    w("|---|---|---|---|---|---|---|")
    for r in entry["rows"]:
        w(f"| {r['n']:,} | {r['size']} B | {r['bridge_rate']:,.0f} | "
          f"{r['baseline_rate']:,.0f} | {r['ratio']:.2f}x | >= {entry['target']} | "
          f"{'yes' if r['met'] else 'NO'} |")
    w("")
    for r in entry["rows"]:
        if "recovery_s" in r:
            w(f"Recovery: 200 messages the broker returned (no route yet) all confirmed "
              f"{r['recovery_s']:.2f} s after a queue was bound for them (the route's probe, "
              f"then the backlog at once).\n")
