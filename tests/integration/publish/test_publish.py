#!/usr/bin/python3
"""A consumer puts messages on the bus (issue 37): host->publish (ABI 1.5)
onto its `publish:` endpoints, as fedmsg-hub consumers did.

The republish test plugin publishes each message it consumes; pyzmq is the
independent subscriber, Python's `cryptography` the independent checker
of a signed fedmsg envelope (test_fedmsg.py's PKI and checker), and a
worker written inline (test_worker_protocol.py's) sends PUBLISH frames.
A bound `tcp://127.0.0.1:*` endpoint is read back from STATS, never
guessed.
"""
import json
import os
import re
import sys
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import test_fedmsg as fedmsg
import test_worker_protocol as wp
import test_worker_upstream as upstream

REPUBLISH = fh.TEST_PLUGINS + "/republish.so"


def republish_yaml(name, topics, publish, options="{}"):
    return ("  - name: %s\n    plugin: %s\n    topics: %s\n    options: %s\n    publish: %s\n"
            % (name, REPUBLISH, fh.yaml_list(topics), options, publish))


def start(wd, consumers, cleanup):
    """A hub on a pyzmq publisher with these consumers, subscribed."""
    pub = cleanup.add(fh.Publisher())
    hub = cleanup.add(fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n%s" % (pub.endpoint, consumers)))
    pub.wait_subscribed(hub=hub)
    hub.wait_ready()
    return hub, pub


def subscriber(hub, name, cleanup):
    """A SUB on the consumer's bound endpoint, from STATS."""
    endpoints = hub.consumer(hub.stats(), name)["publish_endpoints"]
    assert len(endpoints) == 1 and re.match(r"^tcp://127\.0\.0\.1:\d+$", endpoints[0]), endpoints
    assert endpoints[0] != "tcp://127.0.0.1:*"
    sub = cleanup.add(zmq.Context.instance().socket(zmq.SUB))
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.connect(endpoints[0])
    return sub, endpoints[0]


def joined(pub, sub, topic="in.probe", body="{}"):
    """Sends probes until the SUB gets one (PUB/SUB's slow joiner): the
    subscription has reached the hub's socket. Returns how many went."""
    sent = 0
    end = time.monotonic() + fh.DEADLINE
    while True:
        assert time.monotonic() < end, "no probe came through"
        pub.send(topic, body)
        sent += 1
        if sub.poll(100):
            sub.recv_multipart()
            while sub.poll(200):
                sub.recv_multipart()
            return sent


def test_bind_reaches_a_subscriber():
    """publish: {bind: tcp://127.0.0.1:*}: the port libzmq chose is in
    STATS and the log; each relayed message reaches a pyzmq SUB in
    order, body unchanged; published counts them."""
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, republish_yaml("r", ["in."], "{bind: tcp://127.0.0.1:*}"), cleanup)
        sub, endpoint = subscriber(hub, "r", cleanup)
        hub.wait_log("consumer 'r': publishing on %s" % endpoint)
        probes = joined(pub, sub)
        for i in range(20):
            pub.send("in.%d" % i, '{"n":%d}' % i)
        got = [sub.recv_multipart() for _ in range(20) if sub.poll(int(fh.DEADLINE * 1000))]
        assert got == [[b"in.%d.relayed" % i, b'{"n":%d}' % i] for i in range(20)], got
        c = hub.consumer(hub.stats(), "r")
        assert c["published"] == probes + 20 and c["publish_failed"] == 0, c
        status, out, _ = fh.run(["stats", "-c", hub.config, "--format", "prometheus"])
        assert status == 0 and 'fanhub_consumer_published_total{consumer="r"} %d' % (probes + 20) in out, out
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_fedmsg_envelope_signed():
    """envelope: fedmsg with sign: each body is wrapped as fedmsg did and
    signed; the signature verifies with an independent implementation. A
    body that is not JSON is dropped, counted and said why."""
    fedmsg.need_tools()
    wd = fh.Workdir()
    fedmsg.make_ca(wd, "ca")
    fedmsg.make_signer(wd, "ca", "alice")
    publish = ("{bind: tcp://127.0.0.1:*, envelope: fedmsg, sign: {cert: %s, key: %s}}"
               % (wd.file("alice.crt"), wd.file("alice.key")))
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, republish_yaml("r", ["in."], publish), cleanup)
        sub, _ = subscriber(hub, "r", cleanup)
        probes = joined(pub, sub)
        before = int(time.time())
        pub.send("in.build", '{"build_id":7,"owner":"me"}')
        assert sub.poll(int(fh.DEADLINE * 1000))
        topic, data = sub.recv_multipart()
        msg = json.loads(data)
        assert topic == b"in.build.relayed" and msg["topic"] == "in.build.relayed", msg
        assert msg["msg"] == {"build_id": 7, "owner": "me"} and msg["i"] == probes + 1, msg
        assert fedmsg.ID_RE.match(msg["msg_id"]) and msg["timestamp"] >= before, msg
        assert msg["crypto"] == "x509" and fedmsg.py_verify(msg) == "alice"
        assert data == fedmsg.dumps(msg).encode()
        pub.send("in.text", "not json")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "r")["publish_failed"] == 1,
                    "publish_failed", hub=hub)
        hub.wait_log("consumer 'r': publish: a message on 'in.text.relayed' is dropped: the body "
                     "is not JSON")
        assert hub.consumer(hub.stats(), "r")["published"] == probes + 1
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_local_reaches_the_hubs_consumers():
    """local: true (here without an endpoint): another consumer of the
    same hub gets what the relay publishes."""
    wd = fh.Workdir()
    out = wd.file("out.jsonl")
    consumers = (republish_yaml("r", ["in."], "{local: true}", "{prefix: out.}")
                 + "  - name: seen\n    plugin: log\n    topics: [out.]\n"
                 "    options: {path: %s, flush_ms: 20}\n" % json.dumps(out))
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, consumers, cleanup)
        for i in range(5):
            pub.send("in.%d" % i, '{"n":%d}' % i)
        fh.wait_for(lambda: fh.count_lines(out) == 5, "5 lines", hub=hub)
        lines = fh.read_jsonl(out)
        assert [line["topic"] for line in lines] == ["out.in.%d.relayed" % i for i in range(5)], lines
        stats = hub.stats()
        assert hub.consumer(stats, "r")["published"] == 5
        assert hub.consumer(stats, "seen")["completed"] == 5
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_connect_down_holds_within_queue():
    """publish: {connect: ...} to a relay that is down: queue messages are
    held (published), the rest refused (publish_failed), the consumer
    never waits; once the relay's SUB binds, the held ones reach it."""
    wd = fh.Workdir()
    endpoint = "ipc://" + wd.file("relay.ipc")  # down: nothing is bound there yet
    consumers = republish_yaml("r", ["in."], "{connect: %s, queue: 5}" % endpoint, "{repeat: 8}")
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, consumers, cleanup)
        pub.send("in.x", '{"a":1}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "r")["completed"] == 1, "consumed", hub=hub)
        c = hub.consumer(hub.stats(), "r")
        assert c["published"] == 5 and c["publish_failed"] == 3, c
        assert c["publish_endpoints"] == [endpoint], c
        hub.wait_log("no subscriber, and publish.queue messages are held already")
        relay = cleanup.add(zmq.Context.instance().socket(zmq.SUB))
        relay.setsockopt(zmq.LINGER, 0)
        relay.setsockopt(zmq.SUBSCRIBE, b"")
        relay.bind(endpoint)
        got = [relay.recv_multipart() for _ in range(5) if relay.poll(int(fh.DEADLINE * 1000))]
        assert got == [[b"in.x.relayed", b'{"a":1}']] * 5, got
        assert not relay.poll(300)
        c = hub.consumer(hub.stats(), "r")
        assert c["published"] == 5 and c["publish_failed"] == 3, c
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_reload_replaces_the_publisher():
    """A reload that changes publish: replaces the consumer: the old
    instance's socket is closed before the new one binds, so the new one
    takes the very port the old one held (from STATS), with its new
    envelope."""
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, republish_yaml("r", ["in."], "{bind: tcp://127.0.0.1:*}"), cleanup)
        sub, endpoint = subscriber(hub, "r", cleanup)
        joined(pub, sub)
        with open(hub.config, "w") as f:
            f.write("bus:\n  connect: [%s]\nconsumers:\n%scontrol: %s\n"
                    % (pub.endpoint, republish_yaml("r", ["in."], "{bind: %s, envelope: fedmsg}"
                                                     % endpoint), hub.control))
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, (status, out, err)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "r").get("publish_endpoints") == [endpoint]
                    and "consumer 'r': the new instance runs" in hub.log(), "the new instance",
                    hub=hub)
        end = time.monotonic() + fh.DEADLINE
        while True:  # the SUB reconnects by itself
            assert time.monotonic() < end, "nothing from the new instance"
            pub.send("in.again", '{"k":1}')
            if sub.poll(100):
                topic, data = sub.recv_multipart()
                if data.startswith(b'{"i":'):
                    break
        msg = json.loads(data)
        assert topic == b"in.again.relayed" and msg["msg"] == {"k": 1}, msg
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


