"""Descriptor exhaustion from the network: 2,000 raw TCP connections to a
bus.bind endpoint of a hub whose `nofile` is 1024 (prlimit, on the hub
only). The hub sheds what is beyond bus.max_peers and counts it, keeps
delivering from its publisher, answers STATS, `fanhub stats` and
/metrics, and stops cleanly: no abort, no busy loop. And the cap holds
per endpoint when several bind on a wildcard address. A connection the
table has no room for is refused and counted, not left waiting."""
import errno
import json
import os
import socket
import subprocess
import urllib.request

import zmq

import fanhublib as fh

CONNECTIONS = 2000


def test_connection_flood_with_nofile_1024():
    wd = fh.Workdir()
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    http_port = fh.free_port()
    # bus.max_peers well below what the flood brings: the listener's backlog
    # lets the kernel hold back part of a flood of SYNs for seconds on a
    # busy machine, so the default (three quarters of the descriptors) is
    # not always reached within the flood; the cap is what is tested.
    hub = fh.Hub(wd, "bus:\n  bind: %s\n  max_peers: 200\nmetrics:\n  prometheus: {listen: '127.0.0.1:%d'}\n"
                 "consumers:\n  - name: all\n    plugin: log\n    queue: {capacity: 100000}\n"
                 "    options: {path: %s, flush_ms: 20}\n"
                 % (endpoint, http_port, json.dumps(wd.file("all.jsonl"))),
                 prefix=["prlimit", "--nofile=1024:1024", "--"])
    flood = []
    pub = None
    try:
        hub.wait_ready()
        hub.wait_log("descriptors: the limit is 1024")
        hub.wait_log("at most 200 peers per bind endpoint")
        # The publisher is in before the flood.
        pub = zmq.Context.instance().socket(zmq.XPUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.setsockopt(zmq.SNDHWM, 0)
        pub.connect(endpoint)
        fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
        pub.recv()

        host, port = endpoint[len("tcp://"):].rsplit(":", 1)
        for _ in range(CONNECTIONS):
            s = socket.socket()
            s.setblocking(False)
            rc = s.connect_ex((host, int(port)))
            assert rc in (0, errno.EINPROGRESS), rc
            flood.append(s)
        fh.wait_for(lambda: hub.stats()["hub"]["peers_refused"] > 0,
                    "the connections past bus.max_peers to be refused", hub=hub)

        # Still delivering.
        for i in range(1000):
            pub.send_multipart([b"org.test.flood", b"%d" % i])
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= 1000,
                    "1000 messages during the flood", hub=hub)
        # Every way in still answers.
        stats = hub.stats()
        assert stats["hub"]["received"] == 1000, stats["hub"]
        status, out, err = fh.run(["stats", "-e", hub.control, "--format", "json"])
        assert status == 0, err
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % http_port,
                                    timeout=fh.DEADLINE) as response:
            assert response.status == 200
            text = response.read().decode()
        assert "fanhub_peers_refused_total" in text, text[:2000]
        log = hub.log()
        assert "refused a connection" in log, log[-4000:]
        assert "resource limit" not in log and "out of descriptors" not in log, log[-4000:]
        for s in flood:
            s.close()
        flood = []
        assert hub.stop() == 0, hub.log()[-4000:]
        wd.cleanup()
    finally:
        for s in flood:
            s.close()
        if pub is not None:
            pub.close()
        hub.kill()


