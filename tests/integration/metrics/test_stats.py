"""Metrics through the control socket: exact backlog with a consumer held
by the test, the snapshot invariants under load, and a control socket that
answers garbage with errors and keeps serving."""
import json
import os
import random
import re
import signal
import subprocess
import sys

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def blocked_config(pub, wd, extra=""):
    return ("bus:\n  connect: [%s]\n%sconsumers:\n"
            "  - name: held\n    plugin: %s/sleep.so\n"
            "    options: {release_file: %s}\n"
            "  - name: fast\n    plugin: \"null\"\n"
            % (pub.endpoint, extra, fh.TEST_PLUGINS, json.dumps(wd.file("release"))))


def check_invariants(stats, previous=None):
    for c in stats["consumers"]:
        name = c["name"]
        assert c["enqueued"] == c["dequeued"] + c["backlog"], (name, c)
        assert c["dequeued"] == c["completed"] + c["failed"] + c["in_flight"], (name, c)
        assert 0 <= c["in_flight"] <= 1, (name, c)  # one thread per consumer
        # A message is counted as enqueued just before it lands in the
        # queue, so a snapshot may see one more than a full queue holds.
        assert 0 <= c["backlog"] <= c["capacity"] + 1, (name, c)
        assert c["backlog_max"] >= c["backlog"], (name, c)
        for key in ("queue_wait", "processing"):
            h = c[key]
            assert h["count"] >= h["interval"]["count"] >= 0, (name, key, h)
            if h["count"]:
                assert 0 <= h["p50"] <= h["p90"] <= h["p99"] <= h["p999"] <= h["max"], (name, h)
        if previous:
            before = next(p for p in previous["consumers"] if p["name"] == name)
            for counter in ("enqueued", "dequeued", "completed", "failed", "dropped",
                            "backlog_max"):
                assert c[counter] >= before[counter], (name, counter, before, c)
    hub = stats["hub"]
    assert hub["malformed"] == sum(hub["malformed_by_reason"].values())
    # One snapshot: nothing a consumer shows is ahead of what the hub received.
    for c in stats["consumers"]:
        assert c["enqueued"] + c["dropped"] - c["evicted"] <= hub["received"], (c["name"], c, hub)
    assert hub["handled"] <= hub["received"], hub
    if previous:
        assert hub["received"] >= previous["hub"]["received"]


