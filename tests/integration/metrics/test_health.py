"""/healthz and /readyz on the HTTP listener, and the systemd watchdog fed
only while the enqueuer advances (issue 26).

Readiness turns to 503 with the reason, and back to 200, for a bus
endpoint down, a stuck consumer, a full spool and a worker consumer down
(and one halted); a blocked enqueuer (a
`block` consumer whose plugin never returns) makes /healthz 503 and stops
WATCHDOG=1 on a fake NOTIFY_SOCKET. Every wait is for an answer or a
datagram, never for time."""
import json
import os
import socket
import sys
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.headers.get("Content-Type"), json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), json.loads(e.read())


def hub_with_http(cleanup, wd, connect, consumers, extra="", env=None):
    listen = "127.0.0.1:%d" % fh.free_port()
    config = fh.bus_hub_yaml({"connect": connect, "connect_warning": 0}, consumers,
                             extra + "metrics:\n  prometheus:\n    listen: \"%s\"\n" % listen)
    hub = cleanup.add(fh.Hub(wd, config, env=env))
    hub.wait_ready()  # the control socket answers
    base = "http://" + listen

    def answers():
        try:
            return get(base + "/healthz")[0] in (200, 503)
        except (urllib.error.URLError, ConnectionError):
            return False
    fh.wait_for(answers, "HTTP on " + listen, hub=hub)
    return hub, base


def readiness(base, status, *words):
    """A wait_for condition: /readyz answers status with a reason naming
    every one of words."""
    def check():
        code, kind, body = get(base + "/readyz")
        assert kind == "application/json", kind
        if code != status:
            return False
        if status == 200:
            return body["status"] == "ok" and body["reasons"] == []
        return body["status"] == "fail" and any(all(w in r for w in words)
                                                for r in body["reasons"])
    return check


