"""Routing: three `log` consumers (a prefix pattern, a `*` pattern, no
pattern) behind a real `fanhub run`, fed 100,000 messages of mixed topics by
an independent pyzmq publisher. Each consumer's file must hold exactly the
messages its patterns match, in publish order, none missing or doubled,
every body byte-exact (JSON escapes and base64 included). Also: unrouted
topics are counted, and IPv6 literals work in bus.connect and bus.bind."""
import base64
import fnmatch
import json

import zmq

import fanhublib as fh

N = 100_000
TOPICS = [
    "org.fedoraproject.prod.buildsys.build.state.change",
    "org.fedoraproject.prod.git.receive",
    "org.fedoraproject.stg.buildsys.tag",
    "io.pagure.prod.pagure.pull-request.new",
    "org.centos.prod.buildsys.build.state.change",
    "org.release-monitoring.prod.anitya.project.version.update",
    "org.fedoraproject.prod.bodhi.update.comment",
    "fedoracollege.media.new",
]


def body_of(i):
    if i % 997 == 0:
        return b"\xff\xfe not UTF-8 " + str(i).encode()  # -> body_base64
    if i % 101 == 0:
        return ('{"i":%d,"text":"quote \\" backslash \\\\ tab\t nl\n ctrl\x01 é ✓"}' % i).encode()
    return b'{"i":%d,"msg":{"owner":"someone","name":"pkg-%d"}}' % (i, i % 50)


def decoded_body(line):
    if "body_base64" in line:
        return base64.b64decode(line["body_base64"])
    return line["body"].encode()


def test_routing_three_consumers():
    wd = fh.Workdir()
    pub = fh.Publisher()
    consumers = {
        "prefix": ["org.fedoraproject.prod."],
        "glob": ["*.buildsys.*"],
        "everything": None,
    }
    config = "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n" % pub.endpoint
    for name, topics in consumers.items():
        config += "  - name: %s\n    plugin: log\n" % name
        if topics:
            config += "    topics: %s\n" % fh.yaml_list(topics)
        config += "    queue: {capacity: %d}\n" % (N + 10)
        config += "    options: {path: %s, flush_ms: 50}\n" % json.dumps(wd.file(name + ".jsonl"))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(N):
            pub.send(TOPICS[i % len(TOPICS)], body_of(i))

        def matches(name, topic):
            topics = consumers[name]
            if topics is None:
                return True
            return any(fnmatch.fnmatchcase(topic, p) if "*" in p else topic.startswith(p)
                       for p in topics)

        expected = {name: [i for i in range(N) if matches(name, TOPICS[i % len(TOPICS)])]
                    for name in consumers}
        for name in consumers:
            fh.wait_for(lambda: fh.count_lines(wd.file(name + ".jsonl")) >= len(expected[name]),
                        "consumer %s to write %d lines" % (name, len(expected[name])), hub=hub)
        assert hub.stop() == 0, hub.log()

        for name in consumers:
            lines = fh.read_jsonl(wd.file(name + ".jsonl"))
            assert len(lines) == len(expected[name]), (name, len(lines), len(expected[name]))
            last_seq = 0
            for line, i in zip(lines, expected[name]):
                assert line["topic"] == TOPICS[i % len(TOPICS)], (name, i, line)
                assert decoded_body(line) == body_of(i), (name, i, line)
                # The hub numbers every message it accepts, so seq is i + 1.
                assert line["seq"] == i + 1, (name, i, line["seq"])
                assert line["seq"] > last_seq
                last_seq = line["seq"]
                assert line["received_at"].endswith("Z") and len(line["received_at"]) == 27
        log = hub.log()
        assert "received %d, malformed 0, unrouted 0" % N in log, log
        for name in consumers:
            assert ("consumer '%s': enqueued %d, completed %d, failed 0, dropped 0"
                    % (name, len(expected[name]), len(expected[name]))) in log, log
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_unrouted_counted():
    """The SUB subscription is a prefix; a topic it lets through that no
    consumer's glob matches is counted as unrouted, not lost silently."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: glob\n    plugin: log\n    topics: ['org.*.receive']\n"
              "    options: {path: %s, flush_ms: 0}\n" % (pub.endpoint, json.dumps(wd.file("g.jsonl"))))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(10):
            pub.send("org.x.receive" if i % 2 else "org.x.send", "%d" % i)
        fh.wait_for(lambda: fh.count_lines(wd.file("g.jsonl")) >= 5, "5 routed lines", hub=hub)
        assert hub.stop() == 0
        assert "received 10, malformed 0, unrouted 5" in hub.log(), hub.log()
        assert [l["body"] for l in fh.read_jsonl(wd.file("g.jsonl"))] == ["1", "3", "5", "7", "9"]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_ipv6_bus_endpoints():
    """An IPv6 literal in bus.connect and bus.bind works: libzmq needs
    ZMQ_IPV6 on the socket for it, or it never connects, silently."""
    if not fh.have_ipv6_loopback():
        print("  (no IPv6 loopback here: skipped)")
        return
    wd = fh.Workdir()
    pub = fh.Publisher(ipv6=True)
    bind_port = fh.free_port()
    config = ("bus:\n  connect: [\"%s\"]\n  bind: [\"tcp://[::1]:%d\"]\nconsumers:\n"
              "  - name: all\n    plugin: log\n    options: {path: %s, flush_ms: 0}\n"
              % (pub.endpoint, bind_port, json.dumps(wd.file("all.jsonl"))))
    hub = fh.Hub(wd, config)
    pusher = zmq.Context.instance().socket(zmq.PUB)
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("org.v6.connect", "c")
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= 1, "the connected message",
                    hub=hub)
        # The bound side: a publisher connecting to the hub over IPv6. PUB
        # drops until the subscription has arrived, so send until it lands.
        pusher.setsockopt(zmq.IPV6, 1)
        pusher.setsockopt(zmq.LINGER, 0)
        pusher.connect("tcp://[::1]:%d" % bind_port)

        def bound_delivered():
            pusher.send_multipart([b"org.v6.bind", b"b"])
            return any(l["topic"] == "org.v6.bind" for l in fh.read_jsonl(wd.file("all.jsonl")))
        fh.wait_for(bound_delivered, "a message through bus.bind over IPv6", hub=hub)
        endpoints = hub.stats()["hub"]["endpoints"]
        assert [e["connected"] for e in endpoints] == [True, True], endpoints
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        pusher.close()
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_routing_three_consumers, test_unrouted_counted, test_ipv6_bus_endpoints])
