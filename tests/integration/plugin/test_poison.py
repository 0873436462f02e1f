"""Poison messages in a C plugin (issue 24, item 3): a plugin that
segfaults on one spooled message crashes the hub; the crash line names the
message and the crash handler records it in the state_dir; restarted as a
supervisor would, the hub dead-letters the message after max_crashes
crashes and stays up, every other message delivered and the other consumer
working. Waits on conditions only."""
import json
import os
import resource
import shutil
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

MESSAGES = 20
POISON = 7  # the index of the message that kills the plugin
MSG_ID = "2026-4f1c-poison"


def body(i):
    if i == POISON:
        return json.dumps({"msg_id": MSG_ID, "i": i, "kill": "POISON"})
    return json.dumps({"msg_id": "2026-%04d" % i, "i": i})


def config(wd, pub, max_crashes=None, workers=1):
    extra = "    max_crashes: %d\n" % max_crashes if max_crashes else ""
    extra += "    workers: %d\n" % workers if workers > 1 else ""
    return ("bus:\n  connect: [%s]\nstate_dir: %s\nconsumers:\n"
            "  - name: bad\n    plugin: %s/crash.so\n"
            "    queue: {overflow: spill, write_ahead: true}\n%s"
            "    options: {how: segv, marker: POISON, seen: %s, gate: %s}\n"
            "  - name: good\n    plugin: %s/crash.so\n    options: {seen: %s}\n"
            % (pub.endpoint, wd.file("state"), fh.TEST_PLUGINS, extra, wd.file("bad.seen"),
               wd.file("gate"), fh.TEST_PLUGINS, wd.file("good.seen")))


def lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return f.read().splitlines()


def stats_or_none(hub, name):
    """The consumer's stats, or None while the hub is not answering."""
    if not os.path.exists(hub.control[len("ipc://"):]):
        return None
    try:
        return hub.consumer(json.loads(hub.request("STATS", timeout_ms=1000)), name)
    except AssertionError:
        return None


def test_poison_message_is_dead_lettered_after_max_crashes():
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub), name="run0")
    hubs = [hub]
    try:
        # Every message is in the spool before the plugin sees any.
        pub.wait_subscribed(hub=hub)
        for i in range(MESSAGES):
            pub.send("org.test.poison", body(i))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "bad")["spilled"] == MESSAGES
                    and hub.consumer(hub.stats(), "good")["completed"] == MESSAGES,
                    "all spooled", hub=hub)
        open(wd.file("gate"), "w").close()
        assert hub.wait() == -signal.SIGSEGV, hub.log()
        log = hub.log()
        assert ("fatal signal 11 (SIGSEGV) inside consume of consumer 'bad', plugin %s/crash.so, "
                "message %d (topic org.test.poison, msg_id %s), recorded in its state_dir"
                % (fh.TEST_PLUGINS, POISON + 1, MSG_ID)) in log, log
        # The supervisor: start again until the hub stays up.
        crashes = 1
        while True:
            pub.close()
            pub = fh.Publisher()
            hub = fh.Hub(wd, config(wd, pub), name="run%d" % len(hubs))
            hubs.append(hub)
            fh.wait_for(lambda: hub.proc.poll() is not None
                        or (stats_or_none(hub, "bad") or {}).get("dead_lettered") == 1,
                        "a crash or the dead letter")
            if hub.proc.poll() is None:
                break
            assert hub.wait() == -signal.SIGSEGV, hub.log()
            crashes += 1
            assert crashes <= 3, "still crashing after max_crashes:\n" + hub.log()
            assert "message %d crashed the hub %d time" % (POISON + 1, crashes - 1) in hub.log()
        assert crashes == 3, crashes
        log = hub.log()
        assert ("message %d (org.test.poison) crashed the hub 3 times: signal 11 (SIGSEGV) in "
                "consume (max_crashes 3): dead-lettered, not given to the plugin"
                % (POISON + 1)) in log, log
        # Every other message delivered (some twice: the cursor lags), the poison never.
        others = set(body(i) for i in range(MESSAGES) if i != POISON)
        fh.wait_for(lambda: others <= set(lines(wd.file("bad.seen"))), "the others", hub=hub)
        assert body(POISON) not in lines(wd.file("bad.seen"))
        bad = hub.consumer(hub.stats(), "bad")
        assert bad["dead_lettered"] == 1 and bad["failed"] == 1, bad
        status, out, err = fh.run(["dead-letter", "list", "--json", "-c", hub.config, "bad"])
        entries = [json.loads(line) for line in out.splitlines()]
        assert status == 0 and len(entries) == 1, (status, out, err)
        assert entries[0]["reason"] == "crashed the hub 3 times: signal 11 (SIGSEGV) in consume", \
            entries
        # Both consumers work on.
        pub.wait_subscribed(hub=hub)
        good = hub.consumer(hub.stats(), "good")["completed"]
        for i in range(MESSAGES, MESSAGES + 5):
            pub.send("org.test.poison", body(i))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "good")["completed"] == good + 5,
                    "the good consumer", hub=hub)
        assert len(set(lines(wd.file("good.seen")))) == MESSAGES + 5
        fh.wait_for(lambda: body(MESSAGES + 4) in lines(wd.file("bad.seen")), "bad", hub=hub)
        assert hub.stop() == 0, hub.log()
        # Nothing spooled any more: the next start empties the crash record.
        hub = fh.Hub(wd, config(wd, pub), name="clean")
        hubs.append(hub)
        hub.wait_ready()
        assert os.path.getsize(wd.file("state/bad/crashes")) == 0
        assert "crashed the hub" not in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        for h in hubs:
            h.kill()
        pub.close()


