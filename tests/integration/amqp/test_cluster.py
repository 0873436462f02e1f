"""Keyed work across hubs with failover: three real worker hubs consume the
shard queues of a consistent-hash exchange (bus.amqp shards: 6, declare:
true, prefer: a third each) on a private RabbitMQ node. Each queue has a
single active consumer, so each key is worked by one hub at a time.

Fed 9,000 messages over 60 keys (the routing key is the key, which the
exchange hashes), the hubs are killed one: kill -9 of a worker midway.
Then:
- nothing is lost: every (key, seq) is in some hub's log;
- duplicates (in the killed hub's log and another's) are at most the
  killed hub's prefetch times the queues it held;
- before the kill each key was worked by one hub only, and each hub had
  work (prefer spreads the shards);
- the killed hub's shards are resumed by another hub within 10 s;
- per key, each hub saw its messages in publish order; across hubs the
  only step back is the documented one: after a failover the new hub
  starts again from what the dead one had not acked."""
import json
import os
import signal
import sys
import time
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import rabbitmq_node

try:
    import pika
except ImportError:  # scripts/deps installs python3-pika
    pika = None

HUBS = 3
SHARDS = 6
PREFETCH = 20
KEYS = 60
N = 9000


def worker_yaml(node, index, path):
    return ("name: worker%d\n"
            "bus:\n  amqp: {url: \"amqp://127.0.0.1:%d\", queue: work, shards: %d, "
            "declare: true, prefetch: %d, prefer: {index: %d, count: %d}, standby_delay: 1}\n"
            "shutdown_timeout: 60\nconsumers:\n"
            "  - name: log\n    plugin: log\n    options: {path: %s, flush_ms: 0}\n"
            "  - name: slow\n    plugin: %s/sleep.so\n    options: {ms: 2}\n"
            % (index, node.port, SHARDS, PREFETCH, index, HUBS, json.dumps(path),
               fh.TEST_PLUGINS))


def consumers_per_queue(node):
    r = node.ctl(["list_consumers", "--formatter", "json", "--silent", "queue_name"])
    counts = {}
    for row in json.loads(r.stdout.decode() or "[]"):
        counts[row["queue_name"]] = counts.get(row["queue_name"], 0) + 1
    return counts


def lines_of(path):
    out = []
    for line in fh.read_jsonl(path):
        body = json.loads(line["body"])
        at = datetime.strptime(line["received_at"], "%Y-%m-%dT%H:%M:%S.%fZ")
        out.append((body["key"], body["seq"], (at - datetime(1970, 1, 1)).total_seconds()))
    return out


def test_three_workers_and_a_failover():
    fh.require_tool(pika, "pika (python3-pika)", "python3-pika")
    with rabbitmq_node.RabbitNode() as node:
        wd = fh.Workdir()
        paths = [wd.file("worker%d.jsonl" % i) for i in range(HUBS)]
        hubs = [fh.Hub(wd, worker_yaml(node, i, paths[i]), name="worker%d" % i)
                for i in range(HUBS)]
        try:
            for hub in hubs:
                fh.wait_for(lambda: hub.stats()["hub"].get("amqp", {}).get("connected") == 1,
                            "worker consuming", hub=hub)
            # Every shard queue has the three hubs: one active, two standby.
            fh.wait_for(lambda: consumers_per_queue(node) ==
                        {"work.%d" % s: HUBS for s in range(SHARDS)}, "3 consumers per queue")
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
            ch = conn.channel()
            for i in range(N):
                key = "k%d" % (i % KEYS)
                ch.basic_publish("amq.topic", "org.test.%s" % key,
                                 json.dumps({"key": key, "seq": i // KEYS}),
                                 pika.BasicProperties(delivery_mode=2))
            conn.close()
            total = lambda: sum(fh.count_lines(p) for p in paths)
            fh.wait_for(lambda: total() >= N // 6, "a sixth worked", hub=hubs[0])
            before = [lines_of(p) for p in paths]
            killed_at = time.time()
            hubs[0].send_signal(signal.SIGKILL)
            hubs[0].wait()
            dead = {key for key, _, _ in lines_of(paths[0])}
            fh.wait_for(lambda: node.queue_depths().get("work.0") is not None and
                        all(v == (0, 0) for v in node.queue_depths().values()),
                        "every shard queue drained", hub=hubs[1])
            for hub in hubs[1:]:
                assert hub.stop() == 0, hub.log()
            logs = [lines_of(p) for p in paths]
            # Before the kill: one hub per key, and every hub had work.
            owners = {}
            for i, lines in enumerate(before):
                assert lines, "worker%d had no work before the kill" % i
                for key, _, _ in lines:
                    assert owners.setdefault(key, i) == i, "key %s worked by two hubs" % key
            # After it too, among the living.
            keys1 = {k for k, _, _ in logs[1]}
            keys2 = {k for k, _, _ in logs[2]}
            assert not (keys1 & keys2), "a key on two living hubs: %s" % (keys1 & keys2)
            # Nothing lost; duplicates only from the dead hub, bounded.
            seen = {}
            for lines in logs:
                for key, seq, _ in lines:
                    seen[(key, seq)] = seen.get((key, seq), 0) + 1
            want = {("k%d" % (i % KEYS), i // KEYS) for i in range(N)}
            assert set(seen) == want, "lost %d" % len(want - set(seen))
            dead_seen = {(k, s) for k, s, _ in logs[0]}
            duplicates = sum(n - 1 for n in seen.values())
            bound = PREFETCH * (SHARDS // HUBS)  # the dead hub held 2 queues
            assert duplicates <= bound, (duplicates, bound)
            assert all(pair in dead_seen for pair, n in seen.items() if n > 1)
            # Resumed within 10 s: the dead hub's keys on another hub.
            after_kill = [t for lines in logs[1:] for key, _, t in lines
                          if key in dead and t >= killed_at]
            assert after_kill, "the dead hub's keys were not resumed"
            resumed = min(after_kill)
            assert resumed - killed_at < 10, resumed - killed_at
            # Per key, per hub: publish order.
            for i, lines in enumerate(logs):
                last = {}
                for key, seq, _ in lines:
                    assert last.get(key, -1) < seq, ("worker%d" % i, key, seq, last.get(key))
                    last[key] = seq
            # Across hubs: a moved key starts again at or before the dead
            # hub's last, never after a gap.
            for key in dead:
                dead_last = max(s for k, s, _ in logs[0] if k == key)
                after = [s for lines in logs[1:] for k, s, _ in lines if k == key]
                if after:
                    assert min(after) <= dead_last + 1, (key, min(after), dead_last)
            print("duplicates %d (bound %d), resumed %.2f s after the kill"
                  % (duplicates, bound, resumed - killed_at))
        finally:
            for hub in hubs:
                hub.kill()
        wd.cleanup()


if __name__ == "__main__":
    fh.main([test_three_workers_and_a_failover])