def test_endpoint_down_then_up():
    wd = fh.Workdir()
    address = "tcp://127.0.0.1:%d" % fh.free_port()
    with fh.Cleanup() as cleanup:
        hub, base = hub_with_http(cleanup, wd, [address], '  - {name: n, plugin: "null"}\n')
        status, _, body = get(base + "/healthz")
        assert status == 200 and body["status"] == "ok", body
        fh.wait_for(readiness(base, 503, "bus endpoint %s not connected (connection refused"
                              % address), "readyz 503 for the endpoint", hub=hub)
        cleanup.add(fh.bind_xpub(address))
        fh.wait_for(readiness(base, 200), "readyz 200 once connected", hub=hub)
        # The status page and its JSON on a hub that stops cleanly: the
        # sanitizer builds check what making them leaves behind.
        with urllib.request.urlopen(base + "/", timeout=30) as r:
            assert "data-endpoint=\"%s\"" % address in r.read().decode()
        with urllib.request.urlopen(base + "/status.json", timeout=30) as r:
            assert json.loads(r.read())["hub"]["endpoints"][0]["connected"] is True
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_stuck_consumer_then_not():
    wd = fh.Workdir()
    consumers = ("  - name: slow\n    plugin: %s\n    consume_timeout: 0.2\n"
                 "    options: {consume_ms: 3000}\n" % os.path.join(fh.TEST_PLUGINS, "hang.so"))
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub, base = hub_with_http(cleanup, wd, [pub.endpoint], consumers)
        pub.wait_subscribed(hub=hub)
        fh.wait_for(readiness(base, 200), "readyz 200 at first", hub=hub)
        pub.send("org.test.slow", "{}")
        fh.wait_for(readiness(base, 503, "consumer 'slow' stuck"), "readyz 503 stuck", hub=hub)
        assert get(base + "/healthz")[0] == 200  # stuck is not dead
        fh.wait_for(readiness(base, 200), "readyz 200 after the call returned", hub=hub)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_full_spool_then_drained():
    wd = fh.Workdir()
    consumers = ("  - name: spiller\n    plugin: %s\n"
                 "    queue: {capacity: 1, overflow: spill, spool_max_bytes: 4096}\n"
                 "    options: {consume_ms: 20}\n" % os.path.join(fh.TEST_PLUGINS, "hang.so"))
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub, base = hub_with_http(cleanup, wd, [pub.endpoint], consumers,
                                  extra="state_dir: %s\n" % json.dumps(wd.file("state")))
        pub.wait_subscribed(hub=hub)
        fh.wait_for(readiness(base, 200), "readyz 200 at first", hub=hub)
        for i in range(200):
            pub.send("org.test.spill", "x" * 100)
        fh.wait_for(readiness(base, 503, "consumer 'spiller' spool full"),
                    "readyz 503 spool full", hub=hub)
        fh.wait_for(readiness(base, 200), "readyz 200 once drained", hub=hub)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_a_consumer_down_then_up_and_one_halted():
    """The worker plugin's word (ABI 1.3 set_state): a consumer whose
    worker cannot start again (its import fails) is down, one whose
    worker raised HaltConsumer is halted; each makes /readyz 503 naming
    it and its last error, and the down one 200 again once it is up."""
    wd = fh.Workdir()
    flaky = fh.PythonConsumer(wd, "flaky", topics="[org.test.flaky]")
    halter = fh.PythonConsumer(wd, "halter", topics="[org.test.halt]")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub, base = hub_with_http(cleanup, wd, [pub.endpoint], flaky.yaml() + halter.yaml(),
                                  env=flaky.env())
        pub.wait_subscribed(hub=hub)
        fh.wait_for(readiness(base, 200), "readyz 200 at first", hub=hub)
        flaky.break_import(hub)
        fh.wait_for(readiness(base, 503, "consumer 'flaky' down: ", "broken on purpose"),
                    "readyz 503 naming the down consumer and its error", hub=hub)
        assert get(base + "/healthz")[0] == 200  # down is not dead
        flaky.mend()
        fh.wait_for(readiness(base, 200), "readyz 200 once a worker started again", hub=hub)
        pub.send("org.test.halt", '{"i": 1, "halt": true}')
        fh.wait_for(readiness(base, 503, "consumer 'halter' halted: halted by worker 0: "
                              "asked to halt"), "readyz 503 naming the halted consumer", hub=hub)
        assert get(base + "/healthz")[0] == 200
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_blocked_enqueuer_stops_the_watchdog():
    wd = fh.Workdir()
    path = wd.file("notify.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    got = []

    def datagrams():
        while True:
            try:
                listener.settimeout(0.05)
                got.append(listener.recv(4096).decode())
            except socket.timeout:
                return got
    consumers = ("  - name: wedged\n    plugin: %s\n    queue: {capacity: 1, overflow: block}\n"
                 "    options: {consume_ms: forever}\n" % os.path.join(fh.TEST_PLUGINS, "hang.so"))
    env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}
    with fh.Cleanup() as cleanup:
        cleanup.add(listener)
        pub = cleanup.add(fh.Publisher())
        hub, base = hub_with_http(cleanup, wd, [pub.endpoint], consumers, env=env)
        pub.wait_subscribed(hub=hub)
        fh.wait_for(lambda: any("WATCHDOG=1" in d for d in datagrams()), "WATCHDOG=1", hub=hub)
        for i in range(5):  # one consumed for ever, one queued, the third blocks
            pub.send("org.test.block", "{}")
        fh.wait_for(lambda: any("the enqueuer is not advancing" in d for d in datagrams()),
                    "a STATUS without the watchdog", hub=hub)
        first = [i for i, d in enumerate(got) if "the enqueuer is not advancing" in d][0]
        assert "WATCHDOG=1" not in got[first], got[first]
        fh.wait_for(lambda: len(datagrams()) > first + 2, "two more STATUS datagrams", hub=hub)
        assert not any("WATCHDOG=1" in d for d in got[first:]), got[first:]
        hub.wait_log("fanhub: warning: watchdog: not fed: the enqueuer has not advanced for")
        status, _, body = get(base + "/healthz")
        assert status == 503 and "the enqueuer has not advanced" in body["reasons"][0], body
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_endpoint_down_then_up, test_stuck_consumer_then_not, test_full_spool_then_drained,
             test_a_consumer_down_then_up_and_one_halted, test_blocked_enqueuer_stops_the_watchdog])
