"""relay: a hub re-publishes what its relay consumer matches, and another
hub (or any SUB) receives exactly that, in order, with the topic prefix
rewritten and every other frame byte for byte.

The slow joiner is handled by the plugin, not by the test: with
`require_subscriber: true` the relay's socket is an XPUB that sees the
subscriptions arrive, and consume waits (subscriber_wait_ms) or answers
RETRY until a subscriber wants the message. Only
test_retries_hold_messages_until_a_subscriber relies on the hub's retries
(it sets the consumer's `retry:`); test_no_subscriber_without_retries
switches them off (max_attempts 1)."""
import base64
import json
import os
import sys

import zmq
import zmq.auth

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

FROM = "org.fedoraproject."
TO = "org.mirror."
TOPICS = [
    "org.fedoraproject.prod.buildsys.build.state.change",
    "io.pagure.prod.pagure.pull-request.new",
    "org.fedoraproject.stg.bodhi.update.comment",
    "org.centos.prod.buildsys.tag",
    "org.fedoraproject.prod.git.receive",
]


def body_of(i):
    if i % 97 == 0:
        return b"\xff\x00 binary \xfe " + str(i).encode()
    return b'{"i":%d,"msg":{"name":"pkg-%d"}}' % (i, i % 40)


def decoded_body(line):
    if "body_base64" in line:
        return base64.b64decode(line["body_base64"])
    return line["body"].encode()


def rewritten(topic):
    return TO + topic[len(FROM):] if topic.startswith(FROM) else topic


def relay_yaml(name, options, topics=None):
    text = "  - name: %s\n    plugin: relay\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    text += "    options: %s\n" % json.dumps(options)
    return text


def log_yaml(name, path, topics=None):
    text = "  - name: %s\n    plugin: log\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    text += "    queue: {capacity: 100000}\n"
    text += "    options: {path: %s, flush_ms: 20}\n" % json.dumps(path)
    return text


def test_hub_to_hub():
    """Publisher -> hub A (relay, topics org.fedoraproject.*, rewritten to
    org.mirror.) -> hub B (log). B logs exactly what A matched, in order."""
    n = 20000
    wd = fh.Workdir()
    pub = fh.Publisher()
    relay_port = fh.free_port()
    relay_endpoint = "tcp://127.0.0.1:%d" % relay_port
    # B first: it connects to A's relay before that exists (ZeroMQ keeps
    # trying), so the relay's first message waits for B's subscription.
    hub_b = fh.Hub(wd, "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n%s"
                   % (relay_endpoint, log_yaml("mirror", wd.file("b.jsonl"))), name="b")
    hub_a = None
    try:
        hub_b.wait_ready()
        hub_a = fh.Hub(wd, "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n%s%s"
                       % (pub.endpoint,
                          relay_yaml("relay", {"bind": relay_endpoint,
                                               "topic_prefix": {"from": FROM, "to": TO},
                                               "require_subscriber": True,
                                               "subscriber_wait_ms": 120000},
                                     topics=[FROM]),
                          log_yaml("matched", wd.file("a.jsonl"), topics=[FROM])),
                       name="a")
        hub_a.wait_ready()
        pub.wait_subscribed(hub=hub_a)
        for i in range(n):
            pub.send(TOPICS[i % len(TOPICS)], body_of(i))
        expected = [i for i in range(n) if TOPICS[i % len(TOPICS)].startswith(FROM)]
        fh.wait_for(lambda: fh.count_lines(wd.file("a.jsonl")) >= len(expected),
                    "hub A's log of what it matched", hub=hub_a)
        fh.wait_for(lambda: fh.count_lines(wd.file("b.jsonl")) >= len(expected),
                    "hub B to log %d relayed messages" % len(expected), hub=hub_b)
        assert hub_a.stop() == 0, hub_a.log()
        assert hub_b.stop() == 0, hub_b.log()

        matched = fh.read_jsonl(wd.file("a.jsonl"))
        mirrored = fh.read_jsonl(wd.file("b.jsonl"))
        assert len(matched) == len(expected), (len(matched), len(expected))
        assert len(mirrored) == len(expected), (len(mirrored), len(expected))
        for a, b, i in zip(matched, mirrored, expected):
            topic = TOPICS[i % len(TOPICS)]
            assert a["topic"] == topic, (i, a)
            assert b["topic"] == rewritten(topic), (i, b)
            assert decoded_body(a) == decoded_body(b) == body_of(i), (i, a, b)
        # Hub B numbers what it received: contiguous, nothing lost.
        assert [b["seq"] for b in mirrored] == list(range(1, len(expected) + 1))
        log_a = hub_a.log()
        assert "consumer 'relay': relaying on %s" % relay_endpoint in log_a, log_a
        assert ("consumer 'relay': enqueued %d, completed %d, failed 0"
                % (len(expected), len(expected))) in log_a, log_a
        assert "received %d, malformed 0, unrouted 0" % len(expected) in hub_b.log(), hub_b.log()
        wd.cleanup()
    finally:
        if hub_a:
            hub_a.kill()
        hub_b.kill()
        pub.close()


