"""fanhub emit against the real hub: each exit status produced by a real
scenario. 0: every matching consumer completed it; 1: one failed it (or
its queue was full); 3: no consumer matched; 124: not handled in time."""
import json

import fanhublib as fh


def config(pub, wd):
    return ("bus:\n  connect: [%s]\nconsumers:\n"
            "  - name: archive\n    plugin: log\n    topics: ['org.ok.', 'org.fail.', 'org.held.']\n"
            "    options: {path: %s, flush_ms: 0}\n"
            "  - name: picky\n    plugin: %s/flaky.so\n    topics: ['org.fail.']\n"
            "    retry: {max_attempts: 2, initial_ms: 1, max_ms: 1}\n"
            "    options: {retries: 0, final: fail}\n"
            "  - name: held\n    plugin: %s/sleep.so\n    topics: ['org.held.']\n"
            "    options: {release_file: %s}\n"
            % (pub.endpoint, json.dumps(wd.file("archive.jsonl")), fh.TEST_PLUGINS,
               fh.TEST_PLUGINS, json.dumps(wd.file("release"))))


def test_emit_exit_codes():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, wd))
    try:
        hub.wait_ready()
        # 0: the only matching consumer completed it; its output has it.
        status, out, err = fh.run(["emit", "--wait", "-e", hub.control, "org.ok.deploy",
                                   '{"step": 1}'])
        assert status == 0, (status, out, err)
        assert out == "archive: completed\n", out
        lines = fh.read_jsonl(wd.file("archive.jsonl"))
        assert lines[-1]["topic"] == "org.ok.deploy" and lines[-1]["body"] == '{"step": 1}'
        # 1: one of two consumers failed it.
        status, out, err = fh.run(["emit", "--wait", "-e", hub.control, "org.fail.x", "b"])
        assert status == 1, (status, out, err)
        assert "picky: failed\n" in out and "archive: completed\n" in out, out
        # 3: nobody listens to this topic.
        status, out, err = fh.run(["emit", "--wait", "-e", hub.control, "org.nobody", "b"])
        assert status == 3 and "no consumer matched" in out, (status, out, err)
        # 124: a consumer is held until the test says so.
        status, out, err = fh.run(["emit", "--wait", "--timeout", "0.3", "-e", hub.control,
                                   "org.held.y", "b"])
        assert status == 124, (status, out, err)
        assert "held: pending" in out and "archive: completed" in out, out
        open(wd.file("release"), "w").close()
        # Without --wait: routed is enough.
        status, out, err = fh.run(["emit", "-e", hub.control, "org.ok.z", "-"], stdin=b"from stdin")
        assert status == 0, (status, out, err)
        fh.wait_for(lambda: fh.read_jsonl(wd.file("archive.jsonl"))[-1]["body"] == "from stdin",
                    "the stdin body", hub=hub)
        # The hub counts the emitted messages as handled once each is done
        # (the archive line is written inside consume, a moment before).
        fh.wait_for(lambda: hub.stats()["hub"]["handled"] >= 4, "4 emitted messages handled",
                    hub=hub)
        assert hub.stop() == 0, hub.log()
        # No hub: a clear error, status 1.
        status, _, err = fh.run(["emit", "-e", hub.control, "org.ok.q", "b"])
        assert status == 1 and "is the hub running" in err, err
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_emit_usage_and_malformed():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, wd) + "  \n")
    try:
        hub.wait_ready()
        assert fh.run(["emit", "-e", hub.control])[0] == 2
        assert fh.run(["emit", "--timeout", "x", "-e", hub.control, "t"])[0] == 2
        # A topic that is not UTF-8 is refused by the hub like bus input.
        status, _, err = fh.run([b"emit", b"-e", hub.control.encode(), b"org.ok.\xff\xfe", b"b"])
        assert status == 1 and "malformed" in err, (status, err)
        assert hub.stats()["hub"]["malformed_by_reason"]["topic_not_utf8"] == 1
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_emit_is_published_on_bus_publish():
    """bus.publish: a pyzmq subscriber sees the emitted message."""
    import zmq
    wd = fh.Workdir()
    pub = fh.Publisher()
    out_port = fh.free_port()
    hub = fh.Hub(wd, config(pub, wd).replace(
        "bus:\n", "bus:\n  publish: [tcp://127.0.0.1:%d]\n" % out_port, 1))
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    try:
        hub.wait_ready()
        sub.connect("tcp://127.0.0.1:%d" % out_port)
        sub.setsockopt(zmq.SUBSCRIBE, b"org.ok.")
        # Slow joiner: emit until the subscriber has one (each is routed too).
        got = None
        for i in range(200):
            status, _, err = fh.run(["emit", "-e", hub.control, "org.ok.pub", "n%d" % i])
            assert status == 0, err
            if sub.poll(50):
                got = sub.recv_multipart()
                break
        assert got and got[0] == b"org.ok.pub" and got[1].startswith(b"n"), got
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        sub.close()
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_emit_exit_codes, test_emit_usage_and_malformed,
             test_emit_is_published_on_bus_publish])
