"""moksha.hub-shaped monitoring (metrics.moksha_socket), against a real
`fanhub run`, read the way fedmsg-check reads it: a pyzmq SUB on the
socket, one JSON frame per message (moksha's MonitoringProducer sends
json.dumps of {"consumers": [...], "producers": [...]} as one frame).

A blocked consumer (the sleep test plugin with a release file) and a fast
one get N messages. Every message is checked field by field; over the
messages, the per-interval deltas add up: headcount_in to N for both,
headcount_out to N for the fast one at once and for the blocked one after
the release, while the blocked one's backlog reaches N-1 (one message is
inside consume). Waits are for conditions, with deadlines; nothing asserts
how long anything took.
"""
import json
import os
import socket
import stat
import sys

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

FIELDS = ["name", "module", "topic", "initialized", "exceptions", "jsonify", "backlog",
          "headcount_out", "headcount_in", "times"]


class Monitor:
    """A SUB on the moksha socket that checks every message it reads and
    keeps the sum of every consumer's deltas."""

    def __init__(self, endpoint, expect):
        self.expect = expect  # {name: (module suffix, topic)}
        self.sock = zmq.Context.instance().socket(zmq.SUB)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.SUBSCRIBE, b"")
        self.sock.connect(endpoint)
        self.reset()

    def reset(self):
        self.sums = {name: {"headcount_in": 0, "headcount_out": 0, "exceptions": 0, "times": 0}
                     for name in self.expect}
        self.last = None
        self.count = 0

    def read(self, hub):
        """One message (waiting for it, with the hub's deadline), checked."""
        def ready():
            return self.sock.poll(100)
        fh.wait_for(ready, "a monitoring message", hub=hub)
        frames = self.sock.recv_multipart()
        assert len(frames) == 1, "expected one frame, got %d" % len(frames)
        message = json.loads(frames[0].decode("utf-8"))
        self.check(message)
        self.last = {c["name"]: c for c in message["consumers"]}
        self.count += 1
        for name, entry in self.last.items():
            for key in ("headcount_in", "headcount_out", "exceptions"):
                self.sums[name][key] += entry[key]
            self.sums[name]["times"] += len(entry["times"])
        return self.last

    def check(self, message):
        assert isinstance(message, dict) and sorted(message) == ["consumers", "producers"], message
        assert message["producers"] == [], message
        consumers = message["consumers"]
        assert [c["name"] for c in consumers] == list(self.expect), consumers
        for c in consumers:
            assert list(c) == FIELDS, "fields (in moksha's order): %r" % list(c)
            suffix, topic = self.expect[c["name"]]
            assert isinstance(c["module"], str) and c["module"].endswith(suffix), c
            assert c["topic"] == topic, c
            assert c["initialized"] is True and c["jsonify"] is True, c
            for key in ("exceptions", "backlog", "headcount_out", "headcount_in"):
                assert type(c[key]) is int and c[key] >= 0, (key, c)
            times = c["times"]
            assert isinstance(times, list) and len(times) <= 1024, c
            assert all(type(t) is float and t >= 0 for t in times), times
            assert times == sorted(times), "times are in bucket order: %r" % times

    def close(self):
        self.sock.close()