PUBLISHER = ("    topic = b'in.' + p[-1:] + b'.worked'\n"
             "    os.write(fd, frame(b'P', struct.pack('>H', len(topic)) + topic + b'{\"w\":1}'))\n"
             "    os.write(fd, frame(b'A', struct.pack('>QBH', ticket, 0, 0)))")


def test_worker_publish_frame():
    """A worker's PUBLISH frame (protocol 2) reaches the SUB; from a worker
    whose READY said protocol 1 it is a protocol error."""
    wd = fh.Workdir()
    options = wp.worker_options(PUBLISHER, protocol=2)
    consumers = ("  - name: w\n    plugin: worker\n    topics: [job.]\n    options: %s\n"
                 "    publish: {bind: tcp://127.0.0.1:*}\n" % options)
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, consumers, cleanup)
        sub, _ = subscriber(hub, "w", cleanup)
        probes = joined(pub, sub, "job.p", "0")
        for i in range(3):
            pub.send("job.%d" % i, str(i))
        got = [sub.recv_multipart() for _ in range(3) if sub.poll(int(fh.DEADLINE * 1000))]
        assert got == [[b"in.%d.worked" % i, b'{"w":1}'] for i in range(3)], got
        c = hub.consumer(hub.stats(), "w")
        assert c["published"] == probes + 3 and c["restarts"] == 0, c
        assert hub.stop() == 0, hub.log()
    wp.killed_for(PUBLISHER, "worker 0: protocol error: a PUBLISH from a worker whose READY "
                  "spoke protocol 1 (PUBLISH is protocol 2); killed")
    wd.cleanup()


