"""`fanhub check` has no side effects, and still finds what `run` refuses.

Every file of config/examples/ passes `fanhub check` as shipped, run in an
empty directory: exit 0, the directory tree unchanged (nothing created:
no log file, no SQLite database), and no listening socket left behind
(`ss -lntx` before and after). strace shows the check itself makes no
bind, listen, connect or flock call, creates no directory and opens no
file for writing, so a socket bound and closed again would not pass
either.

A plugin with a check callback (ABI 1.1) is asked through it, and its init
never runs; an ABI 1.0 plugin (a descriptor without check) is checked by
its init, as before. A state directory that does not exist is a note (run
creates it), one that cannot be made is an error; a spool that a running
hub holds is a note naming that hub's pid.
"""
import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

EXAMPLES = sorted(glob.glob(os.path.join(fh.SOURCE_DIR, "config/examples/*.yaml")))
# What a side-effect-free check never calls (strace's names).
FORBIDDEN_CALLS = ("bind", "listen", "connect", "flock", "mkdir", "mkdirat", "creat",
                   "rename", "renameat", "renameat2", "unlink", "unlinkat", "truncate",
                   "ftruncate")


# ThreadSanitizer's runtime makes (and at once unlinks) a file of its own
# at start; that is the sanitizer, not the check.
SANITIZER_OWN = re.compile(r'"/tmp/tsan\.rodata\.\d+"')


def tree(path):
    """Every path under path, with its type and size."""
    found = set()
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            full = os.path.join(root, name)
            st = os.lstat(full)
            found.add((os.path.relpath(full, path), st.st_mode, st.st_size))
    return found


def listening():
    """`ss -lntx`: the listening TCP and Unix sockets, one line each."""
    ss = fh.require_tool(shutil.which("ss"), "ss", "iproute2")
    proc = subprocess.run([ss, "-lntxH"], capture_output=True, timeout=fh.DEADLINE)
    assert proc.returncode == 0, proc.stderr.decode()
    return set(" ".join(line.split()[:5]) for line in proc.stdout.decode().splitlines())


def mine(sockets, ports, workdir):
    """The sockets of sockets that a check of this file could have made:
    on a port the file names, or in its directory. Other tests on this
    machine open and close sockets meanwhile; those are not this check's."""
    return {s for s in sockets
            if workdir in s or any(re.search(r":%s\b" % p, s) for p in ports)}


def checked_by_strace(args, cwd, trace_dir):
    """Runs `fanhub ARGS` in cwd under strace; returns (status, stdout,
    stderr, the forbidden calls it made)."""
    strace = fh.require_tool(shutil.which("strace"), "strace", "strace")
    log = os.path.join(trace_dir, "strace.log")
    # LeakSanitizer cannot run under ptrace: the leak check is a run of
    # its own (run_twice).
    env = dict(os.environ, ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
    proc = subprocess.run([strace, "-f", "-qq", "-o", log, "-e",
                           "trace=%s,openat,open" % ",".join(FORBIDDEN_CALLS), fh.BIN] + args,
                          cwd=cwd, capture_output=True, timeout=fh.DEADLINE, env=env)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, "fanhub " + " ".join(args))
    calls = []
    with open(log, errors="replace") as f:
        for line in f:
            call = re.sub(r"^\d+\s+", "", line.strip())
            if SANITIZER_OWN.search(call):
                continue
            name = call.split("(", 1)[0]
            if name in FORBIDDEN_CALLS:
                calls.append(call)
            elif name in ("open", "openat") and re.search(r"O_WRONLY|O_RDWR|O_CREAT", call):
                calls.append(call)
    return proc.returncode, out, err, calls


def run_twice(args, cwd, trace_dir):
    """checked_by_strace, then the same run without strace (sanitizers in
    full, leaks included), which must answer the same."""
    status, out, err, calls = checked_by_strace(args, cwd, trace_dir)
    again = fh.run(args, cwd=cwd)
    assert again == (status, out, err), (args, (status, out, err), again)
    return status, out, err, calls


