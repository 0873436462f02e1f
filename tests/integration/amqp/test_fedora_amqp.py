#!/usr/bin/python3
"""The RabbitMQ side of a Fedora bus (docs/fedora.md), against a private
broker (rabbitmq_node.py, one for the whole file) with pika (Debian's
python3-pika) as the independent AMQP client both ways:

- the amqp plugin with `envelope: fedora-messaging`: each message as
  fedora-messaging publishes it (message_id from msg_id, a UUID4 without
  one, content_type, content_encoding, delivery_mode, the schema,
  severity, sent-at and priority headers, a per-topic schema, the body
  whole or its msg);
- bus.amqp with `envelope: fedora-messaging`: a message pika publishes in
  fedora-messaging's shape reaches a consumer with its message_id as
  msg_id, and the loop guard keeps a bridge in the same hub from
  publishing it again;
- issue 28 item 8: messages published before any worker declared its
  queue are not lost: with `mandatory` a returned message is held
  until a queue is bound, and `declare: true` on the bridge declares the
  workers' queue (shards included) before the first publish;
- issue 39 item 9: once the queue is bound the held backlog is released
  at once, in order, not at each message's own retry backoff.
"""
import datetime
import json
import os
import re
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import rabbitmq_node

try:
    import pika
except ImportError:
    pika = None

NODE = None
TOPIC = "org.fedoraproject.prod.buildsys.build.state.change"


def node():
    global NODE
    if pika is None:
        raise fh.Skip("python3-pika is missing: scripts/deps installs it")
    if not fh.SHIPPED_PLUGINS:
        raise fh.Skip("the amqp plugin is not built (librabbitmq-dev)")
    if NODE is None:
        NODE = rabbitmq_node.RabbitNode()
    return NODE


def channel():
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", NODE.port))
    return conn, conn.channel()


def drain(queue, count, deadline=fh.DEADLINE):
    """count messages from queue (method, properties, body), acked."""
    conn, ch = channel()
    got = []
    end = time.monotonic() + deadline
    try:
        while len(got) < count:
            assert time.monotonic() < end, "%d of %d messages in %s" % (len(got), count, queue)
            method, props, body = ch.basic_get(queue, auto_ack=True)
            if method is None:
                time.sleep(0.05)  # polling a queue: a wait for a condition
                continue
            got.append((method, props, body))
    finally:
        conn.close()
    return got


def envelope(i, topic=TOPIC, **extra):
    body = {"topic": topic, "msg": {"build": i}, "i": i, "timestamp": 1700000000 + i,
            "username": "koji", "msg_id": "2026-00000000-0000-4000-8000-%012d" % i}
    body.update(extra)
    return body


