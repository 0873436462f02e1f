#!/usr/bin/python3
"""The Debian package as an operator meets it (issue 25), on this machine,
as root; nothing in it needs a running systemd:

1. scripts/package builds fanhub and fanhub-dev from a clean clone of HEAD
   (committed work only) and lintian reports no error and no warning;
2. dpkg -i installs both: the fanhub user and group exist, and its state,
   log and runtime directories, owned by it; every relative link of the
   installed docs resolves, and the pictures are there;
3. the installed `fanhub check` accepts the installed /etc/fanhub/fanhub.yaml
   (as the fanhub user) and, when this fanhub has `include:`, a drop-in in
   /etc/fanhub/conf.d/ that adds a consumer;
4. the installed hub runs as the fanhub user with the installed config (in
   /var/lib/fanhub, as the unit runs it), and a second one as fanhub@pkgtest
   would, with /etc/fanhub/pkgtest.yaml; a pyzmq publisher sends to both
   and the installed `fanhub stats -c FILE` reads each hub's figures from
   its own socket; the archive gets every message, stdout nothing;
5. logrotate -f on the installed logrotate.d/fanhub, with those hubs
   started by hand (no systemd): each reloads, and every line after the
   rotation is in the new files, none in the rotated ones; a hub run by
   hand as root on the built-in configuration (the README's quick start,
   scripts/demo) starts beside them with its default control socket (not
   in the package's /run/fanhub) and `fanhub stats` reads it;
   `logrotate -d` accepts the file and `systemd-analyze verify` the units;
6. dpkg --purge removes the user, the group, the directories and every
   file of the package; /etc/fanhub/pkgtest.yaml, a file the operator
   added, is all that stays (dpkg says so), and once it is removed the
   machine is as it was: the same files named *fanhub* outside /tmp,
   /work, /root and /home, no fanhub user or group, /run/fanhub as before.

Whatever happens, the finally block stops the hubs, purges the packages
and removes what the test added. It refuses to start when fanhub is
installed or its user exists (it would remove them). Exit status 0 passed,
1 failed, 77 skipped (not root, or a tool missing; under CI=true that
fails). One to two minutes, most of it the package build.
"""
import glob
import json
import os
import pwd
import grp
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")
DEADLINE = float(os.environ.get("FANHUB_TEST_DEADLINE", "120"))
N = 200
BUS = "tcp://127.0.0.1:9940"  # the installed configuration's publisher
AS_FANHUB = ["setpriv", "--reuid=fanhub", "--regid=fanhub", "--init-groups", "--"]
PATHS_OF_FANHUB = ("/etc/fanhub", "/var/lib/fanhub", "/var/log/fanhub", "/etc/logrotate.d/fanhub")
SNAPSHOT_PRUNE = ("/proc", "/sys", "/dev", "/tmp", "/var/tmp", "/work", "/root", "/home")


class Skip(Exception):
    pass


def log(text):
    print(text, flush=True)


def sh(args, ok=True, **kw):
    proc = subprocess.run(args, capture_output=True, timeout=kw.pop("timeout", DEADLINE), **kw)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    if ok:
        assert proc.returncode == 0, "%s: status %d\n%s\n%s" % (" ".join(args), proc.returncode,
                                                                  out, err)
    return proc.returncode, out, err


def wait_for(what, check):
    """Calls check until it returns a true value, within DEADLINE."""
    end = time.monotonic() + DEADLINE
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.05)


def user_exists(name):
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def group_exists(name):
    try:
        grp.getgrnam(name)
        return True
    except KeyError:
        return False


def run_stat(path):
    try:
        st = os.lstat(path)
        return (st.st_uid, st.st_gid, st.st_mode)
    except FileNotFoundError:
        return None


def snapshot():
    """What the package could leave behind."""
    args = ["find", "/", "-xdev", "("]
    for i, p in enumerate(SNAPSHOT_PRUNE):
        args += (["-o"] if i else []) + ["-path", p]
    args += [")", "-prune", "-o", "-name", "*fanhub*", "-print"]
    _, out, _ = sh(args, ok=False, timeout=300)
    _, status, _ = sh(["dpkg-query", "-W", "-f=${Package} ${Status}\n", "fanhub", "fanhub-dev"],
                      ok=False)
    return {"files": sorted(out.split()), "user": user_exists("fanhub"),
            "group": group_exists("fanhub"), "run": run_stat("/run/fanhub"),
            "run0": run_stat("/run/fanhub-0"),
            "dpkg": sorted(l for l in status.splitlines() if " installed" in l)}