def test_max_peers_per_wildcard_bind_endpoint():
    """bus.max_peers caps each of two wildcard bind endpoints (tcp://*:P):
    libzmq names an accepted connection by its local address
    (tcp://127.0.0.1:P), which the hub matches to its endpoint by port."""
    cap = 3
    wd = fh.Workdir()
    ports = [fh.free_port(), fh.free_port()]
    binds = ["tcp://*:%d" % p for p in ports]
    hub = fh.Hub(wd, "bus:\n  bind: [%s]\n  max_peers: %d\n"
                 "consumers:\n  - {name: n, plugin: \"null\"}\n" % (", ".join(binds), cap))
    peers = []

    def endpoint_peers():
        return {e["endpoint"]: e["peers"] for e in hub.stats()["hub"]["endpoints"]}

    def publisher(port):
        pub = zmq.Context.instance().socket(zmq.XPUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.connect("tcp://127.0.0.1:%d" % port)
        peers.append(pub)
        return pub

    try:
        hub.wait_ready()
        hub.wait_log("at most %d peers per bind endpoint" % cap)
        for pub in [publisher(ports[0]) for _ in range(cap)]:
            fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
        fh.wait_for(lambda: endpoint_peers()[binds[0]] == cap, "%d peers on %s" % (cap, binds[0]),
                    hub=hub)
        # One more on the full endpoint is shed (again at each reconnection).
        publisher(ports[0])
        fh.wait_for(lambda: hub.stats()["hub"]["peers_refused"] > 0,
                    "the peer past bus.max_peers on %s refused" % binds[0], hub=hub)
        # The shed one counts until libzmq reports its disconnection (and
        # for a moment at each of its reconnections): waited for, not read.
        fh.wait_for(lambda: endpoint_peers()[binds[0]] == cap,
                    "%d peers on %s once the one past the cap is gone" % (cap, binds[0]), hub=hub)
        # The other endpoint has a cap of its own.
        for pub in [publisher(ports[1]) for _ in range(cap)]:
            fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
        fh.wait_for(lambda: endpoint_peers()[binds[1]] == cap, "%d peers on %s" % (cap, binds[1]),
                    hub=hub)
        # Gone peers are counted out of their endpoint.
        for pub in peers:
            pub.close()
        peers = []
        fh.wait_for(lambda: set(endpoint_peers().values()) == {0}, "every peer gone", hub=hub)
        assert "refused a connection" in hub.log()
        assert hub.stop() == 0, hub.log()[-4000:]
        wd.cleanup()
    finally:
        for pub in peers:
            pub.close()
        hub.kill()


def control_flood(nofile):
    """Issue 28, case 5: 1,100 connections to the control socket of a hub
    whose nofile is 1024 made libzmq abort (ipc_listener.cpp:325), and at
    nofile 128 even a flood the hub sheds did, 1 run in 3 (libzmq accepts
    on its I/O thread faster than the control thread sheds). The control
    socket now holds at most an eighth of the descriptors (128, or 16),
    shuts the rest at once, counted in hub.control_refused, and hides its
    file (PATH.busy) while it is full, so that new clients fail at
    connect() instead of being accepted; the hub keeps running, answers
    once the flood is gone, and stops cleanly. What the control thread
    is too slow to hide from (a busy CPU: 1 run in 20 under ASan still
    aborted at 128) the hub's accept4 refuses (unit.test_fdlimit)."""
    wd = fh.Workdir()
    hub = fh.Hub(wd, "bus:\n  bind: tcp://127.0.0.1:%d\n"
                 "consumers:\n  - {name: n, plugin: \"null\"}\n" % fh.free_port(),
                 prefix=["prlimit", "--nofile=%d:%d" % (nofile, nofile), "--"])
    flood = []
    try:
        hub.wait_ready()
        path = hub.control[len("ipc://"):]
        for _ in range(1100):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(path)
            except OSError as e:  # the listener's backlog, or the file hidden
                s.close()
                assert e.errno in (errno.ECONNREFUSED, errno.EAGAIN, errno.ENOENT), e
                continue
            flood.append(s)
        hub.wait_log("refused a connection")
        hub.wait_log("renamed %s.busy until one leaves" % path)
        assert hub.proc.poll() is None, hub.log()[-4000:]
        if os.path.exists(path + ".busy"):
            # A second hub on the same control path while the first hides
            # it: refused, and the first hub's hidden socket left alone.
            second = wd.write("second.yaml", "bus:\n  bind: tcp://127.0.0.1:%d\n"
                              "consumers:\n  - {name: n, plugin: \"null\"}\n"
                              "control: %s\n" % (fh.free_port(), hub.control))
            status, _, err = fh.run(["run", "-c", second])
            assert status != 0 and "served by another running hub" in err, (status, err)
            assert os.path.exists(path + ".busy") or os.path.exists(path)
        waiting = None
        if os.path.exists(path + ".busy"):
            # A client meanwhile is told why, once its timeout is up...
            status, _, err = fh.run(["stats", "-e", hub.control, "-t", "200"])
            if os.path.exists(path + ".busy"):
                assert status == 1 and "renamed %s.busy for now" % path in err, (status, err)
            # ...and one that is still waiting when the flood goes is served.
            waiting = subprocess.Popen([fh.BIN, "stats", "-e", hub.control, "-t", "60000"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for s in flood:
            s.close()
        flood = []
        if waiting is not None:
            out, err = waiting.communicate(timeout=fh.DEADLINE)
            assert waiting.returncode == 0, err.decode(errors="replace")
            assert json.loads(out)["hub"]["control_refused"] > 0
        fh.wait_for(lambda: hub.stats()["hub"]["control_refused"] > 0, "refusals counted",
                    hub=hub)
        assert os.path.exists(path) and not os.path.exists(path + ".busy")
        assert "serves new clients again" in hub.log()
        assert "Too many open files" not in hub.log()
        assert hub.stop() == 0, hub.log()[-4000:]
        wd.cleanup()
    finally:
        for s in flood:
            s.close()
        hub.kill()


def test_bus_connection_without_a_descriptor():
    """With the descriptor table full (a test plugin takes all but three),
    a connection to bus.bind that has no descriptor is taken and closed at
    once (fdlimit.c's accept4), counted in hub.peers_refused and logged,
    not left waiting; the hub goes on delivering from its publisher."""
    wd = fh.Workdir()
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    free = 3
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(
            wd, "bus:\n  bind: %s\nconsumers:\n"
            "  - name: hog\n    plugin: %s/fdhog.so\n    topics: [org.test.hog]\n"
            "    options: {leave: %d}\n"
            "  - name: all\n    plugin: log\n    topics: [org.test.data]\n"
            "    options: {path: %s, flush_ms: 20}\n"
            % (endpoint, fh.TEST_PLUGINS, free, json.dumps(wd.file("all.jsonl"))),
            prefix=["prlimit", "--nofile=256:256", "--"]))
        hub.wait_ready()
        pub = cleanup.add(zmq.Context.instance().socket(zmq.XPUB))
        pub.setsockopt(zmq.LINGER, 0)
        pub.connect(endpoint)
        fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
        pub.recv()
        pub.send_multipart([b"org.test.hog", b"take"])
        fh.wait_for(lambda: hub.consumer(hub.stats(), "hog")["completed"] == 1,
                    "the table to be filled", hub=hub)

        # No control request from here until the table has room again: it
        # would need a descriptor too.
        host, port = endpoint[len("tcp://"):].rsplit(":", 1)
        # 30 s: each is served or closed within milliseconds; a wait means
        # a connection left in the queue, a failure.
        flood = [cleanup.add(socket.create_connection((host, int(port)), timeout=30))
                 for _ in range(20)]
        # Each connection is either served (libzmq sends its greeting) or
        # closed without a byte.
        greeted = closed = 0
        for s in flood:
            try:
                data = s.recv(1)
            except ConnectionResetError:
                data = b""
            greeted += bool(data)
            closed += not data
        # `free`, and one more for each control connection (the STATS of
        # the wait above) that was open when the table was filled.
        assert greeted <= free + 2 and closed >= len(flood) - free - 2, (greeted, closed)
        pub.send_multipart([b"org.test.data", b"during"])
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) == 1,
                    "a message delivered with the table full", hub=hub)

        for s in flood:
            s.close()
        pub.send_multipart([b"org.test.hog", b"give"])
        fh.wait_for(lambda: hub.consumer(hub.stats(), "hog")["completed"] == 2,
                    "the table given back", hub=hub)
        stats = hub.stats()
        assert stats["hub"]["peers_refused"] == closed, (stats["hub"], closed)
        log = hub.log()
        assert "has no descriptor left for a new connection: refused a connection" in log, log
        assert "Too many open files" not in log, log[-4000:]
        assert hub.stop() == 0, hub.log()[-4000:]
    wd.cleanup()


def test_control_flood_with_nofile_1024():
    control_flood(1024)


def test_control_flood_with_nofile_128():
    control_flood(128)


if __name__ == "__main__":
    fh.main([test_connection_flood_with_nofile_1024, test_max_peers_per_wildcard_bind_endpoint,
             test_bus_connection_without_a_descriptor, test_control_flood_with_nofile_1024, test_control_flood_with_nofile_128])