def test_config_refusals():
    """publish: keys are checked with FILE:LINE:COL: an unknown key, no
    endpoint, sign without the fedmsg envelope."""
    wd = fh.Workdir()
    cases = [("{bind: tcp://127.0.0.1:*, colour: red}", "consumers[0].publish.colour: unknown key (known: bind, connect, envelope, sign, local, queue)"),
             ("{queue: 5}", "expected at least one endpoint in bind: or connect:, or local: true"),
             ("{bind: tcp://127.0.0.1:*, sign: {cert: a, key: b}}",
              "a signature is part of fedmsg's envelope: give envelope: fedmsg")]
    for publish, expect in cases:
        path = wd.write("p.yaml", "bus: {connect: [tcp://127.0.0.1:1]}\nconsumers:\n"
                        + republish_yaml("r", ["in."], publish))
        status, _, err = fh.run(["check", "-c", path])
        assert status != 0 and expect in err and re.search(r"p\.yaml:\d+:\d+: ", err), err
    wd.cleanup()


def test_a_python_relay_publishes_signed():
    """fedmsg's relay as a Python consumer (the upstream stand-ins: a
    FedmsgConsumer calling self.send_message) under a real hub, publish:
    with the fedmsg envelope and a signature: what it sends on reaches a
    pyzmq SUB wrapped, signed, and verified by Python's cryptography."""
    fedmsg.need_tools()
    wd = fh.Workdir()
    fedmsg.make_ca(wd, "ca")
    fedmsg.make_signer(wd, "ca", "relay")
    consumer = ("  - name: relay\n    plugin: python\n    topics: [org.test.]\n"
                "    options: {callable: \"upstream_consumers:Relay\", path: %s,"
                " config: {relay.enabled: true}}\n"
                "    publish: {bind: tcp://127.0.0.1:*, envelope: fedmsg,"
                " sign: {cert: %s, key: %s}}\n"
                % (upstream.PATHS, wd.file("relay.crt"), wd.file("relay.key")))
    with fh.Cleanup() as cleanup:
        hub, pub = start(wd, consumer, cleanup)
        sub, _ = subscriber(hub, "relay", cleanup)
        probes = joined(pub, sub, topic="org.test.probe", body='{"msg": {}}')
        # A NUL inside a string is JSON (fedmsg accepts it): the runner
        # reads it and the hub wraps and signs it, byte-exact for fedmsg.
        body = {"topic": "org.test.build", "msg": {"build_id": 7, "owner": "\u00e9\u0000x"},
                "msg_id": "2026-x"}
        pub.send("org.test.build", json.dumps(body))
        assert sub.poll(int(fh.DEADLINE * 1000)), hub.log()[-3000:]
        topic, data = sub.recv_multipart()
        msg = json.loads(data)
        assert topic == b"relayed.org.test.build" and msg["topic"] == "relayed.org.test.build", msg
        assert msg["msg"] == body and msg["i"] == probes + 1, msg
        assert msg["crypto"] == "x509" and fedmsg.py_verify(msg) == "relay"
        assert data == fedmsg.dumps(msg).encode()
        c = hub.consumer(hub.stats(), "relay")
        assert c["published"] == probes + 1 and c["publish_failed"] == 0, c
        assert c["completed"] == probes + 1 and c["failed"] == 0, c
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_bind_reaches_a_subscriber, test_fedmsg_envelope_signed,
             test_local_reaches_the_hubs_consumers, test_connect_down_holds_within_queue,
             test_reload_replaces_the_publisher,
             test_worker_publish_frame, test_a_python_relay_publishes_signed,
             test_config_refusals])