def installed(package):
    _, out, _ = sh(["dpkg-query", "-W", "-f=${Status}", package], ok=False)
    return "install ok installed" in out


def stats(config):
    rc, out, err = sh(AS_FANHUB + ["/usr/bin/fanhub", "stats", "-c", config], ok=False)
    return json.loads(out) if rc == 0 else None


def consumer(snap, name):
    return next((c for c in snap["consumers"] if c["name"] == name), None) if snap else None


def publish(subscribers):
    """Binds BUS with XPUB, waits for each hub's subscription, sends N."""
    import zmq
    ctx = zmq.Context()
    pub = ctx.socket(zmq.XPUB)
    pub.setsockopt(zmq.XPUB_VERBOSE, 1)  # every hub's subscription, not the first only
    pub.setsockopt(zmq.LINGER, 5000)
    try:
        pub.bind(BUS)
    except zmq.ZMQError as e:
        raise AssertionError("cannot bind %s (the installed configuration's publisher): %s"
                             % (BUS, e))
    seen = 0
    poller = zmq.Poller()
    poller.register(pub, zmq.POLLIN)
    end = time.monotonic() + DEADLINE
    while seen < subscribers:
        assert time.monotonic() < end, "timed out waiting for %d hubs to subscribe" % subscribers
        if poller.poll(100) and pub.recv()[:1] == b"\x01":
            seen += 1
    for i in range(N):
        body = json.dumps({"topic": "org.fanhub.package.test", "msg": {"i": i},
                           "msg_id": "package-test-%d" % i}).encode()
        pub.send_multipart([b"org.fanhub.package.test", body])
    pub.close()
    ctx.term()


class Hub:
    def __init__(self, work, name, config, cwd):
        self.name, self.config = name, config
        self.out = open(os.path.join(work, name + ".out"), "w+b")
        self.err = open(os.path.join(work, name + ".err"), "w+b")
        # As the unit runs it: the fanhub user, umask 0027, in its state directory.
        self.proc = subprocess.Popen(AS_FANHUB + ["/usr/bin/fanhub", "run", "-c", config],
                                     cwd=cwd, stdout=self.out, stderr=self.err,
                                     preexec_fn=lambda: os.umask(0o027))

    def answers(self):
        assert self.proc.poll() is None, "%s exited: %s" % (self.name, self.stderr())
        return stats(self.config)

    def stderr(self):
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def build_and_install(work, state):
    log("== build from a clean clone, lintian")
    out = os.path.join(work, "out")
    start = time.monotonic()
    _, text, err = sh([os.path.join(TOP, "scripts", "package"), "--out", out, "--lintian"],
                      timeout=900)
    log(err.strip())
    log("   built and checked in %.0f s" % (time.monotonic() - start))
    debs = [glob.glob(os.path.join(out, p))[0] for p in ("fanhub_*.deb", "fanhub-dev_*.deb")]
    # The python plugin's runner and the Perl example worker: recommended.
    _, recommends, _ = sh(["dpkg-deb", "-f", debs[0], "Recommends"])
    assert [r.strip() for r in recommends.split(",")] == ["python3:any", "perl"], recommends

    log("== dpkg -i " + " ".join(os.path.basename(d) for d in debs))
    state["installed"] = True  # from here on the finally block purges
    sh(["dpkg", "-i"] + debs)
    pw = pwd.getpwnam("fanhub")
    assert pw.pw_dir == "/var/lib/fanhub" and pw.pw_shell == "/usr/sbin/nologin", pw
    assert pw.pw_uid < 1000, "not a system user: %r" % (pw,)
    for d in ("/var/lib/fanhub", "/var/log/fanhub", "/run/fanhub"):
        st = os.stat(d)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (pw.pw_uid, pw.pw_gid, 0o750), \
            "%s: %r" % (d, st)
    assert os.path.isdir("/etc/fanhub/conf.d")
    # The example drop-in the README tells to install for JIT workers.
    with open("/usr/share/fanhub/systemd/jit-workers.conf") as f:
        assert "\nMemoryDenyWriteExecute=no\n" in f.read()
    # fanhub-dev: the fake host for plugins' tests beside the SDK headers.
    assert os.path.exists("/usr/include/fanhub/testing.h")
    assert glob.glob("/usr/lib/*/libfanhub-testing.a") and glob.glob(
        "/usr/lib/*/pkgconfig/fanhub-testing.pc"), "fanhub-dev has no libfanhub-testing"
    # The docs as installed (uncompressed, their links resolved), pictures too.
    sh([sys.executable, os.path.join(TOP, "tests/package/doclinks.py"), "/usr/share/doc/fanhub",
        "--min-files", "15"])
    for picture in ("performance-throughput.png", "performance-latency.png"):
        assert os.path.exists("/usr/share/doc/fanhub/docs/" + picture), picture

    return pw