def dumps(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def bridge(name, topics, extra):
    return ("  - name: %s\n    plugin: amqp\n    topics: %s\n"
            "    retry: {max_attempts: 100000, initial_ms: 10, max_ms: 100}\n"
            "    options: {url: \"amqp://127.0.0.1:%d\", %s}\n"
            % (name, fh.yaml_list(topics), NODE.port, extra))


def test_bridge_fedora_messaging_shape():
    node()
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n" % pub.endpoint
                 + bridge("whole", ["org.fedoraproject."],
                          "envelope: fedora-messaging, declare: true, queue: fm.whole, "
                          "bindings: [org.fedoraproject.#], "
                          "schemas: {org.fedoraproject.prod.buildsys.: koji.BuildStateChangeV1}")
                 + bridge("inner", ["org.centos."],
                          "envelope: fedora-messaging, body: msg, severity: 30, declare: true, "
                          "queue: fm.inner, bindings: [org.centos.#]"))
    try:
        pub.wait_subscribed(hub=hub)
        fh.wait_for(lambda: "publishing to exchange" in hub.log()
                    and hub.log().count("publishing to exchange") == 2, "both bridges up",
                    hub=hub)
        pub.send(TOPIC, dumps(envelope(1)))
        pub.send("org.fedoraproject.prod.git.receive", '{"no":"id"}')
        # A timestamp past 64-bit nanoseconds (year 2262): the receive time.
        sent_from = int(time.time())
        pub.send(TOPIC, dumps(envelope(4, timestamp=10 ** 12)))
        pub.send("org.centos.prod.ci", dumps(envelope(2, topic="org.centos.prod.ci")))
        # A \u0000 in a string is JSON: its msg_id is kept, the body byte-exact.
        nul = dumps(envelope(5, msg={"log": "a\x00b"}))
        pub.send(TOPIC, nul)
        (m1, p1, b1), (m2, p2, b2), (m4, p4, b4), (m5, p5, b5) = drain("fm.whole", 4)
        sent_to = int(time.time())
        (m3, p3, b3), = drain("fm.inner", 1)
    finally:
        hub.stop()
        pub.close()
    for props in (p1, p2, p3, p4, p5):
        assert props.content_type == "application/json" and props.content_encoding == "utf-8"
        assert props.delivery_mode == 2 and props.headers["priority"] == 0
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$", props.headers["sent-at"])
    assert m1.routing_key == TOPIC and json.loads(b1) == envelope(1)
    assert p1.message_id == envelope(1)["msg_id"]
    assert p1.headers["fedora_messaging_schema"] == "koji.BuildStateChangeV1"
    assert p1.headers["fedora_messaging_severity"] == 20
    assert p1.headers["sent-at"] == "2023-11-14T22:13:21+00:00"  # the fedmsg timestamp
    assert p2.headers["fedora_messaging_schema"] == "base.message"
    assert str(uuid.UUID(p2.message_id)) == p2.message_id and json.loads(b2) == {"no": "id"}
    assert json.loads(b3) == {"build": 2} and p3.message_id == envelope(2)["msg_id"]
    assert p3.headers["fedora_messaging_severity"] == 30
    assert p4.message_id == envelope(4)["msg_id"]
    assert p5.message_id == envelope(5)["msg_id"] and b5 == nul.encode(), (p5, b5)
    sent_at = datetime.datetime.fromisoformat(p4.headers["sent-at"]).timestamp()
    assert sent_from <= sent_at <= sent_to, p4.headers["sent-at"]
    wd.cleanup()


def test_source_takes_fedora_messaging():
    """pika publishes as fedora-messaging does; a consumer of a hub with
    bus.amqp gets the msg_id, and the bridge in that hub skips it."""
    node()
    wd = fh.Workdir()
    out = wd.file("out.jsonl")
    hub = fh.Hub(wd, "bus:\n  amqp: {url: \"amqp://127.0.0.1:%d\", queue: fm.src, "
                 "declare: true, bindings: [org.src.#], envelope: fedora-messaging}\n"
                 "consumers:\n  - name: out\n    plugin: log\n    options: {path: %s, "
                 "flush_ms: 0}\n" % (NODE.port, json.dumps(out))
                 + bridge("back", ["org.src."], "envelope: fedora-messaging"))
    conn, ch = channel()
    try:
        fh.wait_for(lambda: hub.stats()["hub"].get("amqp", {}).get("connected") == 1,
                    "bus.amqp consuming", hub=hub)
        msg_id = str(uuid.uuid4())
        ch.basic_publish("amq.topic", "org.src.hello", b'{"hello": "world"}',
                         pika.BasicProperties(
                             content_type="application/json", content_encoding="utf-8",
                             delivery_mode=2, message_id=msg_id,
                             headers={"fedora_messaging_schema": "base.message",
                                      "fedora_messaging_severity": 20,
                                      "sent-at": "2024-06-21T12:52:29+00:00", "priority": 0}))
        ch.basic_publish("amq.topic", "org.src.text", b"not json")
        # A \u0000 in a string is JSON: enveloped, its message_id the msg_id.
        ch.basic_publish("amq.topic", "org.src.nul", b'{"s": "a\\u0000b"}',
                         pika.BasicProperties(content_type="application/json",
                                              message_id="nul-1"))
        fh.wait_for(lambda: fh.count_lines(out) == 3, "the deliveries", hub=hub)
        body = json.loads(fh.read_jsonl(out)[0]["body"])
        assert fh.read_jsonl(out)[1]["body"] == "not json"  # as it came
        assert body["msg_id"] == msg_id and body["msg"] == {"hello": "world"}
        assert body["topic"] == "org.src.hello" and body["timestamp"] == 1718974349
        assert body["headers"]["fedora_messaging_schema"] == "base.message"
        nul = fh.read_jsonl(out)[2]["body"]
        got = json.loads(nul)
        assert got["msg_id"] == "nul-1" and got["topic"] == "org.src.nul", got
        assert got["msg"] == {"s": "a\x00b"} and nul == dumps(got), nul
        fh.wait_for(lambda: hub.stats()["hub"]["amqp"]["acked"] == 3, "acked", hub=hub)
        assert hub.stop() == 0, hub.log()
        assert "not published again (from bus.amqp) 3\n" in hub.log(), hub.log()
        assert NODE.queue_depths().get("fm.src", (0, 0)) == (0, 0)
    finally:
        conn.close()
        hub.kill()
    wd.cleanup()


