"""Reloads that race other control requests (issue 11): an EMIT whose
answer comes after a reload moved the consumers about, and a burst of
reloads while an old instance drains. Deadlines only turn a hang into a
failure; nothing waits for time."""
import json
import os
import signal
import subprocess
import sys
import threading

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
from test_control_plane import ANSWER_S, crash_consumer, head, rewrite, stop_within


def held_consumer(name, release, ms=0):
    return ("  - name: %s\n    plugin: %s/sleep.so\n    queue: {capacity: 100}\n"
            "    options: {ms: %d, release_file: %s}\n"
            % (name, fh.TEST_PLUGINS, ms, json.dumps(release)))


def replace_config(hub, text):
    """Writes the file whole, then renames it into place: a reload under
    way reads either file, never a half-written one."""
    with open(hub.config + ".new", "w") as f:
        f.write(text + "control: %s\n" % hub.control)
    os.rename(hub.config + ".new", hub.config)


def test_emit_outcomes_keep_their_consumer_across_a_reload():
    """EMIT --wait to consumers a and b; b holds it. A reload removes a
    and puts a new consumer c where b was, b where a was. The answer
    names a and b, each with its own outcome, and nothing of c."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")
    hub = fh.Hub(wd, head(pub) + crash_consumer("a") + held_consumer("b", release))
    emit = None
    try:
        hub.wait_ready()
        emit = subprocess.Popen([fh.BIN, "emit", "--wait", "-e", hub.control, "org.cp.emit", "{}"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "b")["in_flight"] == 1, "b holds it",
                    hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "a")["completed"] == 1, "a completed it",
                    hub=hub)
        rewrite(hub, head(pub) + held_consumer("b", release) + crash_consumer("c"))
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, (status, out, err)
        assert [c["name"] for c in hub.stats()["consumers"]] == ["b", "c"]
        open(release, "w").close()
        out, err = emit.communicate(timeout=fh.DEADLINE)
        assert emit.returncode == 0, (emit.returncode, out, err)
        assert sorted(out.splitlines()) == ["a: completed", "b: completed"], out
        wd.cleanup()
    finally:
        if emit and emit.poll() is None:
            emit.kill()
        hub.kill()
        pub.close()


def test_a_burst_of_reloads_while_an_old_instance_drains():
    """20 reloads sent at once, each file changing the held consumer's
    options and naming a marker consumer: every one is answered OK, the
    last file is what runs, and every message is consumed in the end."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")

    def config(k):
        return (head(pub) + held_consumer("held", release, ms=k)
                + crash_consumer("marker%d" % k))

    hub = fh.Hub(wd, config(0))
    sockets = []
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(10):
            pub.send("org.cp.burst", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["enqueued"] == 10,
                    "a backlog held", hub=hub)
        ctx = zmq.Context.instance()
        for k in range(1, 21):
            replace_config(hub, config(k))
            sock = ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(hub.control)
            sock.send(b"RELOAD")
            sockets.append(sock)
        for k, sock in enumerate(sockets, 1):
            assert sock.poll(int(fh.DEADLINE * 1000)), "reload %d unanswered:\n%s" % (
                k, hub.log()[-3000:])
            answer = sock.recv().decode()
            assert answer.startswith("OK reloaded"), (k, answer)
        # The last file runs, whatever the reloads folded into one.
        names = [c["name"] for c in hub.stats()["consumers"]]
        assert names == ["held", "marker20"], names
        for _ in range(3):  # STATS keeps answering meanwhile
            answer = hub.request("STATS", timeout_ms=int(ANSWER_S * 1000))
            assert answer.startswith(b"{"), answer
        open(release, "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["completed"] == 10,
                    "every message consumed", hub=hub)
        for i in range(10, 15):
            pub.send("org.cp.burst", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["completed"] == 15,
                    "the newest instance consumes", hub=hub)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        for sock in sockets:
            sock.close()
        hub.kill()
        pub.close()