def check_configs(work, state, pw):
    """The installed configuration, a drop-in in conf.d/,
    and fanhub@pkgtest's file; returns the main hub's consumers."""
    log("== fanhub check on the installed configuration, as fanhub")
    _, text, _ = sh(AS_FANHUB + ["/usr/bin/fanhub", "check", "-c", "/etc/fanhub/fanhub.yaml"])
    assert "OK, 1 consumer" in text, text
    consumers = {"archive"}
    with open("/etc/fanhub/fanhub.yaml") as f:
        production = f.read()
    log("== drop-in: /etc/fanhub/conf.d/package-test.yaml adds a consumer")
    assert re.search(r"^include: \[conf\.d/\*\.yaml\]", production, re.M), \
        "/etc/fanhub/fanhub.yaml must include conf.d/"
    state["dropin"] = "/etc/fanhub/conf.d/package-test.yaml"
    with open(state["dropin"], "w") as f:
        f.write("consumers:\n  - name: dropin\n    plugin: \"null\"\n")
    _, text, _ = sh(AS_FANHUB + ["/usr/bin/fanhub", "check", "-c", "/etc/fanhub/fanhub.yaml"])
    assert "OK, 2 consumers" in text and "dropin" in text, text
    consumers.add("dropin")

    log("== fanhub@pkgtest's configuration, as its comments say")
    state["instance"] = "/etc/fanhub/pkgtest.yaml"
    with open(state["instance"], "w") as f:
        f.write("name: pkgtest\ncontrol: ipc:///run/fanhub/pkgtest.sock\n"
                "state_dir: /var/lib/fanhub/pkgtest\nbus: {connect: [%s]}\n"
                "consumers:\n  - name: archive\n    plugin: log\n"
                "    options: {path: /var/log/fanhub/pkgtest.jsonl, flush_ms: 0}\n" % BUS)
    os.mkdir("/var/lib/fanhub/pkgtest", 0o750)  # the template's StateDirectory=fanhub/%i
    os.chown("/var/lib/fanhub/pkgtest", pw.pw_uid, pw.pw_gid)

    return consumers


def run_hubs(work, state, consumers):
    log("== the installed hubs, as fanhub; %d messages from pyzmq" % N)
    main = Hub(work, "main", "/etc/fanhub/fanhub.yaml", "/var/lib/fanhub")
    state["hubs"].append(main)
    other = Hub(work, "pkgtest", "/etc/fanhub/pkgtest.yaml", "/var/lib/fanhub/pkgtest")
    state["hubs"].append(other)
    for hub in (main, other):
        wait_for("%s to answer fanhub stats" % hub.name, lambda: hub.answers())
    publish(2)
    for name in consumers:
        wait_for("%s to complete %d" % (name, N),
                 lambda: (consumer(stats(main.config), name) or {}).get("completed") == N)
    snap = stats(other.config)
    assert snap["hub"]["name"] == "pkgtest", snap["hub"]
    wait_for("fanhub@pkgtest to complete %d" % N,
             lambda: (consumer(stats(other.config), "archive") or {}).get("completed") == N)
    wait_for("bus.jsonl to hold %d lines" % N, lambda: os.path.exists(
        "/var/log/fanhub/bus.jsonl") and len(open("/var/log/fanhub/bus.jsonl").readlines()) == N)
    line = json.loads(open("/var/log/fanhub/bus.jsonl").readline())
    assert line["topic"] == "org.fanhub.package.test", line
    _, table, _ = sh(AS_FANHUB + ["/usr/bin/fanhub", "stats", "-c", "/etc/fanhub/fanhub.yaml",
                                  "--format", "prometheus"])
    assert re.search(r'^fanhub_received_total(\{[^}]*\})? %d$' % N, table, re.M), table
    rotate_by_hand(work, main, other)
    root_hub_beside(work, state)
    for hub in (main, other):
        assert hub.stop() == 0, hub.stderr()
        hub.out.seek(0)
        assert hub.out.read() == b"", "%s wrote to stdout" % hub.name