def test_frames_and_connect():
    """The relay connects to a SUB that binds; topics outside `from` pass
    unchanged; every frame after the topic arrives byte for byte."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    ctx = zmq.Context.instance()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.LINGER, 0)
    sub_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    sub.bind(sub_endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    messages = [
        [b"org.fedoraproject.prod.a", b"body 1"],
        [b"org.fedoraproject.", b"the prefix and nothing else"],
        [b"io.pagure.prod.x", b"unchanged topic", b"extra"],
        [b"org.fedoraproject.prod.b", b"", b"", b"\x00\x01\x02" * 1000, b"last"],
        [b"org.fedoraproject.prod.c", bytes(range(256)) * 4096],  # 1 MiB
        [b"org.fedoraproject.prod.\xc3\xa9", b"utf-8 topic"],
    ]
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n%s"
                 % (pub.endpoint,
                    relay_yaml("relay", {"connect": [sub_endpoint],
                                         "topic_prefix": {"from": FROM, "to": TO},
                                         "require_subscriber": True,
                                         "subscriber_wait_ms": 120000},
                               topics=[FROM, "io.pagure."])))
    try:
        pub.wait_subscribed(hub=hub)
        for frames in messages:
            pub.sock.send_multipart(frames)
        got = []
        for _ in messages:
            if not sub.poll(int(fh.DEADLINE * 1000)):
                raise AssertionError("relay sent %d of %d:\n%s"
                                     % (len(got), len(messages), hub.log()))
            got.append(sub.recv_multipart())
        for sent, received in zip(messages, got):
            topic = sent[0].decode()
            assert received[0] == rewritten(topic).encode(), (sent[0], received[0])
            assert received[1:] == sent[1:], (sent[0], len(received))
        assert hub.stop() == 0, hub.log()
        assert "consumer 'relay': relaying to %s" % sub_endpoint in hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()
        sub.close()


def relay_with_retry_yaml(endpoint, retry):
    return ("  - name: relay\n    plugin: relay\n    retry: %s\n    options: %s\n"
            % (retry, json.dumps({"bind": endpoint, "require_subscriber": True})))


def test_retries_hold_messages_until_a_subscriber():
    """The point of require_subscriber: with the hub's retries, messages
    published before anyone subscribed to the relay are not lost. The
    first is answered RETRY (logged once) and retried at the head of the
    queue until a subscriber comes; then all arrive, in order.
    Needs the hub's retry machinery (consumer `retry:`)."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    relay_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n%s"
                 % (pub.endpoint, relay_with_retry_yaml(
                     relay_endpoint, "{max_attempts: 1000000, initial_ms: 5, max_ms: 50}")))
    sub = None
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(3):
            pub.send("org.x.%d" % i, "%d" % i)
        hub.wait_log("consumer 'relay': no subscriber wants org.x.0 yet; "
                     "answering RETRY until one does (logged once)")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "relay")["retried"] >= 3,
                    "the relay's first message retried", hub=hub)
        assert hub.consumer(hub.stats(), "relay")["completed"] == 0

        sub = zmq.Context.instance().socket(zmq.SUB)
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.RCVHWM, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"org.")
        sub.connect(relay_endpoint)
        for i in range(3, 203):
            pub.send("org.x.%d" % i, "%d" % i)
        received = []
        while len(received) < 203:
            if not sub.poll(int(fh.DEADLINE * 1000)):
                raise AssertionError("got %d:\n%s" % (len(received), hub.log()))
            topic, body = sub.recv_multipart()
            assert topic == b"org.x." + body, (topic, body)
            received.append(int(body))
        assert received == list(range(203)), received
        hub.wait_log("consumer 'relay': a subscriber is here; ")
        assert hub.log().count("no subscriber wants") == 1, hub.log()
        stats = hub.consumer(hub.stats(), "relay")
        assert stats["completed"] == 203 and stats["failed"] == 0, stats
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()
        if sub is not None:
            sub.close()