def test_blocked_and_fast_consumers():
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")
    sock_path = wd.file("moksha.sock")
    plugins = fh.TEST_PLUGINS
    config = ("bus:\n  connect: [%s]\n"
              "metrics:\n  moksha_socket: \"ipc://%s\"\n  moksha_interval: 1\n"
              "consumers:\n"
              "  - name: blocked\n    plugin: %s/sleep.so\n    topics: [org.]\n"
              "    options: {release_file: %s}\n"
              "  - name: fast\n    plugin: \"null\"\n") % (pub.endpoint, sock_path, plugins,
                                                         release)
    hub = fh.Hub(wd, config)
    monitor = None
    try:
        hub.wait_log("moksha: publishing monitoring on ipc://" + sock_path)
        mode = stat.S_IMODE(os.stat(sock_path).st_mode)
        assert mode == 0o660, "socket mode %o" % mode
        monitor = Monitor("ipc://" + sock_path, {"blocked": ("/sleep.so", "org."),
                                                 "fast": ("/null.so", "*")})

        def subscribed():
            return pub.sock.poll(100)
        fh.wait_for(subscribed, "the hub to subscribe", hub=hub)
        pub.sock.recv()
        # The monitor reads from here on: what the hub counts from now is in
        # the messages after this one.
        first = monitor.read(hub)
        assert first["blocked"]["backlog"] == 0 and first["fast"]["backlog"] == 0, first
        monitor.reset()

        n = 25
        for i in range(n):
            pub.send("org.example.topic", b'{"i": %d}' % i)

        # The fast one takes all of them; the blocked one holds one inside
        # consume and queues the rest.
        def held():
            last = monitor.read(hub)
            return (monitor.sums["fast"]["headcount_in"] == n
                    and monitor.sums["fast"]["headcount_out"] == n
                    and monitor.sums["fast"]["times"] == n
                    and monitor.sums["blocked"]["headcount_in"] == n
                    and last["blocked"]["backlog"] == n - 1)
        fh.wait_for(held, "fast done, blocked backlog %d" % (n - 1), hub=hub)
        assert monitor.sums["blocked"]["headcount_out"] == 1, monitor.sums
        assert monitor.sums["blocked"]["times"] == 0, monitor.sums

        with open(release, "w"):
            pass

        def drained():
            last = monitor.read(hub)
            return (monitor.sums["blocked"]["headcount_out"] == n
                    and monitor.sums["blocked"]["times"] == n
                    and last["blocked"]["backlog"] == 0)
        fh.wait_for(drained, "the blocked consumer to drain", hub=hub)
        assert monitor.sums["blocked"]["headcount_in"] == n, monitor.sums
        assert monitor.sums["fast"]["headcount_in"] == n, monitor.sums
        for name in ("blocked", "fast"):
            assert monitor.sums[name]["exceptions"] == 0, monitor.sums

        # With nothing happening, the deltas are zero.
        quiet = monitor.read(hub)
        for name in ("blocked", "fast"):
            c = quiet[name]
            assert (c["headcount_in"], c["headcount_out"], c["backlog"], c["times"]) == \
                (0, 0, 0, []), c
        assert hub.stop() == 0, hub.log()
        assert not os.path.exists(sock_path), "moksha socket left behind"
    finally:
        if monitor:
            monitor.close()
        hub.kill()
        pub.close()
    wd.cleanup()


def test_failures_are_exceptions():
    """exceptions: the messages that failed during the interval."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    sock_path = wd.file("moksha.sock")
    config = ("bus:\n  connect: [%s]\n"
              "metrics:\n  moksha_socket: \"ipc://%s\"\n  moksha_interval: 1\n"
              "consumers:\n"
              "  - name: flaky\n    plugin: %s/count.so\n    topics: [a., b.]\n"
              "    options: {path: %s, fail_every: 3}\n") % (
                  pub.endpoint, sock_path, fh.TEST_PLUGINS, wd.file("count"))
    hub = fh.Hub(wd, config)
    monitor = None
    try:
        hub.wait_log("moksha: publishing monitoring on")
        monitor = Monitor("ipc://" + sock_path, {"flaky": ("/count.so", ["a.", "b."])})

        def subscribed():
            return pub.sock.poll(100)
        fh.wait_for(subscribed, "the hub to subscribe", hub=hub)
        pub.sock.recv()
        monitor.read(hub)
        monitor.reset()
        n = 30
        for i in range(n):
            pub.send("a.x" if i % 2 else "b.x", b"{}")

        def done():
            monitor.read(hub)
            return monitor.sums["flaky"]["headcount_out"] == n and \
                monitor.sums["flaky"]["times"] == n
        fh.wait_for(done, "all %d consumed" % n, hub=hub)
        assert monitor.sums["flaky"]["exceptions"] == n // 3, monitor.sums
        assert hub.stop() == 0, hub.log()
    finally:
        if monitor:
            monitor.close()
        hub.kill()
        pub.close()
    wd.cleanup()


def test_bind_failure_fails_start():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        wd = fh.Workdir()
        config = ("bus:\n  connect: [tcp://127.0.0.1:9]\n"
                  "metrics:\n  moksha_socket: \"tcp://127.0.0.1:%d\"\n"
                  "consumers:\n  - name: x\n    plugin: \"null\"\n") % port
        hub = fh.Hub(wd, config)
        try:
            status = hub.wait()
        finally:
            hub.kill()
        log = hub.log()
    assert status == 1, (status, log)
    assert "moksha: cannot bind tcp://127.0.0.1:%d: Address already in use" % port in log, log
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_blocked_and_fast_consumers, test_failures_are_exceptions,
             test_bind_failure_fails_start])
