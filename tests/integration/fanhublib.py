"""Helpers for fanhub's integration tests: a real `fanhub run` process, real
ZeroMQ peers (pyzmq, independent of the hub's own code), temp files.

Tests wait for conditions with a deadline, never for time to pass: a
deadline only turns a hang into a failure, it never decides a pass.
"""
import fcntl
import fnmatch
import glob
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

import zmq

# The tests sit in folders that mirror hub/ (tests/integration/ROOM/
# test_x.py, each putting this folder on its path); one that uses another's
# helpers imports it by name (`import test_control_plane`), wherever it is.
_HERE = os.path.dirname(os.path.abspath(__file__))
for _room in sorted({os.path.dirname(p) for p in glob.glob(os.path.join(_HERE, "*", "test_*.py"))}):
    if _room not in sys.path:
        sys.path.append(_room)

# ctest sets these (tests/CMakeLists.txt). Run by hand, a test takes them
# from the build directory FANHUB_BUILD_DIR (default SOURCE/build/release),
# so `/usr/bin/python3 tests/integration/ROOM/test_x.py NAME` just works.
SOURCE_DIR = os.environ.get("FANHUB_SOURCE_DIR",
                            os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..")))
BUILD_DIR = os.environ.get("FANHUB_BUILD_DIR", os.path.join(SOURCE_DIR, "build", "release"))


def _built(path):
    return path if os.path.exists(path) else ""


BIN = os.environ.get("FANHUB_BIN", _built(os.path.join(BUILD_DIR, "bin", "fanhub")) or "fanhub")
TEST_PLUGINS = os.environ.get("FANHUB_TEST_PLUGIN_DIR", _built(os.path.join(BUILD_DIR, "test-plugins")))
SHIPPED_PLUGINS = os.environ.get("FANHUB_SHIPPED_PLUGIN_DIR", next(iter(sorted(
    glob.glob(os.path.join(BUILD_DIR, "lib*", "fanhub", "plugins"))
    + glob.glob(os.path.join(BUILD_DIR, "lib*", "*", "fanhub", "plugins")))), ""))
DATA_DIR = os.environ.get("FANHUB_DATA_DIR", os.path.join(SOURCE_DIR, "tests", "data"))
for _name, _value in (("FANHUB_BIN", BIN), ("FANHUB_TEST_PLUGIN_DIR", TEST_PLUGINS),
                      ("FANHUB_SHIPPED_PLUGIN_DIR", SHIPPED_PLUGINS),
                      ("FANHUB_SOURCE_DIR", SOURCE_DIR), ("FANHUB_DATA_DIR", DATA_DIR)):
    os.environ.setdefault(_name, _value)  # for the tests that read them, and their children
DEADLINE = float(os.environ.get("FANHUB_TEST_DEADLINE", "180"))  # seconds before a wait is declared hung

# A sanitizer report on a hub's stderr fails the test even when the exit
# status does not show it.
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "WARNING: ThreadSanitizer", "runtime error:",
                   "ERROR: ThreadSanitizer")