def test_examples_pass_and_touch_nothing():
    assert len(EXAMPLES) >= 5, EXAMPLES
    for example in EXAMPLES:
        with open(example) as f:
            ports = set(re.findall(r":(\d+)\b", f.read()))
        wd, trace = fh.Workdir(), fh.Workdir()
        before_sockets = listening()
        status, out, err, calls = run_twice(["check", "-c", example], wd.path, trace.path)
        after_sockets = listening()
        assert status == 0, (example, out, err)
        assert "OK" in out, (example, out)
        assert not calls, "%s: check made calls with side effects:\n%s" % (example,
                                                                           "\n".join(calls))
        assert os.listdir(wd.path) == [], (example, os.listdir(wd.path))
        new = mine(after_sockets - before_sockets, ports, wd.path)
        assert not new, (example, new)
        wd.cleanup()
        trace.cleanup()


def test_missing_files_are_notes_and_nothing_is_made():
    """A state_dir, a log file and a database that do not exist yet: OK,
    with a note each, and still nothing created; an ipc endpoint to bind in
    that directory is not bound."""
    wd = fh.Workdir()
    config = wd.write("c.yaml", """\
bus:
  connect: tcp://127.0.0.1:%d
state_dir: %s
consumers:
  - name: lines
    plugin: log
    options: {path: %s}
  - name: archive
    plugin: store
    options: {sqlite: %s}
  - name: mirror
    plugin: relay
    options: {bind: %s}
""" % (fh.free_port(), wd.file("state"), wd.file("lines.jsonl"), wd.file("a.sqlite"),
       "ipc://" + wd.file("mirror.sock")))
    before = tree(wd.path)
    trace = fh.Workdir()
    status, out, err, calls = run_twice(["check", "-c", config], wd.path, trace.path)
    trace.cleanup()
    assert status == 0, err
    assert not calls, "\n".join(calls)
    assert tree(wd.path) == before, sorted(tree(wd.path) ^ before)
    for note in ("%s/lines does not exist yet; run creates it" % wd.file("state"),
                 "%s does not exist yet; run creates it" % wd.file("lines.jsonl"),
                 "%s does not exist yet; run creates it" % wd.file("a.sqlite")):
        assert note in err, (note, err)
    wd.cleanup()


def test_what_run_would_refuse_is_still_reported():
    wd = fh.Workdir()
    wd.write("plain-file", "not a directory\n")
    os.makedirs(wd.file("state/a"))
    wd.write("state/a/dead-letter", "a file where the dead-letter store would be\n")
    bus = "bus:\n  connect: tcp://127.0.0.1:%d\n" % fh.free_port()
    cases = [
        ("state_dir: %s\nconsumers:\n  - {name: a, plugin: \"null\"}\n" % wd.file("state"),
         "consumer 'a': dead-letter store: %s is not a directory" % wd.file("state/a/dead-letter")),
        ("state_dir: %s\nconsumers:\n  - {name: a, plugin: \"null\"}\n" % wd.file("plain-file/x"),
         "consumer 'a': state_dir: cannot have %s/a: %s is not a directory"
         % (wd.file("plain-file/x"), wd.file("plain-file"))),
        ("consumers:\n  - {name: a, plugin: log, options: {path: %s}}\n"
         % wd.file("no/such/dir/a.jsonl"),
         "options.path: %s: cannot open: No such file or directory" % wd.file("no/such/dir/a.jsonl")),
        ("consumers:\n  - {name: a, plugin: log, options: {path: %s}}\n" % wd.path,
         "options.path: %s: cannot open: Is a directory" % wd.path),
        ("consumers:\n  - {name: a, plugin: store, options: {sqlite: %s}}\n"
         % wd.file("plain-file/a.db"),
         "options.sqlite: %s: cannot open: Not a directory" % wd.file("plain-file/a.db")),
        ("consumers:\n  - {name: a, plugin: relay, options: {bind: \"tcp://*:99999\"}}\n",
         "options.bind: expected a ZeroMQ endpoint, got \"tcp://*:99999\": expected a port from "
         "1 to 65535"),
        ("consumers:\n  - {name: a, plugin: relay, options: {connect: \"tcp://host-without-port\"}}\n",
         "options.connect: expected a ZeroMQ endpoint, got \"tcp://host-without-port\": expected "
         "tcp://HOST:PORT"),
        ("consumers:\n  - {name: a, plugin: \"null\", options: {colour: red}}\n",
         "options.colour: unknown option; null takes no options"),
        ("consumers:\n  - {name: a, plugin: %s, options: {refuse: not today}}\n"
         % (fh.TEST_PLUGINS + "/checked.so"),
         "plugin '%s' refused its options: checked: not today" % (fh.TEST_PLUGINS + "/checked.so")),
    ]
    paths = [wd.write("bad%d.yaml" % n, bus + body) for n, (body, _) in enumerate(cases)]
    before = tree(wd.path)
    for path, (body, says) in zip(paths, cases):
        status, out, err = fh.run(["check", "-c", path])
        assert status == 2, (body, status, out, err)
        assert says in err, (says, err)
        assert err.startswith("fanhub check: %s:" % path), err
    assert tree(wd.path) == before, sorted(tree(wd.path) ^ before)
    wd.cleanup()