def test_a_removed_consumer_drains_in_the_open():
    """A removed consumer finishes what it holds before it goes; STATS
    shows it meanwhile (hub.draining, hub.draining_backlog), and both
    come back to 0 once it is done."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")
    hub = fh.Hub(wd, head(pub) + crash_consumer("keep") + held_consumer("held", release))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(20):
            pub.send("org.cp.drain", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["enqueued"] == 20,
                    "a backlog held", hub=hub)
        assert hub.stats()["hub"]["draining"] == 0
        rewrite(hub, head(pub) + crash_consumer("keep"))
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, (status, out, err)
        stats = hub.stats()
        assert [c["name"] for c in stats["consumers"]] == ["keep"]
        # One in consume (in flight, not backlog), 19 queued: held by the
        # removed one, and nowhere else.
        assert stats["hub"]["draining"] == 1, stats["hub"]
        assert stats["hub"]["draining_backlog"] == 19, stats["hub"]
        open(release, "w").close()
        fh.wait_for(lambda: hub.stats()["hub"]["draining"] == 0, "the removed one gone",
                    hub=hub)
        assert hub.stats()["hub"]["draining_backlog"] == 0
        assert "consumer 'held': the removed instance is done" in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_an_injection_finds_its_consumer_by_name_after_a_reload():
    """A replay to one consumer (INJECT, as `fanhub dead-letter replay`
    sends) waits while a `block` consumer holds the enqueuer; a reload
    meanwhile moves that consumer to another place and puts a new one
    where it was. The message reaches the consumer it names, not the one
    now in its old place; a replay to a consumer the reload removed is
    refused, not given to another."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")
    blocker = ("  - name: blocker\n    plugin: %s/sleep.so\n    topics: [org.cp.bus]\n"
               "    queue: {capacity: 1, overflow: block}\n"
               "    options: {ms: 0, release_file: %s}\n" % (fh.TEST_PLUGINS, json.dumps(release)))
    quiet = "    topics: [org.cp.none]\n"
    v1 = head(pub) + blocker + crash_consumer("a", extra=quiet) + crash_consumer("b", extra=quiet)
    hub = fh.Hub(wd, v1)
    sockets = []
    try:
        pub.wait_subscribed(hub=hub)
        # One in consume, one queued, the third holds the enqueuer.
        for i in range(3):
            pub.send("org.cp.bus", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 3, "the enqueuer held", hub=hub)
        ctx = zmq.Context.instance()
        for name in (b"b", b"a"):
            sock = ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.connect(hub.control)
            sock.send_multipart([b"INJECT", name, b"org.cp.replay", b"{}"])
            sockets.append(sock)
        # b moves to a's place, c takes b's, a is removed.
        rewrite(hub, head(pub) + blocker + crash_consumer("b", extra=quiet)
                + crash_consumer("c", extra=quiet))
        status, out, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, (status, out, err)
        open(release, "w").close()
        answers = []
        for sock in sockets:
            assert sock.poll(int(fh.DEADLINE * 1000)), hub.log()[-3000:]
            answers.append(sock.recv().decode())
        assert answers[0] == "OK", answers
        assert answers[1] == "ERROR consumer 'a' left the hub before the message reached it", \
            answers
        fh.wait_for(lambda: hub.consumer(hub.stats(), "b")["completed"] == 1, "b has it",
                    hub=hub)
        stats = hub.stats()
        assert hub.consumer(stats, "c")["enqueued"] == 0, stats
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        for sock in sockets:
            sock.close()
        hub.kill()
        pub.close()


def test_stats_answers_while_a_plugin_init_blocks_a_reload():
    """A plugin whose init takes long holds the reload (the main thread
    runs init), not the control actor: STATS answers meanwhile, and the
    reload is answered once init returns."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, head(pub) + crash_consumer("calm"))
    result = {}
    try:
        hub.wait_ready()
        rewrite(hub, head(pub) + crash_consumer("calm")
                + "  - name: slowinit\n    plugin: %s/hang.so\n    options: {init_ms: 3000}\n"
                % fh.TEST_PLUGINS)

        def reload():
            result["answer"] = fh.run(["reload", "-e", hub.control])

        thread = threading.Thread(target=reload)
        thread.start()
        fh.wait_for(lambda: "reloading" in hub.log(), "the reload under way", hub=hub)
        for _ in range(5):
            answer = hub.request("STATS", timeout_ms=int(ANSWER_S * 1000))
            assert answer.startswith(b"{"), answer
        thread.join(fh.DEADLINE)
        status, out, err = result["answer"]
        assert status == 0, (status, out, err)
        assert [c["name"] for c in hub.stats()["consumers"]] == ["calm", "slowinit"]
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stop_while_a_plugin_init_holds_a_reload():
    """SIGTERM while a reload waits for a plugin's init: an init that
    returns lets the stop go on cleanly; one that never returns is named
    and the hub exits 1, both within shutdown_timeout and a little."""
    for init, status in (("2000", 0), ("forever", 1)):
        wd = fh.Workdir()
        pub = fh.Publisher()
        config = head(pub, shutdown_timeout=4) + crash_consumer("calm")
        hub = fh.Hub(wd, config)
        try:
            hub.wait_ready()
            rewrite(hub, config + "  - name: slowinit\n    plugin: %s/hang.so\n"
                    "    options: {init_ms: %s}\n" % (fh.TEST_PLUGINS, init))
            hub.send_signal(signal.SIGHUP)
            fh.wait_for(lambda: "reloading" in hub.log(), "the reload under way", hub=hub)
            assert stop_within(hub, 4 + 1.5) == status, (init, hub.log())
            if status:
                assert "still waits for consumer 'slowinit', plugin " in hub.log() \
                    and "hang.so (its init has not returned)" in hub.log(), hub.log()
            wd.cleanup()
        finally:
            hub.kill()
            pub.close()


if __name__ == "__main__":
    fh.main([test_emit_outcomes_keep_their_consumer_across_a_reload,
             test_a_burst_of_reloads_while_an_old_instance_drains,
             test_a_removed_consumer_drains_in_the_open,
             test_an_injection_finds_its_consumer_by_name_after_a_reload,
             test_stats_answers_while_a_plugin_init_blocks_a_reload,
             test_stop_while_a_plugin_init_holds_a_reload])
