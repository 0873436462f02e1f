"""bench_cluster.py - the benchmark's cluster case (bench.py --cases
cluster): keyed work over RabbitMQ shard queues, 3 worker hubs against 1,
with an I/O-bound consumer, in the same run against the same broker.

A private RabbitMQ node (tests/integration/rabbitmq_node.py). For K worker
hubs (1, then 3, alternating rep by rep): the topology is declared first
(what `bus.amqp declare: true` makes: a consistent-hash exchange bound to
amq.topic, 6 shard queues with a single active consumer each), M = K x
PER_HUB messages of 100 B over 600 routing keys are published into it with
pika and wait in the queues, then K hubs start with bus.amqp (shards: 6,
prefer: a share each, prefetch 100) and one consumer, the test plugin
`sleep` at 1 ms per message: a consumer bound by waiting, not by CPU. The
rate is the messages acked (hub.amqp.acked over the K hubs, polled every
50 ms) between 5 % and 95 % of M, over that time: the hubs' start and the
last stragglers are left out. Target: 3 hubs >= 2.7 x 1 hub.
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

TARGET = 2.7
SHARDS = 6
PREFETCH = 100
PER_HUB = 4000
KEYS = 600
SIZE = 100


def _declare_and_fill(node, m):
    """The topology of bus.amqp (same arguments, so the hubs' declare is
    a no-op), the queues purged, then m messages waiting in them."""
    import pika
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
    ch = conn.channel()
    ch.exchange_declare("bench.hash", "x-consistent-hash", durable=True)
    ch.exchange_bind("bench.hash", "amq.topic", "#")
    for s in range(SHARDS):
        q = "bench.%d" % s
        ch.queue_declare(q, durable=True, arguments={"x-queue-type": "classic",
                                                     "x-single-active-consumer": True})
        ch.queue_bind(q, "bench.hash", "1")
        ch.queue_purge(q)
    ch.confirm_delivery()
    pad = b"x" * (SIZE - 20)
    for i in range(m):
        ch.basic_publish("amq.topic", "org.bench.k%d" % (i % KEYS), b"%08d" % i + pad)
    conn.close()


def _worker(b, bench, node, index, count):
    config = bench.path("worker%d.yaml" % index)
    control = "ipc://%s.ctl" % config
    with open(config, "w") as f:
        f.write("bus:\n  amqp: {url: \"amqp://127.0.0.1:%d\", queue: bench, shards: %d, "
                "declare: true, prefetch: %d, prefer: {index: %d, count: %d}, "
                "standby_delay: 3}\ncontrol: %s\nshutdown_timeout: 5\nconsumers:\n"
                "  - name: io\n    plugin: %s/sleep.so\n    queue: {capacity: 10000}\n"
                "    options: {ms: 1}\n"
                % (node.port, SHARDS, PREFETCH, index, count, control,
                   os.path.join(bench.build, "test-plugins")))
    log = open(config + ".log", "w")
    proc = b.spawn([bench.fanhub, "run", "-q", "-c", config], stdout=log,
                   stderr=subprocess.STDOUT)
    return proc, control, config + ".log"


def _acked(b, control):
    raw = b.stats_call(control, 2000)
    if not raw:
        return None
    s = raw if isinstance(raw, dict) else json.loads(raw)
    return s["hub"].get("amqp", {}).get("acked")


def _run_once(b, bench, node, k):
    m = k * PER_HUB
    _declare_and_fill(node, m)
    workers = [_worker(b, bench, node, i, k) for i in range(k)]
    try:
        first = last = None
        deadline = time.monotonic() + 60 + m / 500
        while True:
            acked = 0
            for proc, control, logfile in workers:
                if proc.poll() is not None:
                    raise b.BenchError("worker exited (%s):\n%s" % (proc.returncode,
                                                                    b.tail(logfile)))
                acked += _acked(b, control) or 0
            now = time.monotonic()
            if first is None and acked >= 0.05 * m:
                first = (now, acked)
            if acked >= 0.95 * m:
                last = (now, acked)
                break
            if now > deadline:
                raise b.BenchError("cluster: %d of %d acked in time" % (acked, m))
            time.sleep(0.05)
        return (last[1] - first[1]) / (last[0] - first[0])
    finally:
        for proc, _, _ in workers:
            proc.terminate()
        for proc, _, _ in workers:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run(b, bench, prof, results):
    """b: the bench module (spawn, stats_call, log, tail, median, BenchError)."""
    import rabbitmq_node
    try:
        import pika  # noqa: F401
        rabbitmq_node.rabbitmq_server()
        if not os.path.exists(os.path.join(bench.build, "test-plugins", "sleep.so")):
            raise RuntimeError("the sleep test plugin was not built")
    except Exception as e:  # a missing tool: said in the results, not a crash
        results["cluster"] = {"status": f"not measured: {e}"}
        b.log(results["cluster"]["status"])
        return
    node = rabbitmq_node.RabbitNode()
    try:
        one, three = [], []
        for _ in range(prof["reps"]):
            one.append(_run_once(b, bench, node, 1))
            three.append(_run_once(b, bench, node, 3))
        row = dict(shards=SHARDS, prefetch=PREFETCH, consumer_ms=1, one_rate=b.median(one),
                   three_rate=b.median(three), one_runs=one, three_runs=three)
        row["ratio"] = row["three_rate"] / row["one_rate"]
        row["met"] = row["ratio"] >= TARGET
        results["cluster"] = {"status": "measured", "rows": [row], "target": TARGET}
        b.log(f"cluster: 1 worker hub {row['one_rate']:,.0f}/s, 3 worker hubs "
              f"{row['three_rate']:,.0f}/s (consumer 1 ms/message, {SHARDS} shard queues): "
              f"x{row['ratio']:.2f} (target >= {TARGET})")
    finally:
        node.cleanup()


def markdown(results, w):
    """The case's section of results.md (w writes one line)."""
    entry = results.get("cluster")
    if not entry:
        return
    w("## Worker hubs on RabbitMQ shard queues\n")
    if not entry.get("rows"):
        w(f"- {entry['status']}\n")
        return
    w("K worker hubs (bus.amqp, 6 shard queues with a single active consumer, prefetch 100) "
      "with one I/O-bound consumer each (1 ms per message), the queues filled beforehand; "
      "acked messages per second between 5 % and 95 % of the run.\n")
    w("| Consumer | 1 hub/s | 3 hubs/s | 3/1 | target | met |")
    w("|---|---|---|---|---|---|")
    for r in entry["rows"]:
        w(f"| {r['consumer_ms']} ms/message | {r['one_rate']:,.0f} | {r['three_rate']:,.0f} | "
          f"{r['ratio']:.2f}x | >= {entry['target']} | {'yes' if r['met'] else 'NO'} |")
    w("")