def _port_range():
    """Ports the kernel never hands out for bind(0) or a connect: those
    below its ephemeral range (ip_local_port_range)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return max(1024, low - 12000), low


PORT_LOCKS = os.path.join(tempfile.gettempdir(), "fanhub-test-ports-%d" % os.getuid())
_held_ports = {}  # port: the open lock file that reserves it for this process


def free_port():
    """A loopback TCP port for what must be known before it is bound (a
    connect endpoint to a peer started later, a control endpoint a client
    is told first, a hub's fixed port). Not a bind(0)-close-and-hope port:
    it is reserved for the life of this process by an flock on
    PORT_LOCKS/PORT, so test programs ctest runs at once never share one,
    and it lies below the ephemeral range, so the kernel never gives it to
    a bind(0) or an outgoing connection meanwhile. Where a hub binds, give
    it tcp://127.0.0.1:* and read the port it got (Hub.bound)."""
    os.makedirs(PORT_LOCKS, exist_ok=True)
    low, high = _port_range()
    start = random.Random(os.getpid() * 7919 + len(_held_ports)).randrange(low, high)
    for i in range(high - low):
        port = low + (start - low + i) % (high - low)
        if port in _held_ports:
            continue
        lock = open(os.path.join(PORT_LOCKS, str(port)), "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with socket.socket() as s:  # not used by anything outside the tests
                s.bind(("127.0.0.1", port))
        except OSError:
            lock.close()
            continue
        _held_ports[port] = lock
        return port
    raise AssertionError("no free port in %d-%d" % (low, high))


def wait_for(condition, what, deadline=DEADLINE, hub=None):
    """Polls condition() until true; fails after deadline seconds, or at
    once when `hub` has exited (with its log)."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if hub is not None and hub.proc.poll() is not None:
            raise AssertionError("hub exited (status %s) while waiting for %s:\n%s"
                                 % (hub.proc.returncode, what, hub.log()[-8000:]))
        if time.monotonic() > end:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def check_sanitizers(text, who):
    for mark in SANITIZER_MARKS:
        if mark in text:
            raise AssertionError("%s: sanitizer report:\n%s" % (who, text[-6000:]))


def run(args, stdin=None, timeout=DEADLINE, cwd=None):
    """Runs `fanhub ARGS...` (in cwd) to completion; returns (status,
    stdout, stderr)."""
    proc = subprocess.run([BIN] + args, input=stdin, capture_output=True,
                          timeout=timeout, cwd=cwd)
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    check_sanitizers(err, "fanhub " + " ".join(a if isinstance(a, str) else a.decode(errors="replace") for a in args))
    return proc.returncode, out, err


class Workdir:
    """A temp directory removed at the end unless the test failed."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="fanhub-test-")

    def file(self, name):
        return os.path.join(self.path, name)

    def write(self, name, text):
        path = self.file(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def cleanup(self):
        subprocess.run(["rm", "-rf", self.path])


class Hub:
    """A `fanhub run -c CONFIG` process with its stderr kept in a file."""

    def __init__(self, workdir, config_text, name="hub", extra_args=(), env=None, prefix=()):
        # Each hub gets its own control socket, so hubs of tests that run
        # at the same time never meet on the default one.
        self.control = "ipc://" + workdir.file(name + ".control")
        given = [line.split(":", 1)[1].strip().strip("\"'") for line in config_text.splitlines()
                 if line.startswith("control:")]
        if not given:
            config_text = config_text.rstrip("\n") + "\ncontrol: %s\n" % self.control
        elif given[0].startswith(("tcp://", "ipc://")):
            self.control = given[0]  # tcp://127.0.0.1:* is the port it logs (request)
        self.config = workdir.write(name + ".yaml", config_text)
        self.stderr_path = workdir.file(name + ".stderr")
        self.stdout_path = workdir.file(name + ".stdout")
        self.err = open(self.stderr_path, "wb")
        self.out = open(self.stdout_path, "wb")
        environ = dict(os.environ, **(env or {}))
        # prefix: a command that runs the hub, e.g. prlimit with its limits.
        self.proc = subprocess.Popen(list(prefix) + [BIN, "run", "-c", self.config] + list(extra_args),
                                     stdout=self.out, stderr=self.err,
                                     stdin=subprocess.DEVNULL, env=environ)
        self.status = None

    def bound(self, what, pattern=r"(\S+)"):
        """What the hub logged it listens on, once it has: what is
        "control: serving", "bus.bind: listening on", "prometheus: serving
        http://" and the like; with a port '*' (or 0) configured, the one it
        got. The n-th bind is Hub.bound_all(what)[n]."""
        return wait_for(lambda: (self.bound_all(what, pattern) or [None])[0],
                        "the hub's log line " + what, hub=self)

    def bound_all(self, what, pattern=r"(\S+)"):
        return re.findall(re.escape(what) + pattern, self.log())

    def request(self, command, timeout_ms=10000):
        """One request on the hub's control socket (a fresh REQ socket)."""
        if self.control.startswith("tcp://") and self.control.endswith(":*"):
            self.control = self.bound("control: serving ")
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.connect(self.control)
        try:
            sock.send(command if isinstance(command, bytes) else command.encode())
            if not sock.poll(timeout_ms):
                raise AssertionError("no answer to %r from %s:\n%s"
                                     % (command, self.control, self.log()[-4000:]))
            return sock.recv()
        finally:
            sock.close()

    def stats(self):
        return json.loads(self.request("STATS"))

    def consumer(self, stats, name):
        for c in stats["consumers"]:
            if c["name"] == name:
                return c
        raise AssertionError("no consumer %r in stats" % name)

    def wait_ready(self):
        """Waits until the control socket answers (the hub is up)."""
        if self.control.startswith("ipc://"):
            wait_for(lambda: os.path.exists(self.control[len("ipc://"):]), "control socket",
                     hub=self)
        assert self.request("PING") == b"PONG"

    def log(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def wait_log(self, text, deadline=DEADLINE):
        def seen():
            if self.proc.poll() is not None and text not in self.log():
                raise AssertionError("hub exited (%s) before logging %r:\n%s"
                                     % (self.proc.returncode, text, self.log()))
            return text in self.log()
        wait_for(seen, "hub log line %r" % text, deadline)

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, deadline=DEADLINE):
        """Signals the hub and waits for it; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(deadline)

    def wait(self, deadline=DEADLINE):
        try:
            self.status = self.proc.wait(timeout=deadline)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("hub did not exit within %ss:\n%s" % (deadline, self.log()))
        self.err.close()
        self.out.close()
        check_sanitizers(self.log(), "fanhub run")
        return self.status

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        self.out.close()


def have_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class Publisher:
    """A pyzmq XPUB bound on a free loopback port. XPUB tells us when the hub
    has subscribed, so no message is lost to the slow-joiner effect; an
    unlimited send HWM means nothing is dropped at this end."""

    def __init__(self, ctx=None, ipv6=False):
        self.ctx = ctx or zmq.Context.instance()
        self.sock = self.ctx.socket(zmq.XPUB)
        self.sock.setsockopt(zmq.SNDHWM, 0)
        self.sock.setsockopt(zmq.LINGER, 5000)
        # A port '*': libzmq binds one and says which (no port to race for).
        if ipv6:
            self.sock.setsockopt(zmq.IPV6, 1)
            self.sock.bind("tcp://[::1]:*")
        else:
            self.sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self.sock.getsockopt(zmq.LAST_ENDPOINT).decode()
        self.port = int(self.endpoint.rsplit(":", 1)[1])

    def wait_subscribed(self, deadline=DEADLINE, hub=None):
        """Waits for the first subscription from a subscriber; fails at
        once, with its log, if `hub` exits meanwhile."""
        end = time.monotonic() + deadline
        while not self.sock.poll(100):
            if hub is not None and hub.proc.poll() is not None:
                raise AssertionError("hub exited (status %s) before subscribing:\n%s"
                                     % (hub.proc.returncode, hub.log()[-4000:]))
            if time.monotonic() > end:
                raise AssertionError("no subscriber connected to " + self.endpoint)
        return self.sock.recv()

    def send(self, *frames):
        self.sock.send_multipart([f if isinstance(f, bytes) else f.encode() for f in frames])

    def close(self):
        self.sock.close()


def whole_lines(path):
    """The file's lines that are whole, as text. A plugin writes a line
    with one write(2), but a reader can still see half of one: a line
    that crosses a page boundary is copied in two steps, and the file's
    size grows after each."""
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        data = f.read()
    return [line.decode() for line in data.split(b"\n")[:-1]]


def read_jsonl(path):
    return [json.loads(line) for line in whole_lines(path)]


def count_lines(path):
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return f.read().count(b"\n")


def yaml_list(items):
    return "[" + ", ".join(json.dumps(i) for i in items) + "]"


class Cleanup:
    """What a test must end however it ends: `with fh.Cleanup() as cleanup:`
    then `x = cleanup.add(x)` for each hub, collectd, publisher or socket;
    at the end of the block each is ended, the last added first, with
    kill() when it has one (after a clean stop it does nothing), else
    close(). A passing test still stops its hubs itself, checking the exit
    status."""

    def __init__(self):
        self.things = []

    def add(self, thing):
        self.things.append(thing)
        return thing

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for thing in reversed(self.things):
            (getattr(thing, "kill", None) or thing.close)()
        return False


# ---- Bus hubs, CURVE keys and bus peers (test_curve*, test_bus_endpoints,
# test_health)

def bus_hub_yaml(bus, consumers=None, extra=""):
    """A hub's configuration: bus, a dict (connect, bind, curve, allow_ip,
    connect_warning...: JSON, which YAML reads), extra top-level YAML, and
    consumers, YAML entries (default: one "null" consumer)."""
    return "bus: %s\n%sconsumers:\n%s" % (json.dumps(bus), extra,
                                           consumers or '  - {name: n, plugin: "null"}\n')


def log_consumer_yaml(name, path, capacity=None):
    """A `log` consumer entry writing every message to path."""
    queue = "    queue: {capacity: %d}\n" % capacity if capacity else ""
    return ("  - name: %s\n    plugin: log\n%s    options: {path: %s, flush_ms: 20}\n"
            % (name, queue, json.dumps(path)))


class Keys:
    """A CURVE key pair made by `fanhub keygen` at wd's NAME: the files it
    wrote (public_file, secret_file) and the Z85 keys (public, secret:
    bytes)."""

    def __init__(self, wd, name):
        import zmq.auth
        self.public_file = wd.file(name)
        status, _, err = run(["keygen", self.public_file])
        assert status == 0, err
        self.secret_file = self.public_file + "_secret"
        self.public, self.secret = zmq.auth.load_certificate(self.secret_file)


def zmq_peer(kind=zmq.XPUB, client=None, server_secret=None):
    """A pyzmq socket (no linger, no send limit): plaintext, a CURVE client
    given client=(public, secret, server_public), or a CURVE server given
    its secret key."""
    sock = zmq.Context.instance().socket(kind)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.SNDHWM, 0)
    if client is not None:
        sock.curve_publickey, sock.curve_secretkey, sock.curve_serverkey = client
    if server_secret is not None:
        sock.curve_server = True
        sock.curve_secretkey = server_secret
    return sock


def bind_xpub(endpoint, server_secret=None):
    """A zmq_peer() XPUB bound at endpoint; the port of a publisher just
    closed is freed by libzmq's I/O thread a moment later, so EADDRINUSE
    waits."""
    sock = zmq_peer(server_secret=server_secret)

    def bound():
        try:
            sock.bind(endpoint)
            return True
        except zmq.ZMQError as e:
            if e.errno != zmq.EADDRINUSE:
                raise
            return False
    wait_for(bound, "binding " + endpoint)
    return sock


def endpoint_stats(hub, address):
    """The STATS entry of the hub's bus endpoint address."""
    for e in hub.stats()["hub"]["endpoints"]:
        if e["endpoint"] == address:
            return e
    raise AssertionError("no endpoint %s in STATS" % address)


# A case that cannot run here (a tool scripts/deps installs is missing)
# raises Skip. The test program then exits SKIP_STATUS, which ctest shows
# as "Skipped" (the SKIP_RETURN_CODE of tests/CMakeLists.txt), unless it
# runs under CI=true: there every tool must be installed, and a skip fails.
SKIP_STATUS = 77
IN_CI = os.environ.get("CI", "").lower() in ("true", "1", "yes")


class PythonConsumer:
    """A `plugin: python` consumer (the worker plugin's Python runner) on
    tests/integration/workers/wtest.py's `record`, imported through a
    module of its own that a test can break and mend: break_import() makes
    its import fail and kills the worker, so that the consumer is down
    (state 1) until mend() lets the next restart work. A message with
    "halt": true halts it (state 2). The hub needs env() in its
    environment (wtest records to that file)."""

    WORKERS_DIR = os.path.join(SOURCE_DIR, "tests", "integration", "workers")

    def __init__(self, wd, name, topics="[org.test]"):
        self.name, self.topics = name, topics
        self.dir = wd.file("modules-" + name)
        os.makedirs(self.dir, exist_ok=True)
        self.module = os.path.join(self.dir, "consumer_%s.py" % name)
        self.out = wd.file("records.jsonl")
        self.mend()

    def yaml(self):
        """Its entry in `consumers:`, restarting quickly."""
        return ("  - name: %s\n    plugin: python\n    topics: %s\n"
                "    options: {callable: \"consumer_%s:record\", path: [%s, %s],"
                " restart_delay: 50ms, restart_delay_max: 200ms}\n"
                % (self.name, self.topics, self.name, json.dumps(self.dir),
                   json.dumps(self.WORKERS_DIR)))

    def env(self):
        return {"WORKER_TEST_OUT": self.out}

    def mend(self):
        with open(self.module, "w") as f:
            f.write("from wtest import record  # noqa: F401\n")

    def break_import(self, hub):
        """The import fails from now on, and the running worker is killed."""
        pids = re.findall(r"consumer '%s': worker 0 \(pid (\d+)\) ready" % re.escape(self.name),
                          hub.log())
        assert pids, "no worker of %s ready:\n%s" % (self.name, hub.log())
        with open(self.module, "w") as f:
            f.write("raise ImportError('broken on purpose')\n")
        os.kill(int(pids[-1]), signal.SIGKILL)


class Skip(Exception):
    pass


def require_tool(path, what, package):
    """path when it is not None, else Skip: `what` is missing, and which
    Debian package (installed by scripts/deps) has it."""
    if path:
        return path
    raise Skip("%s is missing: scripts/deps installs it (Debian package %s)" % (what, package))


def skip_all(reason):
    """Ends a test program whose every case needs what is missing."""
    if IN_CI:
        print("FAIL (CI=true, so nothing may be skipped): " + reason)
        sys.exit(1)
    print("SKIP: " + reason)
    sys.exit(SKIP_STATUS)


def main(tests, shared=None):
    """Runs the named test functions; prints 'N passed, N failed, N skipped'.
    Exit status 1 when one failed (a skip too, under CI=true), SKIP_STATUS
    when one was skipped, else 0. shared: for cases that share one work
    directory made by the first that needs it, a function that gives its
    Workdir (None: not made); it is removed after the run when every case
    passed, else kept for a look."""
    passed = failed = skipped = 0
    # NAME or FILE::NAME (as a test report names a case); a name of
    # another file, or of no case, is an error rather than nothing run.
    only = [arg.rsplit("::", 1)[-1] for arg in sys.argv[1:]]
    unknown = sorted(set(only) - {test.__name__ for test in tests})
    if unknown:
        print("no such case in %s: %s" % (os.path.basename(sys.argv[0]), ", ".join(unknown)))
        sys.exit(2)
    # FANHUB_CASE=GLOB, as for the cmocka programs (through ctest): the
    # matching cases; a program with none shows as skipped.
    pattern = os.environ.get("FANHUB_CASE", "")
    if pattern and not only:
        only = [test.__name__ for test in tests if fnmatch.fnmatchcase(test.__name__, pattern)]
        if not only:
            print("SKIP: no case matches FANHUB_CASE=%s" % pattern)
            sys.exit(SKIP_STATUS)
    for test in tests:
        if only and test.__name__ not in only:
            continue
        start = time.monotonic()
        try:
            test()
        except Skip as e:
            if IN_CI:
                failed += 1
                print("FAIL %s: CI=true, so nothing may be skipped: %s" % (test.__name__, e))
            else:
                skipped += 1
                print("SKIP %s: %s" % (test.__name__, e))
        except Exception:
            failed += 1
            print("FAIL %s (%.1fs)" % (test.__name__, time.monotonic() - start))
            traceback.print_exc()
        else:
            passed += 1
            print("ok   %s (%.1fs)" % (test.__name__, time.monotonic() - start))
        sys.stdout.flush()
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    if shared is not None and not (failed or skipped) and shared() is not None:
        shared().cleanup()
    if failed or not (passed or skipped):
        sys.exit(1)
    sys.exit(SKIP_STATUS if skipped else 0)