def rotate_by_hand(work, main, other):
    """logrotate -f on the installed file, the hubs started without
    systemd: postrotate must reach them all the same."""
    log("== logrotate -f /etc/logrotate.d/fanhub under hubs started by hand")
    logs = ("/var/log/fanhub/bus.jsonl", "/var/log/fanhub/pkgtest.jsonl")
    wait_for("both archives to hold %d lines" % N, lambda: all(
        os.path.exists(p) and len(open(p).readlines()) == N for p in logs))
    sh(["logrotate", "-f", "-s", os.path.join(work, "logrotate.state"),
        "/etc/logrotate.d/fanhub"])
    for hub in (main, other):
        wait_for("%s to reload" % hub.name, lambda: "reloaded " in hub.stderr())
    publish(2)
    for path in logs:
        wait_for("%s to hold the %d new lines" % (path, N),
                 lambda: os.path.exists(path) and len(open(path).readlines()) == N)
        with open(path + ".1") as f:
            assert len(f.readlines()) == N, "a line reached the rotated %s.1" % path


def root_hub_beside(work, state):
    """The quick start's hub, as root, on the built-in configuration."""
    log("== a hub run by hand as root beside the package (built-in configuration)")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RUNTIME_DIRECTORY", "XDG_RUNTIME_DIR", "FANHUB_CONTROL_USER")}
    out = open(os.path.join(work, "root-hub.out"), "wb")
    err = open(os.path.join(work, "root-hub.err"), "w+b")
    proc = subprocess.Popen(["/usr/bin/fanhub", "run"], cwd=work, env=env, stdout=out,
                            stderr=err)
    state["root_hub"] = proc

    def answers():
        assert proc.poll() is None, "the root hub exited: " + open(err.name).read()
        rc, text, _ = sh(["/usr/bin/fanhub", "stats"], ok=False, env=env)
        return json.loads(text) if rc == 0 else None
    snap = wait_for("the root hub to answer fanhub stats", answers)
    assert snap["hub"]["pid"] == proc.pid, snap["hub"]
    st = os.stat("/run/fanhub-0/fanhub.sock")
    assert st.st_uid == 0, st
    pw = pwd.getpwnam("fanhub")
    st = os.stat("/run/fanhub")
    assert (st.st_uid, st.st_mode & 0o7777) == (pw.pw_uid, 0o750), st
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(DEADLINE) == 0, open(err.name).read()


def verify_and_purge(state):
    log("== logrotate -d, systemd-analyze verify")
    rc, out, err = sh(["logrotate", "-d", "/etc/logrotate.d/fanhub"], ok=False)
    assert rc == 0 and "error" not in (out + err).lower(), out + err
    assert "/var/log/fanhub/bus.jsonl" in out + err, out + err
    units = ["/lib/systemd/system/fanhub.service", "/lib/systemd/system/fanhub@.service"]
    rc, out, err = sh(["systemd-analyze", "verify"] + units, ok=False)
    assert rc == 0 and not err.strip(), out + err

    log("== dpkg --purge")
    sh(["dpkg", "--purge", "fanhub-dev", "fanhub"])
    assert not user_exists("fanhub") and not group_exists("fanhub")
    for path in PATHS_OF_FANHUB[1:]:
        assert not os.path.exists(path), path
    # The operator's own files stay, and only they.
    left = sorted(os.path.relpath(os.path.join(root, name), "/etc/fanhub")
                  for root, _, names in os.walk("/etc/fanhub") for name in names)
    mine = sorted(os.path.relpath(state[k], "/etc/fanhub") for k in ("dropin", "instance")
                  if state.get(k))
    assert left == mine, left