def test_max_crashes_setting():
    """max_crashes: 1 dead-letters after one crash (here in a pool of two
    workers); 0 is refused with FILE:LINE:COL."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    wd = fh.Workdir()
    pub = fh.Publisher()
    path = wd.write("zero.yaml", config(wd, pub).replace(
        "    options: {how", "    max_crashes: 0\n    options: {how"))
    status, _, err = fh.run(["check", "-c", path])
    assert status == 2 and "zero.yaml:8:18" in err and "max_crashes" in err, err
    hub = fh.Hub(wd, config(wd, pub, max_crashes=1, workers=2), name="one")
    hubs = [hub]
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("org.test.poison", body(POISON))
        pub.send("org.test.poison", body(1))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "bad")["spilled"] == 2, "spooled", hub=hub)
        open(wd.file("gate"), "w").close()
        assert hub.wait() == -signal.SIGSEGV, hub.log()
        hub = fh.Hub(wd, config(wd, pub, max_crashes=1, workers=2), name="two")
        hubs.append(hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "bad")["completed"] == 1, "the other",
                    hub=hub)
        assert hub.consumer(hub.stats(), "bad")["dead_lettered"] == 1
        assert "crashed the hub 1 time: signal 11" in hub.log(), hub.log()
        status, out, err = fh.run(["dead-letter", "list", "--json", "-c", hub.config, "bad"])
        entries = [json.loads(line) for line in out.splitlines()]
        assert [e["reason"] for e in entries] == [
            "crashed the hub 1 time: signal 11 (SIGSEGV) in consume"], (out, err)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        for h in hubs:
            h.kill()
        pub.close()


def test_init_and_fini_crashes_are_named():
    """A crash in init or fini is named as one in consume is, without a
    message (and nothing is recorded: no message to quarantine)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    wd = fh.Workdir()
    for where in ("init", "fini"):
        text = ("bus:\n  connect: [tcp://127.0.0.1:1]\nstate_dir: %s\nconsumers:\n"
                "  - name: %s\n    plugin: %s/crash.so\n    options: {in: %s}\n"
                % (wd.file("state"), where, fh.TEST_PLUGINS, where))
        hub = fh.Hub(wd, text, name=where)
        try:
            if where == "fini":
                hub.wait_ready()
                hub.send_signal(signal.SIGTERM)
            assert hub.wait() == -signal.SIGSEGV, hub.log()
            assert ("fatal signal 11 (SIGSEGV) inside %s of consumer '%s', plugin %s/crash.so: "
                    "the hub stops now" % (where, where, fh.TEST_PLUGINS)) in hub.log(), hub.log()
        finally:
            hub.kill()
    assert os.path.getsize(wd.file("state/fini/crashes")) == 0
    wd.cleanup()


