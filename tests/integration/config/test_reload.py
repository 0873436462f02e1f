"""Hot reload against the real hub, under load: consumers are added,
removed and re-configured while a publisher streams; surviving consumers
miss nothing; a replaced consumer's old and new instances together see
every message once, in order; an invalid configuration is refused and the
hub keeps running on the old one."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

N = 20000


def log_consumer(name, path, topics=None):
    text = "  - name: %s\n    plugin: log\n    queue: {capacity: 50000}\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    return text + "    options: {path: %s, flush_ms: 20}\n" % json.dumps(path)


def stream(pub, n, done, reloaded):
    """Publishes n messages, paced; the second half waits for the first
    reload to have answered, so that it lands mid-stream however slow the
    machine (a sanitizer build on a busy one finished the stream first)."""
    for i in range(n):
        if i == n // 2:
            reloaded.wait(120)
        pub.send("org.reload.%d" % (i % 3), '{"i":%d}' % i)
        if i % 200 == 199:
            time.sleep(0.01)
    done.set()


def bodies(path):
    return [json.loads(l["body"])["i"] for l in fh.read_jsonl(path)]


def test_reload_under_load():
    wd = fh.Workdir()
    pub = fh.Publisher()
    head = "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n" % pub.endpoint
    v1 = head + log_consumer("keep", wd.file("keep")) + log_consumer("gone", wd.file("gone")) \
        + log_consumer("change", wd.file("change-old"))
    hub = fh.Hub(wd, v1)
    done, reloaded = threading.Event(), threading.Event()
    try:
        pub.wait_subscribed(hub=hub)
        sender = threading.Thread(target=stream, args=(pub, N, done, reloaded))
        sender.start()
        fh.wait_for(lambda: fh.count_lines(wd.file("keep")) > N // 4, "a quarter", hub=hub)
        # v2: 'gone' removed, 'new' added, 'change' re-configured.
        v2 = head + log_consumer("keep", wd.file("keep")) \
            + log_consumer("change", wd.file("change-new")) + log_consumer("new", wd.file("new"))
        with open(hub.config, "w") as f:
            f.write(v2 + "control: %s\n" % hub.control)
        status, out, err = fh.run(["reload", "-e", hub.control])
        reloaded.set()
        assert status == 0 and "3 consumers" in out, (status, out, err)
        # An invalid file: refused, the hub carries on with v2.
        with open(hub.config, "w") as f:
            f.write(v2.replace("plugin: log", "plugin: nosuchplugin", 1)
                    + "control: %s\n" % hub.control)
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 1 and "refused" in err and "nosuchplugin" in err, (status, out, err)
        # The same by SIGHUP, with the valid v2 again (nothing changes).
        with open(hub.config, "w") as f:
            f.write(v2 + "control: %s\n" % hub.control)
        hub.send_signal(signal.SIGHUP)
        hub.wait_log("reloaded")
        sender.join()
        assert done.is_set()
        fh.wait_for(lambda: fh.count_lines(wd.file("keep")) == N, "keep has all", hub=hub)
        fh.wait_for(lambda: fh.count_lines(wd.file("change-old"))
                    + fh.count_lines(wd.file("change-new")) == N, "change has all", hub=hub)
        assert hub.stop() == 0, hub.log()
        # The survivor missed nothing, in order.
        assert bodies(wd.file("keep")) == list(range(N))
        # The replaced one: old then new, every message once, in order.
        old, new = bodies(wd.file("change-old")), bodies(wd.file("change-new"))
        assert old + new == list(range(N)), (len(old), len(new))
        # The removed one: a prefix; the added one: the rest, from some point.
        gone, added = bodies(wd.file("gone")), bodies(wd.file("new"))
        assert gone == list(range(len(gone))) and 0 < len(gone) < N, len(gone)
        assert added == list(range(N - len(added), N)) and 0 < len(added) < N, len(added)
        log = hub.log()
        assert "consumer 'gone': removed by the reload" in log, log
        assert "consumer 'new': added by the reload" in log, log
        assert "reload refused" in log, log
        wd.cleanup()
    finally:
        done.set()
        reloaded.set()
        hub.kill()
        pub.close()


def test_reload_refuses_endpoint_changes():
    wd = fh.Workdir()
    pub = fh.Publisher()
    text = ("bus:\n  connect: [%s]\nconsumers:\n" % pub.endpoint) + log_consumer("a", wd.file("a"))
    hub = fh.Hub(wd, text)
    try:
        hub.wait_ready()
        with open(hub.config, "w") as f:
            f.write(text.replace(pub.endpoint, "tcp://127.0.0.1:%d" % fh.free_port())
                    + "control: %s\n" % hub.control)
        status, _, err = fh.run(["reload", "-e", hub.control])
        assert status == 1 and "reload refused: bus.connect needs a restart" in err, err
        assert hub.request("PING") == b"PONG"
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_reload_under_load, test_reload_refuses_endpoint_changes])