def test_no_subscriber_without_retries():
    """Without retries (max_attempts 1) a message nobody wants fails; the
    relay logs that once per streak and the hub carries on."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    relay_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n%s"
                 % (pub.endpoint, relay_with_retry_yaml(relay_endpoint, "{max_attempts: 1}")))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(5):
            pub.send("org.x.%d" % i, "nobody")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "relay")["failed"] >= 5,
                    "five failed", hub=hub)
        stats = hub.consumer(hub.stats(), "relay")
        assert stats["completed"] == 0 and stats["retried"] == 0, stats
        log = hub.log()
        assert log.count("no subscriber wants") == 1, log
        assert "no subscriber wants org.x.0 yet" in log, log
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_plain_pub_drops_without_subscriber():
    """The default (require_subscriber false) is PUB: with nobody listening
    a message is completed and gone, as ZeroMQ's PUB does."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n%s"
                 % (pub.endpoint,
                    relay_yaml("relay", {"bind": "tcp://127.0.0.1:*",
                                         "sndhwm": 1000, "linger_ms": 0})))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(50):
            pub.send("org.x", "%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "relay")["completed"] >= 50,
                    "50 completed", hub=hub)
        assert hub.stop() == 0, hub.log()
        # A wildcard port is logged as the port it became.
        assert "consumer 'relay': relaying on tcp://127.0.0.1:" in hub.log()
        assert "relaying on tcp://127.0.0.1:*" not in hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_option_errors():
    """`fanhub check` refuses bad relay options with FILE:LINE:COL; a port
    in use is found by `fanhub run` (check binds nothing)."""
    wd = fh.Workdir()
    busy = zmq.Context.instance().socket(zmq.PUB)
    busy.setsockopt(zmq.LINGER, 0)
    busy_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    busy.bind(busy_endpoint)
    bus = "bus:\n  connect: [tcp://127.0.0.1:%d]\nconsumers:\n" % fh.free_port()
    cases = [
        ({"bind": "tcp://127.0.0.1:1", "connect": "tcp://127.0.0.1:2"},
         "options.connect: give bind or connect, not both"),
        ({}, "options: relay needs bind or connect: where to publish"),
        ({"bind": []}, "options.bind: expected at least one endpoint, got an empty list"),
        ({"bind": "tcp://127.0.0.1:1", "colour": "red"},
         "options.colour: unknown option; relay takes bind, connect"),
        ({"connect": ["tcp://127.0.0.1:1", "tcp://127.0.0.1"]},
         "options.connect[1]: expected a ZeroMQ endpoint, got \"tcp://127.0.0.1\": "
         "expected tcp://HOST:PORT"),
        ({"bind": "tcp://127.0.0.1:70000"},
         "options.bind: expected a ZeroMQ endpoint, got \"tcp://127.0.0.1:70000\": "
         "expected a port from 1 to 65535"),
        ({"bind": "tpc://127.0.0.1:1"},
         "options.bind: expected a ZeroMQ endpoint, got \"tpc://127.0.0.1:1\": "
         "unsupported transport 'tpc'"),
        ({"bind": "tcp://127.0.0.1:1", "sndhwm": -1},
         "options.sndhwm: expected an integer from 0 to 2147483647, got \"-1\""),
        ({"bind": "tcp://127.0.0.1:1", "linger_ms": "soon"},
         "options.linger_ms: expected an integer from -1 to 3600000, got \"soon\""),
        ({"bind": "tcp://127.0.0.1:1", "require_subscriber": "yes"},
         "options.require_subscriber: expected true or false, got \"yes\""),
        ({"bind": "tcp://127.0.0.1:1", "topic_prefix": "org."},
         "options.topic_prefix: expected a map {from, to}, got \"org.\""),
        ({"bind": "tcp://127.0.0.1:1", "topic_prefix": {"from": "org."}},
         "options.topic_prefix.to: missing"),
        ({"bind": "tcp://127.0.0.1:1", "topic_prefix": {"from": "a", "to": "b", "x": "c"}},
         "options.topic_prefix.x: unknown key"),
    ]
    try:
        for options, part in cases:
            path = wd.write("relay.yaml", bus + relay_yaml("relay", options))
            status, out, err = fh.run(["check", "-c", path])
            assert status == 2, (options, status, err)
            assert part in err, (options, part, err)
            assert "relay.yaml:" in err, err
        # The port in use: check passes it, run refuses it at start.
        path = wd.write("busy.yaml", bus + relay_yaml("relay", {"bind": busy_endpoint}))
        status, out, err = fh.run(["check", "-c", path])
        assert status == 0, err
        status, out, err = fh.run(["run", "-c", path])
        assert status == 2, (status, err)
        assert "options.bind: %s: cannot bind: Address already in use" % busy_endpoint in err, err
        good = wd.write("good.yaml", bus + relay_yaml(
            "relay", {"bind": ["tcp://127.0.0.1:*", "ipc://" + wd.file("r.sock")],
                      "topic_prefix": {"from": "", "to": "mirror."},
                      "sndhwm": 0, "linger_ms": -1, "require_subscriber": False,
                      "subscriber_wait_ms": 0}))
        status, out, err = fh.run(["check", "-c", good])
        assert status == 0, err
        # The shipped example is valid, on a free port and a temp log.
        with open(os.path.join(fh.SOURCE_DIR, "config/examples/relay.yaml")) as f:
            example = f.read()
        assert "tcp://*:9941" in example and "path: relayed.jsonl" in example
        example = example.replace("tcp://*:9941", "tcp://127.0.0.1:%d" % fh.free_port())
        example = example.replace("path: relayed.jsonl", "path: " + wd.file("relayed.jsonl"))
        status, out, err = fh.run(["check", "-c", wd.write("example.yaml", example)])
        assert status == 0, err
        wd.cleanup()
    finally:
        busy.close()

