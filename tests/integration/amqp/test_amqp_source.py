"""bus.amqp: a real `fanhub run` consuming from a private RabbitMQ node
(rabbitmq_node.py), fed by a pika publisher with confirms.

- To `log`: every message once, in queue order, topic = routing key, body
  byte for byte; each one acked (the broker's queue ends empty), counted
  in hub.received and hub.amqp.
- Acked exactly after done: a consumer held in consume keeps its messages
  unacked at the broker (exactly `prefetch` of them, the rest ready, none
  acked) until it is let go; a kill -9 before then delivers them all again
  to the next hub. The same through a spilling consumer with
  queue.write_ahead: written to the spool is not done, so nothing is acked
  until the spooled copies are consumed.
- Malformed (over bus.max_message_bytes): rejected without requeue, into
  the queue's dead-letter exchange; every consumer refusing (a full
  drop-newest queue): nacked with requeue and delivered again, so nothing
  is lost.
- Failure paths: a broker that is down at start (retried with backoff,
  then consumed from), a broker crash mid-stream (reconnect, nothing
  lost), a wrong password and a missing queue (logged, retried), and
  `fanhub check` refusing bad bus.amqp options."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import rabbitmq_node

try:
    import pika
except ImportError:  # scripts/deps installs python3-pika
    pika = None


def need_pika():
    fh.require_tool(pika, "pika (python3-pika)", "python3-pika")


def hub_yaml(node, consumers, amqp="", extra="", queue="work"):
    return ("bus:\n  amqp: {url: \"amqp://127.0.0.1:%d\", queue: %s, declare: true%s}\n"
            "shutdown_timeout: 60\n%sconsumers:\n%s" % (node.port, queue, amqp, extra, consumers))


_shared = []


class shared_node:
    """One node for the cases that neither stop nor crash it (a node takes
    seconds to boot); each case uses queues of its own. Stopped at exit by
    rabbitmq_node's hook."""

    def __enter__(self):
        if not _shared:
            _shared.append(rabbitmq_node.RabbitNode())
        return _shared[0]

    def __exit__(self, *exc):
        return False


def log_consumer(path, name="out", queue=""):
    return ("  - name: %s\n    plugin: log\n%s    options: {path: %s, flush_ms: 20}\n"
            % (name, queue, json.dumps(path)))


def held_consumer(release, name="held", queue="", extra=""):
    return ("  - name: %s\n    plugin: %s/sleep.so\n%s%s    options: {release_file: %s}\n"
            % (name, fh.TEST_PLUGINS, queue, extra, json.dumps(release)))


class Producer:
    """pika. With confirms a publish returns once the broker has the
    message (a round trip each); without, close() flushes them."""

    def __init__(self, node, confirms=True):
        self.conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
        self.ch = self.conn.channel()
        if confirms:
            self.ch.confirm_delivery()

    def send(self, key, body, exchange="amq.topic"):
        self.ch.basic_publish(exchange, key, body,
                              pika.BasicProperties(delivery_mode=2))

    def close(self):
        self.conn.close()


def amqp_stats(hub):
    return hub.stats()["hub"].get("amqp")


def wait_connected(hub):
    fh.wait_for(lambda: (amqp_stats(hub) or {}).get("connected") == 1,
                "the hub consuming from RabbitMQ", hub=hub)