def test_backlog_is_exact():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, blocked_config(pub, wd))
    n = 1000
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send("org.test.%d" % (i % 3), "%d" % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == n, "the hub to receive %d" % n,
                    hub=hub)
        # 'held' has taken message 1 into consume and waits there: exactly
        # one in flight and the rest queued. Wait for the pop, then check.
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["in_flight"] == 1,
                    "held to start its first message", hub=hub)
        stats = hub.stats()
        check_invariants(stats)
        # The process figures, read outside the hub lock, are in every answer.
        process = stats["process"]
        assert process["open_fds"] > 3 and process["resident_memory_bytes"] > 0, process
        held = hub.consumer(stats, "held")
        assert held["enqueued"] == n and held["backlog"] == n - 1, held
        assert held["completed"] == 0 and held["backlog_max"] >= n - 1, held
        fast = hub.consumer(stats, "fast")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "fast")["completed"] == n, "fast", hub=hub)
        open(wd.file("release"), "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["completed"] == n,
                    "held to finish", hub=hub)
        stats = hub.stats()
        check_invariants(stats)
        held = hub.consumer(stats, "held")
        assert held["backlog"] == 0 and held["in_flight"] == 0, held
        assert held["backlog_max"] == n - 1 or held["backlog_max"] == n, held
        assert held["queue_wait"]["count"] == n and held["processing"]["count"] == n
        # The socket monitor reports the connection (it lags the traffic).
        fh.wait_for(lambda: hub.stats()["hub"]["endpoints"][0]["connected"] is True,
                    "the endpoint to show connected", hub=hub)
        assert fast["name"] == "fast"
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_invariants_under_load():
    """200,000 messages through 4 consumers while snapshots are taken as
    fast as the control socket answers: every one must be consistent."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n = 200_000
    config = "bus:\n  connect: [%s]\nconsumers:\n" % pub.endpoint
    for i in range(4):
        config += ("  - name: c%d\n    plugin: %s/count.so\n"
                   "    queue: {capacity: 5000}\n"
                   "    options: {path: %s, fail_every: %d}\n"
                   % (i, fh.TEST_PLUGINS, json.dumps(wd.file("c%d" % i)), 7 * i))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        snapshots = 0
        previous = None
        sent = 0
        # Interleave publishing and snapshotting so snapshots land mid-flow.
        while sent < n or previous is None or previous["hub"]["received"] < n:
            for _ in range(min(5000, n - sent)):
                pub.send("org.load.%d" % (sent % 5), "x" * 64)
                sent += 1
            stats = hub.stats()
            check_invariants(stats, previous)
            previous = stats
            snapshots += 1
        fh.wait_for(lambda: all(c["backlog"] == 0 and c["in_flight"] == 0
                                for c in hub.stats()["consumers"]), "drained", hub=hub)
        stats = hub.stats()
        check_invariants(stats, previous)
        for i, c in enumerate(stats["consumers"]):
            assert c["enqueued"] + c["dropped"] == n, c
            failed = c["enqueued"] // (7 * i) if i else 0
            assert c["failed"] == failed, (c, failed)
            assert c["completed"] == c["enqueued"] - failed, c
        assert snapshots > 10, snapshots
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_control_socket_refuses_garbage_and_keeps_serving():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, blocked_config(pub, wd))
    ctx = zmq.Context.instance()
    try:
        hub.wait_ready()
        cases = [b"", b"HELLO", b"stats", b"STATS\x00", b"PING ", b"\xff\xfe\x00garbage",
                 b"S" * 5000, os.urandom(1 << 20)]
        for command in cases:
            answer = hub.request(command)
            assert answer.startswith(b"ERROR "), (command[:20], answer)
        # Several frames in one request.
        req = ctx.socket(zmq.REQ)
        req.setsockopt(zmq.LINGER, 0)
        req.connect(hub.control)
        req.send_multipart([b"PING", b"extra"])
        assert req.poll(10000) and req.recv().startswith(b"ERROR ")
        req.close()
        # A DEALER without the REQ envelope is served too.
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.connect(hub.control)
        dealer.send(b"PING")
        assert dealer.poll(10000) and dealer.recv() == b"PONG"
        # Random multipart junk, and a peer that sends and goes away.
        rng = random.Random(7)
        for _ in range(200):
            frames = [os.urandom(rng.randrange(0, 64)) for _ in range(rng.randrange(1, 40))]
            dealer.send_multipart(frames)
        gone = ctx.socket(zmq.DEALER)
        gone.setsockopt(zmq.LINGER, 0)
        gone.connect(hub.control)
        gone.send(b"STATS")
        gone.close()
        # A 64 MiB frame.
        assert hub.request(b"X" * (64 << 20), timeout_ms=60000).startswith(b"ERROR ")
        dealer.close()
        assert hub.request("PING") == b"PONG"
        fh.check_sanitizers(hub.log(), "fanhub run")
        check_invariants(hub.stats())
        open(wd.file("release"), "w").close()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stats_command_formats():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, blocked_config(pub, wd))
    try:
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        for i in range(10):
            pub.send("org.test", "%d" % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 10, "10 received", hub=hub)
        status, out, err = fh.run(["stats", "-e", hub.control])
        assert status == 0, err
        stats = json.loads(out)
        assert [c["name"] for c in stats["consumers"]] == ["held", "fast"]
        status, out, err = fh.run(["stats", "-c", hub.config, "--format", "table"])
        assert status == 0 and "held" in out and "BACKLOG" in out, (out, err)
        status, out, err = fh.run(["stats", "-e", hub.control, "-f", "prometheus"])
        assert status == 0 and 'fanhub_consumer_enqueued_total{consumer="held"} 10' in out, out
        status, out, err = fh.run(["stats", "-e", hub.control, "-f", "collectd", "--host", "h"])
        assert status == 0 and 'PUTVAL "h/fanhub-held/derive-enqueued" interval=10 N:10' in out, out
        # The hub's own snapshot, handed back with --input: every format
        # takes it (the Prometheus text the same as the hub's).
        saved = wd.write("saved.json", json.dumps(stats))
        for fmt in ("json", "table", "prometheus", "collectd"):
            status, out, err = fh.run(["stats", "--input", saved, "-f", fmt])
            assert status == 0 and out, (fmt, err)
        status, out, _ = fh.run(["stats", "--input", saved, "-f", "prometheus"])
        assert 'fanhub_consumer_enqueued_total{consumer="held"} 10' in out, out
        open(wd.file("release"), "w").close()
        assert hub.stop() == 0, hub.log()
        # What is not a snapshot is said so, in every format, exit 1.
        for text, said in (("garbage", "'[' or '{' expected near 'garbage' (line 1, column 7)"),
                           ("[1, 2]", "expected a JSON object, with hub and consumers"),
                           ('{"consumers": []}', "hub: expected an object"),
                           ('{"hub": {}, "consumers": [{"name": "x", "backlog": "lots"}]}',
                            "consumers[0].backlog: expected a number"),
                           ('{"hub": {"upstream": 5}, "consumers": []}',
                            "hub.upstream: expected an object"),
                           ('{"hub": {"endpoints": [{"endpoint": "tcp://127.0.0.1:1", '
                            '"peers": "a"}]}, "consumers": []}',
                            "hub.endpoints[0].peers: expected a number"),
                           ('{"hub": {}, "consumers": [], "process": {"open_fds": []}}',
                            "process.open_fds: expected a number")):
            bad = wd.write("bad.json", text)
            for fmt in ("json", "table", "prometheus", "collectd"):
                status, out, err = fh.run(["stats", "--input", bad, "-f", fmt])
                assert status == 1 and out == "" and "not a stats snapshot: " + said in err, \
                    (text, fmt, status, out, err)
        # No hub there: a clear error and exit 1.
        status, _, err = fh.run(["stats", "-e", hub.control, "--timeout", "300"])
        assert status == 1 and "is the hub running" in err, err
        status, _, err = fh.run(["stats", "-e", "tcp://127.0.0.1:%d" % fh.free_port(),
                                 "--timeout", "300"])
        assert status == 1 and "no answer" in err, err
        status, _, err = fh.run(["stats", "-f", "xml"])
        assert status == 2, err
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_backlog_warning_fires_once_and_rearms():
    """queue.warn_at: one warning when the backlog crosses it; the next one
    only after it has drained below half."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: held\n    plugin: %s/sleep.so\n"
              "    queue: {capacity: 1000, warn_at: 100}\n"
              "    options: {release_file: %s}\n"
              % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(wd.file("release"))))
    hub = fh.Hub(wd, config)
    line = "consumer 'held': backlog reached"
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(300):  # far past 100: still one warning
            pub.send("org.w", "%d" % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 300, "300", hub=hub)
        assert hub.log().count(line) == 1, hub.log()
        open(wd.file("release"), "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["backlog"] == 0, "drained", hub=hub)
        os.unlink(wd.file("release"))
        # Drained below 50 (re-armed): the next crossing warns again.
        for i in range(300):
            pub.send("org.w", "%d" % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 600, "600", hub=hub)
        fh.wait_for(lambda: hub.log().count(line) == 2, "the second warning", hub=hub)
        open(wd.file("release"), "w").close()
        assert hub.stop() == 0, hub.log()
        assert hub.log().count(line) == 2, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


DOWN_MODULE = """class Consumer:
    \"\"\"A consumer whose broker is not up: its constructor fails for now.\"\"\"
    def __init__(self, *args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused: the broker at 127.0.0.1:1 "
                                     "is not up yet \u00e9t\u00e9 " + "x" * 200)

    def __call__(self, message):
        pass
"""


def stats_cli(hub, *args, columns=None):
    """`fanhub stats -e CONTROL ARGS`, stdout not a terminal, with
    COLUMNS=columns (None: unset). Returns (status, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run([fh.BIN, "stats", "-e", hub.control] + list(args), env=env,
                          capture_output=True, timeout=fh.DEADLINE)
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


def test_states_in_every_view():
    """A consumer down (its constructor raises ConnectionRefusedError), one
    halted (HaltConsumer) and one up: the table, --watch and --consumer
    show each one's state and last error; the table cuts the error to
    $COLUMNS at a UTF-8 character, --consumer shows it whole."""
    wd = fh.Workdir()
    halter = fh.PythonConsumer(wd, "halter", topics="[org.test.halt]")
    down_dir = wd.file("modules-down")
    os.makedirs(down_dir)
    with open(os.path.join(down_dir, "broker_down.py"), "w") as f:
        f.write(DOWN_MODULE)
    consumers = halter.yaml() + (
        "  - name: down\n    plugin: python\n    topics: [org.test.down]\n"
        "    options: {callable: \"broker_down:Consumer\", path: [%s],"
        " restart_delay: 50ms, restart_delay_max: 200ms}\n"
        "  - {name: fine, plugin: \"null\"}\n" % json.dumps(down_dir))
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml({"connect": [pub.endpoint]}, consumers),
                                 env=halter.env()))
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        pub.send("org.test.halt", '{"i": 1, "halt": true}')
        fh.wait_for(lambda: [hub.consumer(hub.stats(), n)["state"] for n in ("halter", "down")]
                    == [2, 1], "halter halted and down down", hub=hub)

        status, table, err = stats_cli(hub, "-f", "table", columns=72)
        assert status == 0, err
        lines = table.splitlines()
        assert lines[1].split()[:3] == ["CONSUMER", "STATE", "BACKLOG"], table
        rows = {line.split()[0]: i for i, line in enumerate(lines) if i > 1
                and not line.startswith(" ")}
        assert lines[rows["halter"]].split()[1] == "halted", table
        assert lines[rows["down"]].split()[1] == "down", table
        assert lines[rows["fine"]].split()[1] == "up", table
        error = lines[rows["down"] + 1]
        assert error.startswith("  last error: worker 0: refused to start: broker_down"), table
        assert len(error) == 72 and error.endswith("~"), (len(error), error)
        assert lines[rows["halter"] + 1].startswith("  last error: halted"), table
        assert rows["fine"] + 1 == len(lines) or not lines[rows["fine"] + 1].startswith(" "), table
        # Without a terminal or $COLUMNS nothing is cut.
        status, table, err = stats_cli(hub, "-f", "table")
        assert status == 0 and "x" * 100 in table and "\u00e9t\u00e9" in table, table

        # --watch, piped: the same table, appended once a second.
        env = dict(os.environ, COLUMNS="72")
        watch = subprocess.Popen([fh.BIN, "stats", "-e", hub.control, "--watch"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        cleanup.add(watch)
        seen = b""
        while seen.count(b"\nhub ") < 1:  # a second table begins
            chunk = watch.stdout.read1(65536)
            assert chunk, watch.stderr.read()
            seen += chunk
        watch.send_signal(signal.SIGINT)
        assert watch.wait(fh.DEADLINE) == 0
        assert b" halted " in seen and b"  last error: halted" in seen, seen

        # --consumer: one in full, the error whole.
        status, out, err = stats_cli(hub, "--consumer", "down", columns=40)
        assert status == 0, err
        assert "\nstate                down\n" in out, out
        assert "ConnectionRefusedError" in out and "x" * 100 in out, out
        assert re.search(r"^restarts +\d+$", out, re.M) and "\nqueue_wait " in out, out
        status, out, err = stats_cli(hub, "--consumer", "halter", "-f", "json")
        assert status == 0 and json.loads(out)["state"] == 2, (out, err)
        status, out, err = stats_cli(hub, "--consumer", "nobody")
        assert status == 1 and "no consumer 'nobody'" in err, (status, out, err)
        status, out, err = stats_cli(hub, "--consumer", "down", "-f", "prometheus")
        assert status == 2, (status, out, err)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_error_text_cut_inside_a_character():
    """Issue 39, item 10: a plugin's error whose cut (the hub keeps 255
    bytes) falls inside a UTF-8 character, or that is not UTF-8 at all,
    never costs the answer: `fanhub stats` and STATUS list every consumer,
    the cut character dropped whole, bad bytes shown as U+FFFD."""
    wd = fh.Workdir()
    cases = [("cut254", 254, "\u00e9", False), ("cut255", 255, "\u00e9", False),
             ("euro253", 253, "\u20ac", False), ("euro254", 254, "\u20ac", False),
             ("raw", 0, "bad \\xff byte \\xc3", True)]
    text = "bus:\n  connect: [tcp://127.0.0.1:1]\nconsumers:\n"
    for name, pad, tail, raw in cases:
        text += ("  - name: %s\n    plugin: %s/badtext.so\n    options: {pad: %d, tail: %s%s}\n"
                 % (name, fh.TEST_PLUGINS, pad, json.dumps(tail), ", raw: true" if raw else ""))
    text += "  - name: fine\n    plugin: %s/sleep.so\n" % fh.TEST_PLUGINS
    hub = fh.Hub(wd, text)
    try:
        hub.wait_ready()
        status, out, err = fh.run(["stats", "-e", hub.control, "--format", "json"])
        assert status == 0, (status, out, err)
        stats = json.loads(out)
        errors = {c["name"]: c["last_error"] for c in stats["consumers"]}
        assert sorted(errors) == sorted([c[0] for c in cases] + ["fine"]), out
        assert errors["cut254"] == "a" * 254, errors["cut254"]
        assert errors["cut255"] == "a" * 255, errors["cut255"]
        assert errors["euro253"] == "a" * 253, errors["euro253"]
        assert errors["euro254"] == "a" * 254, errors["euro254"]
        assert errors["raw"] == "bad \ufffd byte \ufffd", errors["raw"]
        # So does the status page's STATUS, the plugin's error as its reason.
        status = json.loads(hub.request("STATUS"))
        reasons = {c["name"]: c["status"]["reason"] for c in status["consumers"]}
        assert len(reasons) == len(cases) + 1, reasons
        assert reasons["raw"] == "bad \ufffd byte \ufffd", reasons
        assert reasons["cut254"] == "a" * 254, reasons
        # The other formats answer too.
        for form in ("prometheus", "collectd", "table"):
            status, out, err = fh.run(["stats", "-e", hub.control, "--format", form])
            assert status == 0 and "cut254" in out, (form, status, out, err)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()


if __name__ == "__main__":
    fh.main([test_backlog_is_exact, test_invariants_under_load,
             test_control_socket_refuses_garbage_and_keeps_serving, test_stats_command_formats,
             test_backlog_warning_fires_once_and_rearms, test_states_in_every_view,
             test_error_text_cut_inside_a_character])