def test_check_callback_replaces_init_and_old_plugins_use_init():
    wd = fh.Workdir()
    marker_new, marker_old = wd.file("new-init-ran"), wd.file("old-init-ran")
    config = wd.write("c.yaml", """\
bus:
  connect: tcp://127.0.0.1:%d
consumers:
  - name: new
    plugin: %s/checked.so
    options: {marker: %s}
  - name: old
    plugin: %s/abi10.so
    options: {marker: %s}
""" % (fh.free_port(), fh.TEST_PLUGINS, marker_new, fh.TEST_PLUGINS, marker_old))
    status, out, err = fh.run(["check", "-c", config])
    assert status == 0, err
    assert "consumer 'new': checked: options look fine" in err, err
    assert not os.path.exists(marker_new), "check called init of a plugin that has check"
    assert ("consumer 'old': plugin '%s/abi10.so' has no check callback (plugin ABI 1.0): "
            "checked by its init and fini" % fh.TEST_PLUGINS) in err, err
    assert os.path.exists(marker_old), "an ABI 1.0 plugin is checked by its init"
    wd.cleanup()


def fh_check_flock_pid(path):
    """The pid holding a flock on path, from /proc/locks (0: none)."""
    st = os.stat(path)
    with open("/proc/locks") as f:
        for line in f:
            m = re.match(r"\d+: FLOCK\s+\S+\s+\S+\s+(\d+) ([0-9a-f]+):([0-9a-f]+):(\d+) ", line)
            if m and int(m.group(4)) == st.st_ino \
                    and (int(m.group(2), 16), int(m.group(3), 16)) == (os.major(st.st_dev),
                                                                      os.minor(st.st_dev)):
                return int(m.group(1))
    return 0


def test_a_spool_held_by_a_running_hub_is_a_note():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nstate_dir: %s\nconsumers:\n"
              "  - {name: held, plugin: \"null\"}\n" % (pub.endpoint, wd.file("state")))
    hub = fh.Hub(wd, config)
    try:
        hub.wait_ready()
        lock = os.path.join(wd.file("state"), "held", "lock")
        fh.wait_for(lambda: os.path.exists(lock), "the spool's lock file", hub=hub)
        # The running hub writes in state_dir itself (its spool cursor):
        # strace, not the tree, shows that check writes nothing.
        trace = fh.Workdir()
        status, out, err, calls = run_twice(["check", "-c", hub.config], wd.path, trace.path)
        trace.cleanup()
        assert status == 0, err
        assert not calls, "\n".join(calls)
        assert ("consumer 'held': the spool %s/held is open in a running hub (pid %d)"
                % (wd.file("state"), hub.proc.pid)) in err, err
        # The hub still holds its lock: check took nothing from it.
        assert fh_check_flock_pid(os.path.join(wd.file("state"), "held", "lock")) == hub.proc.pid
        assert hub.request("PING") == b"PONG"
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_examples_pass_and_touch_nothing,
             test_missing_files_are_notes_and_nothing_is_made,
             test_what_run_would_refuse_is_still_reported,
             test_check_callback_replaces_init_and_old_plugins_use_init,
             test_a_spool_held_by_a_running_hub_is_a_note])
