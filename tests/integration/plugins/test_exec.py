"""exec: a command per message behind a real `fanhub run`, fed by pyzmq.

The commands are small /bin/sh scripts that write what they saw (stdin,
environment, open descriptors) into the work directory; the test compares
those byte for byte. Exit codes map to OK, RETRY and FAIL; a hanging
command is killed at its timeout; the hub is left with no child, zombie or
not, and keeps working throughout.

Retries: the tests set each consumer's `retry:` so that they hold whatever
the hub's default is (test_exit_codes_and_environment checks that exit 75
is retried once with max_attempts 2)."""
import json
import os
import random
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def exec_yaml(name, options, topics=None, extra=""):
    text = "  - name: %s\n    plugin: exec\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    text += extra
    text += "    options: %s\n" % json.dumps(options)
    return text


def hub_config(pub, consumers):
    return "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n%s" % (pub.endpoint, consumers)


def children_of(pid):
    """(pid, state) of every process whose parent is pid, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append((int(entry), fields[0]))
    return found


def process_gone(pid):
    """True when pid has exited (a zombie waiting for init counts)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def stats_of(hub, name):
    return hub.consumer(hub.stats(), name)


def test_exit_codes_and_environment():
    """Exit 0 -> completed, 75 -> RETRY (retried, then failed), others and
    a signal -> failed, each with its reason logged; the body reaches stdin
    byte for byte and the topic, seq and consumer name the environment."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    d = shlex.quote(wd.path)
    script = (
        'cat > %(d)s/"$FANHUB_SEQ".body\n'
        'printf "%%s\\n%%s\\n%%s\\n" "$FANHUB_TOPIC" "$FANHUB_SEQ" "$FANHUB_CONSUMER"'
        ' > %(d)s/"$FANHUB_SEQ".env\n'
        'case "$FANHUB_TOPIC" in\n'
        '  exit.kill) echo "killing myself" >&2; kill -KILL $$;;\n'
        # $${ is the configuration's escape for the shell's ${ (its ${VAR}).
        '  exit.*) echo "failing with $${FANHUB_TOPIC#exit.}" >&2; exit "$${FANHUB_TOPIC#exit.}";;\n'
        'esac\n' % {"d": d})
    rng = random.Random(7)
    messages = [
        ("exit.0", b"plain text"),
        ("exit.1", bytes(range(256))),
        ("exit.0", b""),
        ("exit.2", b"\x00" * 10),
        ("exit.0", bytes(rng.getrandbits(8) for _ in range(1 << 20))),  # 1 MiB
        ("exit.75", b"retry me"),
        ("exit.0", "é ✓ ünïcödé".encode()),
        ("exit.kill", b"x"),
        ("exit.0", bytes(rng.getrandbits(8) for _ in range(200000))),
    ]
    hub = fh.Hub(wd, hub_config(pub, exec_yaml(
        "runner", {"command": script, "shell": True},
        extra="    retry: {max_attempts: 2, initial_ms: 0, max_ms: 0}\n")))
    try:
        pub.wait_subscribed(hub=hub)
        for topic, body in messages:
            pub.send(topic, body)
        fh.wait_for(lambda: stats_of(hub, "runner")["completed"]
                    + stats_of(hub, "runner")["failed"] >= len(messages),
                    "all messages consumed", hub=hub)
        stats = stats_of(hub, "runner")
        oks = sum(1 for t, _ in messages if t == "exit.0")
        assert stats["completed"] == oks, stats
        assert stats["failed"] == len(messages) - oks, stats
        assert stats["retried"] == 1, stats  # exit 75, once, max_attempts 2
        assert children_of(hub.proc.pid) == [], children_of(hub.proc.pid)

        for seq, (topic, body) in enumerate(messages, 1):
            with open(wd.file("%d.body" % seq), "rb") as f:
                assert f.read() == body, (seq, topic)
            with open(wd.file("%d.env" % seq), "rb") as f:
                assert f.read() == ("%s\n%d\nrunner\n" % (topic, seq)).encode(), seq

        log = hub.log()
        for line in (
                "consumer 'runner': message 2 (exit.1): exit status 1: failing with 1",
                "consumer 'runner': message 4 (exit.2): exit status 2: failing with 2",
                "consumer 'runner': message 6 (exit.75): exit status 75 (EX_TEMPFAIL): "
                "failing with 75; answering RETRY",
                "consumer 'runner': message 8 (exit.kill): killed by signal 9 (SIGKILL): "
                "killing myself",
                "consumer 'runner': command succeeds again after 1 failed run\n",
                "consumer 'runner': command succeeds again after 2 failed runs\n"):
            assert line in log, (line, log)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_hang_unread_body_and_fds():
    """A command that hangs (and ignores SIGTERM) is killed at its timeout,
    with whatever it started; a command that never reads a 1 MiB body does
    not block; the command sees only fds 0, 1 and 2 of the hub's many
    (some of them inherited without close-on-exec); no zombie is left; the
    hub works on."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    d = shlex.quote(wd.path)
    hang = (
        'case "$FANHUB_TOPIC" in\n'
        '  hang) echo $$ > %(d)s/hang.pid.tmp; mv %(d)s/hang.pid.tmp %(d)s/hang.pid\n'
        '        sleep 600 & echo $! > %(d)s/bg.pid.tmp; mv %(d)s/bg.pid.tmp %(d)s/bg.pid\n'
        '        trap "" TERM; echo "hanging now" >&2\n'
        '        while :; do sleep 1; done;;\n'
        'esac\n'
        'echo fine > %(d)s/"$FANHUB_SEQ".fine\n' % {"d": d})
    consumers = (
        exec_yaml("hang", {"command": hang, "shell": True, "timeout_ms": 2000,
                           "kill_grace_ms": 200},
                  topics=["hang", "fine"], extra="    retry: {max_attempts: 1}\n")
        + exec_yaml("unread", {"command": ["/bin/true"]}, topics=["big"],
                    extra="    retry: {max_attempts: 1}\n")
        + exec_yaml("fds", {"command": "exec ls /proc/self/fd > %s/fds" % d, "shell": True},
                    topics=["fds"], extra="    retry: {max_attempts: 1}\n"))
    # The hub as a daemon manager may start it: with descriptors it did not
    # open and that are not close-on-exec (7, 8, 9 here). libzmq marks its
    # own close-on-exec, but the command must not depend on anyone's care.
    wrapper = wd.write("fanhub-with-fds", "#!/bin/sh\nexec 7</dev/null 8>>%s 9<>/dev/null\n"
                       "exec %s \"$@\"\n" % (shlex.quote(wd.file("leak")), shlex.quote(fh.BIN)))
    os.chmod(wrapper, 0o755)
    saved_bin, fh.BIN = fh.BIN, wrapper
    try:
        hub = fh.Hub(wd, hub_config(pub, consumers))
    finally:
        fh.BIN = saved_bin
    try:
        fh.wait_for(lambda: os.path.exists("/proc/%d/fd/9" % hub.proc.pid)
                    and os.readlink("/proc/%d/exe" % hub.proc.pid).endswith("fanhub"),
                    "the hub to hold fds 7, 8 and 9", hub=hub)
        pub.wait_subscribed(hub=hub)
        pub.send("hang", "b")
        pub.send("fine", "b")
        big = os.urandom(1 << 20)
        for _ in range(5):
            pub.send("big", big)
        pub.send("fds", "b")

        fh.wait_for(lambda: stats_of(hub, "hang")["failed"] == 1
                    and stats_of(hub, "hang")["completed"] == 1, "hang, then fine", hub=hub)
        fh.wait_for(lambda: stats_of(hub, "unread")["completed"] == 5, "5 unread bodies", hub=hub)
        fh.wait_for(lambda: stats_of(hub, "fds")["completed"] == 1, "fds listed", hub=hub)
        log = hub.log()
        assert ("consumer 'hang': message 1 (hang): timed out after 2000 ms: hanging now"
                in log), log
        assert os.path.exists(wd.file("2.fine"))
        for name in ("hang.pid", "bg.pid"):
            with open(wd.file(name)) as f:
                pid = int(f.read())
            fh.wait_for(lambda: process_gone(pid), "%s %d to be gone" % (name, pid), hub=hub)
        with open(wd.file("fds")) as f:
            # ls opened the directory it lists: that is the one extra, 3.
            assert f.read() == "0\n1\n2\n3\n"
        assert children_of(hub.proc.pid) == [], children_of(hub.proc.pid)
        assert stats_of(hub, "unread")["failed"] == 0
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_workers_in_parallel():
    """The plugin is thread-safe: with workers: 4 every message still gets
    its own body and environment."""
    n = 200
    wd = fh.Workdir()
    pub = fh.Publisher()
    d = shlex.quote(wd.path)
    script = 'cat > %s/"$FANHUB_SEQ".out; [ $((FANHUB_SEQ %% 5)) -ne 0 ] || exit 3' % d
    hub = fh.Hub(wd, hub_config(pub, exec_yaml(
        "pool", {"command": script, "shell": True},
        extra="    workers: 4\n    retry: {max_attempts: 1}\n")))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(1, n + 1):
            pub.send("org.pool.%d" % (i % 7), "body %d" % i)
        fh.wait_for(lambda: stats_of(hub, "pool")["completed"]
                    + stats_of(hub, "pool")["failed"] >= n, "all consumed", hub=hub)
        stats = stats_of(hub, "pool")
        assert stats["failed"] == n // 5 and stats["completed"] == n - n // 5, stats
        for i in range(1, n + 1):
            with open(wd.file("%d.out" % i)) as f:
                assert f.read() == "body %d" % i
        assert children_of(hub.proc.pid) == []
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stdout_option():
    """stdout: null (default) discards, stderr goes to the hub's stderr,
    inherit to the hub's stdout."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    consumers = "".join(
        exec_yaml("out-" + mode, {"command": ["/bin/echo", "marker-" + mode], "stdout": mode},
                  topics=["out"])
        for mode in ("null", "stderr", "inherit"))
    hub = fh.Hub(wd, hub_config(pub, consumers))
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("out", "b")
        for mode in ("null", "stderr", "inherit"):
            fh.wait_for(lambda: stats_of(hub, "out-" + mode)["completed"] == 1,
                        "out-" + mode, hub=hub)
        assert hub.stop() == 0, hub.log()
        with open(hub.stdout_path) as f:
            out = f.read()
        err = hub.log()
        assert "marker-inherit\n" in out and "marker-inherit" not in err, (out, err)
        assert "marker-stderr\n" in err and "marker-stderr" not in out, (out, err)
        assert "marker-null" not in out + err, (out, err)
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_option_errors():
    """`fanhub check` refuses bad exec options, naming FILE:LINE:COL."""
    wd = fh.Workdir()
    bus = "bus:\n  connect: [tcp://127.0.0.1:%d]\nconsumers:\n" % fh.free_port()
    cases = [
        ({}, "options.command: missing: the command to run"),
        ({"command": ["/bin/true"], "timeout": 5}, "options.timeout: unknown option"),
        ({"command": "ls -l"}, "got a string; to run it with /bin/sh -c, set shell: true"),
        ({"command": ["/bin/true"], "shell": True}, "with shell: true, expected one string"),
        ({"command": ["no-such-program-fanhub"]},
         "options.command[0]: no-such-program-fanhub: not found in PATH"),
        ({"command": ["/bin/true"], "timeout_ms": 0},
         "options.timeout_ms: expected a duration such as 250ms, 2s or 1m from 1 to 86400000 ms, got \"0\""),
        ({"command": ["/bin/true"], "stdout": "file"},
         "options.stdout: expected null, stderr or inherit"),
    ]
    for options, part in cases:
        path = wd.write("exec.yaml", bus + exec_yaml("runner", options))
        status, out, err = fh.run(["check", "-c", path])
        assert status == 2, (options, status, err)
        assert part in err, (options, part, err)
        assert "exec.yaml:" in err, err
    good = wd.write("good.yaml", bus + exec_yaml(
        "runner", {"command": ["true", "--ignored"], "shell": False, "timeout_ms": 1,
                   "kill_grace_ms": 0, "stdout": "null"}))
    status, out, err = fh.run(["check", "-c", good])
    assert status == 0, err
    # The shipped example is valid as it stands.
    status, out, err = fh.run(["check", "-c", os.path.join(fh.SOURCE_DIR, "config/examples/exec.yaml")])
    assert status == 0, err
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_exit_codes_and_environment, test_hang_unread_body_and_fds,
             test_workers_in_parallel, test_stdout_option, test_option_errors])