def crashed_once(wd, pub):
    """A state_dir whose spool holds the poison and the messages after it,
    and whose crash record names the poison once: the hub that made it
    crashed on it. The record's line."""
    hub = fh.Hub(wd, config(wd, pub), name="crash")
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(MESSAGES):
            pub.send("org.test.poison", body(i))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "bad")["spilled"] == MESSAGES,
                    "all spooled", hub=hub)
        open(wd.file("gate"), "w").close()
        assert hub.wait() == -signal.SIGSEGV, hub.log()
    finally:
        hub.kill()
    with open(wd.file("state/bad/crashes"), "rb") as f:
        record = f.read()
    assert record.startswith(b"fanhub-crash 1 %d " % (POISON + 1)), record
    return record


def test_hostile_crash_records():
    """Issue 39, item 3: a crash record that is a FIFO, a symbolic link,
    prefixed with zeros or 15 MiB long neither hangs the start, nor
    damages another file, nor hides its records, nor floods the log."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    wd = fh.Workdir()
    pub = fh.Publisher()
    record = crashed_once(wd, pub)
    shutil.copytree(wd.file("state"), wd.file("state.crashed"), symlinks=True)
    crashes = wd.file("state/bad/crashes")

    def restore(contents=None):
        shutil.rmtree(wd.file("state"))
        shutil.copytree(wd.file("state.crashed"), wd.file("state"), symlinks=True)
        os.unlink(crashes)
        if contents is not None:
            with open(crashes, "wb") as f:
                f.write(contents)

    # A FIFO: the start neither hangs nor reads it; the hub says why and exits.
    restore()
    os.mkfifo(crashes)
    hub = fh.Hub(wd, config(wd, pub), name="fifo")
    try:
        assert hub.wait() != 0, hub.log()
        assert "%s: not a regular file (a FIFO): refused" % crashes in hub.log(), hub.log()
    finally:
        hub.kill()
    # A symbolic link: refused, its target neither truncated nor appended to.
    restore()
    precious = wd.write("precious", "not a crash record\n")
    os.symlink(precious, crashes)
    hub = fh.Hub(wd, config(wd, pub), name="link")
    try:
        assert hub.wait() != 0, hub.log()
        assert "%s: a symbolic link: refused" % crashes in hub.log(), hub.log()
    finally:
        hub.kill()
    with open(precious) as f:
        assert f.read() == "not a crash record\n"
    # Zeros before the records (a machine crash): the records are found,
    # the poison is quarantined at max_crashes instead of crashing the hub.
    restore(b"\0" * 40 + record * 3)
    hub = fh.Hub(wd, config(wd, pub), name="zeros")
    try:
        fh.wait_for(lambda: hub.proc.poll() is not None
                    or (stats_or_none(hub, "bad") or {}).get("dead_lettered") == 1,
                    "the dead letter")
        assert hub.proc.poll() is None, hub.log()
        assert "crashes: 40 bytes that are not crash records skipped" in hub.log(), hub.log()
        assert "crashed the hub 3 times: signal 11 (SIGSEGV) in consume" in hub.log()
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
    # 15 MiB of records: read, and said in a few lines.
    restore()
    with open(crashes, "wb") as f:
        n = 0
        while f.tell() < 15 * 1024 * 1024:
            f.write(b"fanhub-crash 1 %d %08x 11\n" % (1000000 + n, n))
            n += 1
        f.write(record * 3)
    hub = fh.Hub(wd, config(wd, pub), name="big")
    try:
        fh.wait_for(lambda: hub.proc.poll() is not None
                    or (stats_or_none(hub, "bad") or {}).get("dead_lettered") == 1,
                    "the dead letter")
        assert hub.proc.poll() is None, hub.log()
        assert hub.stop() == 0, hub.log()
        said = [line for line in hub.log().splitlines() if "crash" in line]
        assert len(said) <= 5, "\n".join(said[:20])
        assert "the crash record names %d messages in all, 1 of them at max_crashes" % (n + 1) \
            in hub.log(), hub.log()
    finally:
        hub.kill()
    pub.close()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_poison_message_is_dead_lettered_after_max_crashes, test_max_crashes_setting,
             test_init_and_fini_crashes_are_named, test_hostile_crash_records])