def test_to_log_every_message_acked():
    need_pika()
    n = 5_000
    with shared_node() as node:
        wd = fh.Workdir()
        path = wd.file("out.jsonl")
        hub = fh.Hub(wd, hub_yaml(node, log_consumer(path), ", prefetch: 200", queue="tolog"))
        try:
            wait_connected(hub)
            producer = Producer(node, confirms=False)
            for i in range(n):
                producer.send("org.test.k%d" % (i % 7), b'{"n":%d,"b":"\\u00e9 \xc3\xa9"}' % i)
            producer.close()
            fh.wait_for(lambda: fh.count_lines(path) >= n, "every message logged", hub=hub)
            fh.wait_for(lambda: amqp_stats(hub)["acked"] == n, "every message acked", hub=hub)
            fh.wait_for(lambda: node.queue_depths().get("tolog") == (0, 0),
                        "the broker's queue empty")
            stats = hub.stats()["hub"]
            assert stats["received"] == n and stats["handled"] == n, stats
            assert stats["amqp"]["delivered"] == n, stats["amqp"]
            assert stats["amqp"]["rejected"] == 0 and stats["amqp"]["requeued"] == 0
            assert stats["amqp"]["unacked"] == 0
            lines = fh.read_jsonl(path)
            assert [json.loads(l["body"])["n"] for l in lines] == list(range(n))
            for i, line in enumerate(lines):
                assert line["topic"] == "org.test.k%d" % (i % 7), line
                assert line["body"] == '{"n":%d,"b":"\\u00e9 \u00e9"}' % i, line
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_acked_only_when_done_and_redelivered_after_kill():
    need_pika()
    n, prefetch = 100, 10
    with shared_node() as node:
        wd = fh.Workdir()
        release = wd.file("release")
        hub = fh.Hub(wd, hub_yaml(node, held_consumer(release),
                                  ", prefetch: %d" % prefetch, queue="killed"))
        try:
            wait_connected(hub)
            producer = Producer(node)
            for i in range(n):
                producer.send("org.test.held", json.dumps({"n": i}))
            producer.close()
            # The consumer holds the first message in consume, the next
            # ones wait in its queue: prefetch open, none done, none acked.
            fh.wait_for(lambda: amqp_stats(hub)["unacked"] == prefetch, "prefetch open",
                        hub=hub)
            fh.wait_for(lambda: node.queue_depths()["killed"] == (n - prefetch, prefetch),
                        "the broker holding the rest")
            stats = hub.stats()
            assert stats["hub"]["amqp"]["acked"] == 0, stats["hub"]["amqp"]
            assert hub.consumer(stats, "held")["completed"] == 0
            assert stats["hub"]["amqp"]["delivered"] == prefetch
            hub.kill()  # SIGKILL: nothing was done, nothing was acked
            # The next hub gets every message, those the dead one held too.
            path = wd.file("after.jsonl")
            hub = fh.Hub(wd, hub_yaml(node, log_consumer(path), queue="killed"),
                         name="hub2")
            fh.wait_for(lambda: fh.count_lines(path) >= n, "all delivered again", hub=hub)
            fh.wait_for(lambda: node.queue_depths()["killed"] == (0, 0), "all acked")
            got = sorted(json.loads(l["body"])["n"] for l in fh.read_jsonl(path))
            assert got == list(range(n)), got
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_held_messages_are_acked_once_released():
    need_pika()
    n, prefetch = 50, 8
    with shared_node() as node:
        wd = fh.Workdir()
        release = wd.file("release")
        hub = fh.Hub(wd, hub_yaml(node, held_consumer(release),
                                  ", prefetch: %d" % prefetch, queue="released"))
        try:
            wait_connected(hub)
            producer = Producer(node)
            for i in range(n):
                producer.send("org.test.held", json.dumps({"n": i}))
            producer.close()
            fh.wait_for(lambda: node.queue_depths()["released"] == (n - prefetch, prefetch),
                        "prefetch open at the broker")
            assert amqp_stats(hub)["acked"] == 0
            open(release, "w").close()
            fh.wait_for(lambda: amqp_stats(hub)["acked"] == n, "all acked once done", hub=hub)
            stats = hub.stats()
            assert hub.consumer(stats, "held")["completed"] == n
            fh.wait_for(lambda: node.queue_depths()["released"] == (0, 0), "the queue empty")
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_spilled_is_acked_only_when_its_copy_is_done():
    need_pika()
    n, prefetch = 60, 20
    with shared_node() as node:
        wd = fh.Workdir()
        release = wd.file("release")
        spill = held_consumer(release, name="spilled",
                              queue="    queue: {capacity: 4, overflow: spill, "
                                    "write_ahead: true}\n")
        extra = "state_dir: %s\n" % json.dumps(wd.file("state"))
        hub = fh.Hub(wd, hub_yaml(node, spill,
                                  ", prefetch: %d" % prefetch, extra, queue="spilled"))
        try:
            wait_connected(hub)
            producer = Producer(node)
            for i in range(n):
                producer.send("org.test.spill", json.dumps({"n": i}))
            producer.close()
            # Every message goes through the spool (write_ahead): written,
            # durable, but not done, so not acked.
            fh.wait_for(lambda: hub.consumer(hub.stats(), "spilled")["spilled"] >= prefetch,
                        "prefetch spilled", hub=hub)
            fh.wait_for(lambda: node.queue_depths()["spilled"] == (n - prefetch, prefetch),
                        "prefetch unacked at the broker")
            assert amqp_stats(hub)["acked"] == 0, amqp_stats(hub)
            open(release, "w").close()
            fh.wait_for(lambda: amqp_stats(hub)["acked"] == n, "all acked once consumed",
                        hub=hub)
            stats = hub.stats()
            assert hub.consumer(stats, "spilled")["completed"] == n
            fh.wait_for(lambda: node.queue_depths()["spilled"] == (0, 0), "the queue empty")
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_malformed_is_dead_lettered_and_refused_is_requeued():
    need_pika()
    with shared_node() as node:
        # A dead-letter exchange with a queue to read it back from.
        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
        ch = conn.channel()
        ch.exchange_declare("dead", "fanout", durable=True)
        ch.queue_declare("dead.letters", durable=True)
        ch.queue_bind("dead.letters", "dead")
        conn.close()
        wd = fh.Workdir()
        release = wd.file("release")
        path = wd.file("out.jsonl")
        # "tight": one slot, drop-newest, held: it refuses what comes while
        # full. "other" takes only org.test.ok.*.
        consumers = (held_consumer(release, name="tight",
                                   queue="    queue: {capacity: 1, overflow: drop-newest}\n",
                                   extra="    topics: [org.test.refused]\n")
                     + log_consumer(path, name="other", queue="    topics: [org.test.ok]\n"))
        config = hub_yaml(node, consumers, ", prefetch: 5, dead_letter_exchange: dead",
                          queue="refused")
        config = config.replace("bus:\n", "bus:\n  max_message_bytes: 200\n", 1)
        hub = fh.Hub(wd, config)
        try:
            wait_connected(hub)
            producer = Producer(node)
            producer.send("org.test.ok", b"x" * 1000)       # too large: rejected
            producer.send("org.test.ok", b'{"fine": 1}')
            for i in range(4):
                producer.send("org.test.refused", json.dumps({"n": i}))
            producer.close()
            fh.wait_for(lambda: node.queue_depths().get("dead.letters", (0, 0))[0] == 1,
                        "the malformed message dead-lettered")
            fh.wait_for(lambda: amqp_stats(hub)["requeued"] > 0,
                        "refused messages given back to the broker", hub=hub)
            stats = hub.stats()["hub"]
            assert stats["amqp"]["rejected"] == 1, stats["amqp"]
            assert stats["malformed_by_reason"]["too_large"] == 1, stats
            # Let the held consumer go: the requeued messages come back and
            # are consumed; nothing is lost.
            open(release, "w").close()
            fh.wait_for(lambda: node.queue_depths()["refused"] == (0, 0), "the queue drained",
                        hub=hub)
            stats = hub.stats()
            assert hub.consumer(stats, "tight")["completed"] >= 4, stats
            assert [l["body"] for l in fh.read_jsonl(path)] == ['{"fine": 1}']
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
            method, _, body = conn.channel().basic_get("dead.letters", auto_ack=True)
            conn.close()
            assert body == b"x" * 1000 and method.routing_key == "org.test.ok"
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_broker_down_at_start_then_crashing():
    need_pika()
    n = 3000
    with rabbitmq_node.RabbitNode() as node:
        node.stop()
        wd = fh.Workdir()
        path = wd.file("out.jsonl")
        hub = fh.Hub(wd, hub_yaml(node, log_consumer(path), ", reconnect_max: 1"))
        try:
            hub.wait_ready()
            hub.wait_log("bus.amqp: cannot connect to 127.0.0.1:%d" % node.port)
            assert amqp_stats(hub)["connected"] == 0
            node.start()
            wait_connected(hub)
            producer = Producer(node)
            for i in range(n):
                producer.send("org.test.k", json.dumps({"n": i}))
            producer.close()
            fh.wait_for(lambda: fh.count_lines(path) >= n // 2, "half logged", hub=hub)
            node.restart(crash=True)  # persistent messages survive, unacked come back
            fh.wait_for(lambda: amqp_stats(hub)["reconnects"] >= 1 and
                        amqp_stats(hub)["connected"] == 1, "reconnected", hub=hub)
            fh.wait_for(lambda: node.queue_depths()["work"] == (0, 0), "all acked", hub=hub)
            got = [json.loads(l["body"])["n"] for l in fh.read_jsonl(path)]
            assert set(got) == set(range(n)), "lost %s" % sorted(set(range(n)) - set(got))[:10]
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_wrong_password_and_missing_queue_are_logged_and_retried():
    need_pika()
    with rabbitmq_node.RabbitNode(users=[("worker", "right", "/")]) as node:
        wd = fh.Workdir()
        wd.write("pw", "wrong\n")
        os.chmod(wd.file("pw"), 0o644)
        status, out, err = fh.run(["check", "-c", wd.write("c.yaml", "bus:\n  amqp: {url: "
                                   "\"amqp://u@h\", queue: q, password_file: %s}\n"
                                   "consumers:\n  - {name: c, plugin: log}\n"
                                   % json.dumps(wd.file("pw")))])
        assert status != 0 and "refusing it (chmod 600" in err, err
        os.chmod(wd.file("pw"), 0o600)
        config = ("bus:\n  amqp: {url: \"amqp://worker@127.0.0.1:%d\", queue: work, "
                  "password_file: %s, reconnect_max: 1}\nconsumers:\n%s"
                  % (node.port, json.dumps(wd.file("pw")), log_consumer(wd.file("out.jsonl"))))
        hub = fh.Hub(wd, config)
        try:
            hub.wait_log("cannot log in to 127.0.0.1:%d vhost / as worker" % node.port)
            # The right password, but no queue (declare: false).
            wd.write("pw", "right\n")
            os.chmod(wd.file("pw"), 0o600)
            hub.stop()
            hub = fh.Hub(wd, config, name="hub2")
            hub.wait_log("consuming from queue work: the broker closed the channel: 404")
            assert amqp_stats(hub)["connected"] == 0
            # Made by an operator: the hub's next try consumes from it.
            conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", node.port))
            conn.channel().queue_declare("work", durable=True)
            conn.close()
            wait_connected(hub)
            assert hub.stop() == 0, hub.log()
        finally:
            hub.kill()
        wd.cleanup()


def test_check_refuses_bad_options():
    wd = fh.Workdir()
    cases = [
        ('{url: "http://h", queue: q}', "bus.amqp.url: expected amqp://HOST[:PORT][/VHOST]"),
        ('{url: "amqp://u:secret@h", queue: q}', "bus.amqp.url: no password in the url"),
        ('{url: "amqp://h"}', "bus.amqp.queue: required key is missing"),
        ('{url: "amqp://h", queue: q, prefetch: 0}', "bus.amqp.prefetch: expected an integer"),
        ('{url: "amqp://h", queue: q, queue_type: lazy}', "bus.amqp.queue_type: expected"),
        ('{url: "amqp://h", queue: q, password_env: FANHUB_NO_SUCH_VAR}',
         "bus.amqp.password_env: the environment variable FANHUB_NO_SUCH_VAR is not set"),
        ('{url: "amqps://h", queue: q}', "bus.amqp.tls.ca_file: required"),
        ('{url: "amqp://h", queue: q, colour: red}', "bus.amqp.colour: unknown option"),
    ]
    for amqp, error in cases:
        path = wd.write("bad.yaml", "bus:\n  amqp: %s\nconsumers:\n  - {name: c, plugin: log}\n"
                        % amqp)
        status, out, err = fh.run(["check", "-c", path])
        assert status != 0, (amqp, out, err)
        assert "bad.yaml:2:" in err and error in err, (amqp, err)
    # A good one passes without connecting anywhere.
    path = wd.write("good.yaml", "bus:\n  amqp: {url: \"amqp://127.0.0.1:1\", queue: q, "
                    "shards: 4, declare: true, queue_type: quorum}\n"
                    "consumers:\n  - name: c\n    plugin: log\n    options: {path: %s}\n"
                    % json.dumps(wd.file("x.jsonl")))
    status, out, err = fh.run(["check", "-c", path])
    assert status == 0, (out, err)
    assert not os.path.exists(wd.file("x.jsonl"))
    wd.cleanup()


def test_shared_keys_refused_alike():
    """bus.amqp and the amqp plugin read their common keys through one
    option table (consumers/amqp/amqp_options.h): `fanhub check` refuses a
    bad one with the same words, the key's place given in both."""
    path = os.path.join(fh.SHIPPED_PLUGINS, "amqp.so")
    fh.require_tool(path if os.path.exists(path) else None, "the amqp plugin (amqp.so)",
                    "librabbitmq-dev")
    wd = fh.Workdir()
    pattern = r"%s(\S+: .*) \((\S+):(\d+):(\d+)\)"
    for bad in ["queue_type: lazy", "shards: 5000", "declare: yes", "hash_header: ''",
                "exchange: %s" % ("x" * 256), "tls: {verify_peer: maybe}", "tls: {colour: red}",
                "bindings: {a: b}", "envelope: fedmsg", "password_env: FANHUB_NO_SUCH_VAR"]:
        hub = wd.write("hub.yaml", "bus:\n  amqp: {url: \"amqp://h\", queue: q, %s}\n"
                       "consumers:\n  - {name: c, plugin: log}\n" % bad)
        status, out, err = fh.run(["check", "-c", hub])
        said = re.search(pattern % r"bus\.amqp\.", err)
        assert status != 0 and said and said.group(2, 3) == (hub, "2"), (bad, err)
        plugin = wd.write("plugin.yaml", "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n"
                          "  - name: bridge\n    plugin: amqp\n    options: {queue: q, %s}\n"
                          % bad)
        status, out, err = fh.run(["check", "-c", plugin])
        told = re.search(pattern % r"options\.", err)
        assert status != 0 and told and told.group(2, 3) == (plugin, "6"), (bad, err)
        assert said.group(1) == told.group(1), (bad, said.group(1), told.group(1))
        # The same place in bad: at columns 37 and 25 of the lines.
        assert int(said.group(4)) - 37 == int(told.group(4)) - 25 >= 0, (bad, said.group(4),
                                                                        told.group(4))
    wd.cleanup()


if __name__ == "__main__":
    fh.main([
        test_check_refuses_bad_options,
        test_shared_keys_refused_alike,
        test_to_log_every_message_acked,
        test_acked_only_when_done_and_redelivered_after_kill,
        test_held_messages_are_acked_once_released,
        test_spilled_is_acked_only_when_its_copy_is_done,
        test_malformed_is_dead_lettered_and_refused_is_requeued,
        test_broker_down_at_start_then_crashing,
        test_wrong_password_and_missing_queue_are_logged_and_retried,
    ])
