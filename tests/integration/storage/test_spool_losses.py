"""Spool losses against a real `fanhub run` (issue 28, item 6): a stray
directory named like a segment is ignored with a warning (on main the hub
refused to start, exit 2); segments deleted while the hub runs, and the
whole spool directory removed, are counted in spool_lost and logged, the
backlog goes to 0 (on main it stayed up, a false backlog, and the removed
directory wedged the consumer), and every message not lost is delivered.
The spool's own cases, one by one, are in tests/unit/storage/test_spool_losses.c.
Waits on conditions only."""
import glob
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def config(wd, pub):
    return ("bus:\n  connect: [%s]\nstate_dir: %s\nspool: {segment_bytes: 4096}\n"
            "consumers:\n"
            "  - name: c\n    plugin: %s/crash.so\n"
            "    queue: {overflow: spill, write_ahead: true}\n"
            "    options: {seen: %s, gate: %s}\n"
            % (pub.endpoint, wd.file("state"), fh.TEST_PLUGINS, wd.file("seen"), wd.file("gate")))


def body(i):
    return json.dumps({"msg_id": "2026-%05d" % i, "pad": "x" * 200})


def seen(wd):
    if not os.path.exists(wd.file("seen")):
        return set()
    with open(wd.file("seen")) as f:
        return set(f.read().splitlines())


def counts(hub):
    return hub.consumer(hub.stats(), "c")


def publish(pub, hub, first, count):
    for i in range(first, first + count):
        pub.send("org.test.loss", body(i))
    fh.wait_for(lambda: counts(hub)["spilled"] >= first + count, "spooled", hub=hub)


def test_stray_directory_named_like_a_segment():
    wd = fh.Workdir()
    pub = fh.Publisher()
    open(wd.file("gate"), "w").close()
    hub = fh.Hub(wd, config(wd, pub), name="first")
    try:
        hub.wait_ready()
        assert hub.stop() == 0, hub.log()
        os.makedirs(wd.file("state/c/seg-0000000000000007.spool"))
        pub.close()
        pub = fh.Publisher()  # a fresh one: its first subscriber is this hub
        hub = fh.Hub(wd, config(wd, pub), name="second")
        pub.wait_subscribed(hub=hub)
        publish(pub, hub, 0, 5)
        fh.wait_for(lambda: counts(hub)["completed"] == 5, "delivered", hub=hub)
        assert "seg-0000000000000007.spool: named like a segment, but not a regular file: " \
            "ignored" in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_segments_deleted_while_running():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub))
    try:
        pub.wait_subscribed(hub=hub)
        publish(pub, hub, 0, 300)  # the plugin waits at the gate meanwhile
        for seg in (3, 4):
            os.unlink(wd.file("state/c/seg-%016x.spool" % seg))
        open(wd.file("gate"), "w").close()
        fh.wait_for(lambda: counts(hub)["backlog"] == 0, "no backlog", hub=hub)
        c = counts(hub)
        assert c["spool_lost"] > 0, c
        assert c["completed"] + c["spool_lost"] == 300, c
        assert c["dropped"] == c["spool_lost"] and c["evicted"] == c["spool_lost"], c
        assert len(seen(wd)) == c["completed"], c
        assert "seg-0000000000000003.spool: missing: " in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_spool_directory_removed_while_running():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub))
    try:
        pub.wait_subscribed(hub=hub)
        publish(pub, hub, 0, 100)
        shutil.rmtree(wd.file("state/c"))
        # The next tick (or segment) makes it again; the writer goes on there.
        hub.wait_log("the spool's directory was removed while the hub had it open: made again")
        publish(pub, hub, 100, 20)
        assert glob.glob(wd.file("state/c/seg-*.spool")), os.listdir(wd.file("state/c"))
        open(wd.file("gate"), "w").close()
        fh.wait_for(lambda: counts(hub)["backlog"] == 0, "no backlog", hub=hub)
        c = counts(hub)
        assert c["spool_lost"] > 0, c
        assert c["completed"] + c["spool_lost"] == 120, c
        assert set(body(i) for i in range(100, 120)) <= seen(wd), c
        # It keeps working.
        publish(pub, hub, 120, 5)
        fh.wait_for(lambda: counts(hub)["completed"] == c["completed"] + 5, "after", hub=hub)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_stray_directory_named_like_a_segment, test_segments_deleted_while_running,
             test_spool_directory_removed_while_running])
