"""Drop-ins (include:) and ${VAR} against the real binary: `fanhub check`
and `fanhub run` read the drop-ins alike and refuse the same mistakes with
the same FILE:LINE:COL; a reload (`fanhub reload`, then SIGHUP) adds,
changes and removes the consumers of drop-ins added, changed and removed,
while the main file stays as it was."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def log_consumer(name, path, topics=None):
    text = "  - name: %s\n    plugin: log\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    return text + "    options: {path: %s, flush_ms: 0}\n" % json.dumps(path)


def names(hub):
    return sorted(c["name"] for c in hub.stats()["consumers"])


def send_and_wait(hub, pub, topic, n, expect):
    """Publishes n messages on topic; waits until each file in expect has
    its count of lines."""
    for i in range(n):
        pub.send(topic, '{"i":%d}' % i)
    for path, count in expect.items():
        fh.wait_for(lambda: fh.count_lines(path) == count,
                    "%s to have %d lines" % (os.path.basename(path), count), hub=hub)


def test_reload_adds_changes_removes():
    wd = fh.Workdir()
    pub = fh.Publisher()
    os.mkdir(wd.file("conf.d"))
    main = ("bus:\n  connect: [%s]\ninclude: conf.d/*.yaml\nconsumers:\n" % pub.endpoint
            + log_consumer("main", wd.file("main.log")))
    wd.write("conf.d/a.yaml", "consumers:\n" + log_consumer("a", "${LOGDIR}/a1.log", ["t.a"]))
    hub = fh.Hub(wd, main, env={"LOGDIR": wd.path})
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_ready()
        assert names(hub) == ["a", "main"]
        send_and_wait(hub, pub, "t.a", 5, {wd.file("main.log"): 5, wd.file("a1.log"): 5})

        # A new drop-in and a changed one: b added, a replaced (new path).
        wd.write("conf.d/b.yaml", "consumers:\n" + log_consumer("b", wd.file("b.log"), ["t.b"]))
        wd.write("conf.d/a.yaml", "consumers:\n" + log_consumer("a", "${LOGDIR}/a2.log", ["t.a"]))
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0 and "3 consumers" in out, (status, out, err)
        assert names(hub) == ["a", "b", "main"]
        send_and_wait(hub, pub, "t.a", 4, {wd.file("main.log"): 9, wd.file("a2.log"): 4})
        send_and_wait(hub, pub, "t.b", 3, {wd.file("main.log"): 12, wd.file("b.log"): 3})
        assert fh.count_lines(wd.file("a1.log")) == 5

        # A drop-in removed, by SIGHUP this time: a goes, b stays.
        os.unlink(wd.file("conf.d/a.yaml"))
        hub.send_signal(signal.SIGHUP)
        hub.wait_log("reloaded %s: 2 consumers" % hub.config)
        assert names(hub) == ["b", "main"]
        send_and_wait(hub, pub, "t.a", 2, {wd.file("main.log"): 14})
        send_and_wait(hub, pub, "t.b", 1, {wd.file("main.log"): 15, wd.file("b.log"): 4})
        assert fh.count_lines(wd.file("a2.log")) == 4

        # A drop-in that sets a hub key: the reload is refused, at its key.
        wd.write("conf.d/c.yaml", "state_dir: /tmp\n")
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 1, (status, out, err)
        assert "%s:1:1: state_dir: a drop-in holds consumers: only" % wd.file("conf.d/c.yaml") \
            in err, err
        assert names(hub) == ["b", "main"]
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_check_and_run_read_dropins_alike():
    wd = fh.Workdir()
    os.mkdir(wd.file("conf.d"))
    main = wd.write("fanhub.yaml", "bus: {connect: tcp://127.0.0.1:9}\ninclude: conf.d/*.yaml\n"
                    "control: ipc://%s\n" % wd.file("ctl"))
    # An empty conf.d: no consumer in all.
    status, out, err = fh.run(["check", "-c", main])
    assert status == 2 and "%s:2:10: include: no consumers" % main in err, (status, out, err)
    wd.write("conf.d/10-log.yaml", "consumers:\n" + log_consumer("archive", wd.file("x.log")))
    wd.write("conf.d/20-null.yaml", 'consumers:\n  - {name: "${NAME:-quiet}", plugin: "null"}\n')
    status, out, err = fh.run(["check", "-c", main])
    assert status == 0 and "OK, 2 consumers" in out, (status, out, err)
    assert "  archive: " in out and "  quiet: " in out, out

    # The same mistakes refused by check and by run, at the same place.
    wrong = {
        "conf.d/20-null.yaml": ('consumers:\n  - {name: archive, plugin: "null"}\n',
                                "conf.d/20-null.yaml:2:12: consumers[0].name: duplicate consumer "
                                "name 'archive' (first defined at %s:2:5)"
                                % wd.file("conf.d/10-log.yaml")),
        "conf.d/30-bus.yaml": ("bus: {bind: tcp://127.0.0.1:9}\n",
                               "conf.d/30-bus.yaml:1:1: bus: a drop-in holds consumers: only; "
                               "hub settings stay in the main file (%s)" % main),
        "conf.d/40-env.yaml": ("consumers:\n  - name: x\n    plugin: ${FH_SURELY_UNSET}\n",
                               "conf.d/40-env.yaml:3:13: consumers[0].plugin: ${FH_SURELY_UNSET}: "
                               "the environment variable FH_SURELY_UNSET is not set"),
    }
    for name, (text, message) in wrong.items():
        saved = None
        if os.path.exists(wd.file(name)):
            with open(wd.file(name)) as f:
                saved = f.read()
        wd.write(name, text)
        expected = os.path.join(wd.path, message)
        status, out, err = fh.run(["check", "-c", main])
        assert status == 2 and expected in err, (name, status, out, err)
        hub = fh.Hub(wd, open(main).read(), name="run")
        # The hub's copy sits beside the main file, so the drop-ins are the same.
        assert hub.wait() == 2, hub.log()
        assert expected.replace(main, hub.config) in hub.log(), (name, hub.log())
        if saved is None:
            os.unlink(wd.file(name))
        else:
            wd.write(name, saved)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_reload_adds_changes_removes, test_check_and_run_read_dropins_alike])