def test_nothing_lost_before_workers_declare():
    """Issue 28 item 8. Mandatory: 20 messages with no queue bound come
    back and are retried until a worker's queue is bound. declare: true:
    the bridge declares the workers' shard queues, so messages published
    before any worker are kept."""
    node()
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n" % pub.endpoint
                 + bridge("late", ["org.late."], "exchange: amq.topic")
                 + bridge("early", ["org.early."], "declare: true, queue: fm.work, shards: 2, "
                          "bindings: [org.early.#]"))
    try:
        pub.wait_subscribed(hub=hub)
        fh.wait_for(lambda: hub.log().count("publishing to exchange") == 2, "bridges up",
                    hub=hub)
        for i in range(20):
            pub.send("org.late.x", '{"i":%d}' % i)
            pub.send("org.early.k%d" % i, '{"i":%d}' % i)
        hub.wait_log("returned by the broker (312 NO_ROUTE)")
        late = hub.consumer(hub.stats(), "late")
        assert late["completed"] == 0, late
        # A worker declares and binds its queue now: the retries get there.
        conn, ch = channel()
        ch.queue_declare("fm.late", durable=True)
        ch.queue_bind("fm.late", "amq.topic", "org.late.#")
        conn.close()
        got = drain("fm.late", 20)
        assert sorted(json.loads(b)["i"] for _, _, b in got) == list(range(20))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "early")["completed"] == 20,
                    "early confirmed", hub=hub)
        shards = [q for q in NODE.queue_depths() if q.startswith("fm.work.")]
        assert sorted(shards) == ["fm.work.0", "fm.work.1"], shards
        early = drain("fm.work.0", NODE.queue_depths()["fm.work.0"][0]) \
            + drain("fm.work.1", NODE.queue_depths()["fm.work.1"][0])
        assert sorted(json.loads(b)["i"] for _, _, b in early) == list(range(20))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "late")["completed"] == 20,
                    "late completed", hub=hub)
        assert hub.consumer(hub.stats(), "late")["dead_lettered"] == 0
        assert hub.stop() == 0, hub.log()
        assert re.search(r"connections; returned ([1-9]\d*), ", hub.log()), hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def consume_all(queue, count, first_deadline):
    """Every message of queue until count came (bodies' "i", in queue
    order), and how long the first took from the call."""
    conn, ch = channel()
    got, first = [], [None]
    start = time.monotonic()
    ch.basic_qos(prefetch_count=2000)

    def on_message(ch_, method, props, body):
        if first[0] is None:
            first[0] = time.monotonic() - start
        got.append(json.loads(body)["i"])

    ch.basic_consume(queue, on_message, auto_ack=True)
    try:
        while len(got) < count:
            conn.process_data_events(time_limit=0.2)
            waited = time.monotonic() - start
            assert got or waited < first_deadline, "nothing in %s after %.0f s" % (queue, waited)
            assert waited < fh.DEADLINE, "%s: %d of %d messages" % (queue, len(got), count)
    finally:
        conn.close()
    return got, first[0]