def test_curve_key_file_errors():
    """The relay reads its CURVE key pair with CZMQ's zcert and refuses a
    secret file others may read, a public-only file and a file that is no
    zcert at all; a good pair passes `fanhub check`."""
    wd = fh.Workdir()
    path = wd.file("relay")
    status, out, err = fh.run(["keygen", path])
    assert status == 0, err
    secret = path + "_secret"
    public_key = zmq.auth.load_certificate(secret)[0].decode()
    garbage = wd.write("garbage", "not a certificate\n")
    os.chmod(garbage, 0o600)
    os.chmod(path, 0o600)  # the public half, made private: its mode passes
    bus = "bus:\n  connect: [tcp://127.0.0.1:%d]\nconsumers:\n" % fh.free_port()

    def check(curve, bind=True):
        options = {"bind" if bind else "connect": "tcp://127.0.0.1:1", "curve": curve}
        config = wd.write("curve.yaml", bus + relay_yaml("relay", options))
        return fh.run(["check", "-c", config])

    status, out, err = check({"secret_key_file": secret, "allow": [public_key]})
    assert status == 0, err
    status, out, err = check({"secret_key_file": secret, "server_public_key": public_key},
                             bind=False)
    assert status == 0, err
    os.chmod(secret, 0o644)
    status, out, err = check({"secret_key_file": secret, "allow": [public_key]})
    assert status == 2 and "options.curve.secret_key_file: secret key file %s: mode 0644 " \
        "lets other users read or change it; refusing it (chmod 600 %s)" % (secret, secret) \
        in err, err
    os.chmod(secret, 0o600)
    status, out, err = check({"secret_key_file": path, "allow": [public_key]})
    assert status == 2 and "secret key file %s: holds no curve/secret-key" % path in err, err
    status, out, err = check({"secret_key_file": garbage, "allow": [public_key]})
    assert status == 2 and "secret key file %s: not a zcert file" % garbage in err, err
    bad_keys = wd.write("bad_keys", "curve\n    public-key = \"short\"\n"
                                    "    secret-key = \"short\"\n")
    os.chmod(bad_keys, 0o600)
    status, out, err = check({"secret_key_file": bad_keys, "allow": [public_key]})
    assert status == 2 and "secret key file %s: the keys are not 40-character Z85 text" \
        % bad_keys in err, err
    status, out, err = check({"secret_key_file": secret, "allow": ["short"]})
    assert status == 2 and "options.curve.allow[0]: expected a CurveZMQ public key" in err, err
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_hub_to_hub, test_frames_and_connect,
             test_retries_hold_messages_until_a_subscriber,
             test_no_subscriber_without_retries,
             test_plain_pub_drops_without_subscriber, test_option_errors,
             test_curve_key_file_errors])