def test(work, state):
    pw = build_and_install(work, state)
    consumers = check_configs(work, state, pw)
    run_hubs(work, state, consumers)
    verify_and_purge(state)
    state["installed"] = False


def cleanup(state):
    for hub in state["hubs"]:
        hub.stop()
    root = state.get("root_hub")
    if root and root.poll() is None:
        root.kill()
        root.wait()
    # The root hub's private control directory, unless it was there before.
    if not state["before"]["run0"] and os.path.isdir("/run/fanhub-0"):
        shutil.rmtree("/run/fanhub-0", ignore_errors=True)
    elif ("/run/fanhub-0/fanhub.sock" not in state["before"]["files"]
          and os.path.exists("/run/fanhub-0/fanhub.sock")):
        os.unlink("/run/fanhub-0/fanhub.sock")  # a hub killed before it could remove it
    for key in ("dropin", "instance"):
        if state.get(key) and os.path.exists(state[key]):
            os.unlink(state[key])
    if state["installed"]:
        sh(["dpkg", "--purge", "fanhub-dev", "fanhub"], ok=False)
    # systemd-analyze verify looks up Documentation='s man pages, and man-db
    # caches what it formatted (man-db's cache, not the package's files).
    for cat in glob.glob("/var/cache/man/**/fanhub*", recursive=True):
        if cat not in state["before"]["files"]:
            os.unlink(cat)
    for d in ("/etc/fanhub/conf.d", "/etc/fanhub"):
        if os.path.isdir(d) and not os.listdir(d):
            os.rmdir(d)
    # /run/fanhub as it was (a purge removes it only when empty).
    before = state["before"]["run"]
    if before and not os.path.exists("/run/fanhub"):
        os.mkdir("/run/fanhub")
    if before:
        os.chown("/run/fanhub", before[0], before[1])
        os.chmod("/run/fanhub", before[2] & 0o7777)


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # run the finally blocks
    try:
        if os.geteuid() != 0:
            raise Skip("needs root (dpkg -i)")
        for tool in ("dpkg-buildpackage", "dh", "lintian", "systemd-analyze", "logrotate",
                     "setpriv", "git"):
            if not shutil.which(tool):
                raise Skip("%s is missing: scripts/deps installs it" % tool)
        try:
            import zmq  # noqa: F401
        except ImportError:
            raise Skip("python3-zmq is missing: scripts/deps installs it")
    except Skip as e:
        print(("FAIL (CI=true, so nothing may be skipped): " if IN_CI else "SKIP: ") + str(e))
        sys.exit(1 if IN_CI else 77)
    # It would remove an existing installation or user: refuse instead.
    busy = [p for p in ("fanhub", "fanhub-dev") if installed(p)]
    busy += ["the user fanhub"] if user_exists("fanhub") else []
    busy += ["the group fanhub"] if group_exists("fanhub") else []
    busy += [p for p in PATHS_OF_FANHUB if os.path.exists(p)]
    if busy:
        print("FAIL: this machine already has %s; the test installs and purges fanhub, "
              "remove them first" % ", ".join(busy))
        sys.exit(1)
    start = time.monotonic()
    state = {"installed": False, "hubs": [], "before": snapshot()}
    work = tempfile.mkdtemp(prefix="fanhub-package-test-")
    os.chmod(work, 0o755)
    failed = False
    try:
        test(work, state)
    except BaseException:
        failed = True
        raise
    finally:
        cleanup(state)
        if not failed:
            after = snapshot()
            assert after == state["before"], "the machine changed:\nbefore %r\nafter  %r" % (
                state["before"], after)
            log("== the machine is as it was (%d files named *fanhub* outside %s, no user, "
                "no group)" % (len(after["files"]), ", ".join(SNAPSHOT_PRUNE)))
        shutil.rmtree(work, ignore_errors=True)
    log("passed in %.0f s" % (time.monotonic() - start))


if __name__ == "__main__":
    main()