def test_backlog_released_once_routed():
    """Issue 39 item 9. 200 messages returned (312 NO_ROUTE) before any
    queue is bound, then 20,000: each returned message backing off on its
    own held everything behind it for a minute. The route's backoff now:
    once a probe is routed the backlog goes at once, in order."""
    node()
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n" % pub.endpoint
                 # The hub's retries as in a scale-out setup: backing off to a minute.
                 + bridge("burst", ["org.burst."], "exchange: amq.topic").replace(
                     "initial_ms: 10, max_ms: 100", "initial_ms: 100, max_ms: 60000")
                 + "    queue: {capacity: 30000}\n")
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("publishing to exchange")
        for i in range(200):
            pub.send("org.burst.x", '{"i":%d}' % i)
        hub.wait_log("returned by the broker (312 NO_ROUTE)")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "burst")["dequeued"] == 200,
                    "the 200 handed to the plugin", hub=hub)
        conn, ch = channel()
        ch.queue_declare("fm.burst", durable=True)
        ch.queue_bind("fm.burst", "amq.topic", "org.burst.#")
        conn.close()
        for i in range(200, 20200):
            pub.send("org.burst.x", '{"i":%d}' % i)
        got, first = consume_all("fm.burst", 20200, first_deadline=10)
        assert first < 10, first  # was over a minute
        assert got == list(range(20200)), "order lost: %r" % [
            (n, i) for n, i in enumerate(got) if n != i][:5]
        fh.wait_for(lambda: hub.consumer(hub.stats(), "burst")["completed"] == 20200,
                    "all confirmed", hub=hub)
        assert hub.consumer(hub.stats(), "burst")["retried"] == 0
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_options_refused():
    """fanhub check names each mistake of the new keys (no broker needed)."""
    if not fh.SHIPPED_PLUGINS:
        raise fh.Skip("the amqp plugin is not built (librabbitmq-dev)")
    wd = fh.Workdir()
    cases = [
        ("declare: true", "options.queue: required with declare: true"),
        ("envelope: fedora", "options.envelope"),
        ("envelope: fedora-messaging, severities: {org.: 99}",
         "options.severities.org.: expected a severity from 10 to 50"),
        ("envelope: fedora-messaging, schemas: [a]", "options.schemas: expected a map"),
        ("body: inner", "options.body"),
    ]
    for options, want in cases:
        path = wd.write("c.yaml", "bus:\n  connect: [tcp://127.0.0.1:9]\nconsumers:\n"
                        "  - name: b\n    plugin: amqp\n    options: {url: \"amqp://127.0.0.1\", "
                        "%s}\n" % options)
        status, _, err = fh.run(["check", "-c", path])
        assert status != 0 and want in err and "c.yaml:" in err, (options, err)
    path = wd.write("s.yaml", "bus:\n  amqp: {url: \"amqp://127.0.0.1\", queue: q, "
                    "envelope: fedmsg}\nconsumers:\n  - {name: c, plugin: log}\n")
    status, _, err = fh.run(["check", "-c", path])
    assert status == 2 and "bus.amqp.envelope: expected none or fedora-messaging" in err, err
    wd.cleanup()


if __name__ == "__main__":
    try:
        fh.main([test_options_refused, test_bridge_fedora_messaging_shape,
                 test_source_takes_fedora_messaging, test_nothing_lost_before_workers_declare,
                 test_backlog_released_once_routed])
    finally:
        if NODE is not None:
            NODE.stop()
