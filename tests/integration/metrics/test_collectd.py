"""collectd, for real: the hub's figures reach a real collectd (Debian's
collectd-core, which scripts/deps installs) both ways, and what collectd
stored is read back from its csv plugin's files.

- Exec: collectd runs `fanhub collectd` (as `nobody`: Exec refuses root),
  which asks the hub for STATS and prints PUTVAL lines.
- unixsock: the hub pushes PUTVAL lines to collectd's unixsock socket
  (metrics.collectd.socket), and keeps doing so across a collectd restart,
  logging the lost connection once.
- `fanhub collectd` on its own, against a fake hub (a pyzmq ROUTER): it
  outlives a silent or refusing hub, saying so once; it exits 0 on
  SIGTERM and 1 when its stdout is closed.

The slow consumer is the `sleep` test plugin held by a release file: its
backlog of N-1 (one message is inside consume) is a fact of the scenario.
Every wait is for a condition, with a deadline; nothing asserts timing.
The csv plugin writes DataDir/HOST/PLUGIN-INSTANCE/TYPE-TYPEINSTANCE-DATE
with a header line "epoch,value"; gauges are written as "%f", and derive
values (StoreRates false, the default) as the raw counter."""
import glob
import grp
import json
import os
import pwd
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

TYPES_DB = "/usr/share/collectd/types.db"
EXEC_USER = "nobody"
COLLECTD_HOST = "fanhubtest"
N = 50
WARN_AT = 10


# ---------------------------------------------------------------------------
# collectd

def find_collectd():
    for path in (shutil.which("collectd"), "/usr/sbin/collectd"):
        if path and os.access(path, os.X_OK):
            return path
    return None


def collectd_conf(wd, exec_args=None):
    """A config for a collectd kept in the workdir: csv and unixsock, and
    exec running `exec_args` as EXEC_USER when given."""
    text = """\
Hostname "{host}"
FQDNLookup false
Interval 1
BaseDir "{dir}"
PIDFile "{dir}/collectd.pid"
TypesDB "{types}"

LoadPlugin logfile
<Plugin logfile>
  LogLevel info
  File "{dir}/collectd.log"
  Timestamp true
  PrintSeverity true
</Plugin>

LoadPlugin csv
<Plugin csv>
  DataDir "{dir}/csv"
  StoreRates false
</Plugin>

LoadPlugin unixsock
<Plugin unixsock>
  SocketFile "{dir}/collectd.sock"
  SocketGroup "{group}"
  SocketPerms "0660"
  DeleteSocket true
</Plugin>
""".format(host=COLLECTD_HOST, dir=wd.path, types=TYPES_DB,
           group=grp.getgrgid(os.getgid()).gr_name)
    if exec_args:
        text += ("\nLoadPlugin exec\n<Plugin exec>\n  Exec %s\n</Plugin>\n"
                 % " ".join(json.dumps(a) for a in [EXEC_USER] + exec_args))
    return text


class Collectd:
    """`collectd -f -C CONF`; with -f collectd writes no PID file, so it is
    stopped by the PID of the process we started."""

    def __init__(self, wd, conf_text, env=None):
        self.wd = wd
        self.conf = wd.write("collectd.conf", conf_text)
        self.socket = wd.file("collectd.sock")
        check = subprocess.run([find_collectd(), "-t", "-C", self.conf], capture_output=True)
        assert check.returncode == 0, "collectd -t refuses the config:\n%s%s" % (
            check.stdout.decode(errors="replace"), check.stderr.decode(errors="replace"))
        self.out = open(wd.file("collectd.stdout"), "ab")
        self.proc = subprocess.Popen([find_collectd(), "-f", "-C", self.conf],
                                     stdout=self.out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        fh.wait_for(lambda: self.dead() or os.path.exists(self.socket),
                    "collectd's unixsock socket")
        assert not self.dead(), "collectd exited (%s):\n%s" % (self.proc.returncode, self.log())

    def dead(self):
        return self.proc.poll() is not None

    def log(self):
        text = ""
        for name in ("collectd.log", "collectd.stdout"):
            path = self.wd.file(name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f.read()
        return text

    def kill(self):
        """For finally blocks: stops it, by its PID, whatever happened."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=fh.DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("collectd did not stop on SIGTERM:\n" + self.log())
        finally:
            self.out.close()
        # An Exec child writes its stderr into collectd's log.
        fh.check_sanitizers(self.log(), "collectd's log")


def csv_values(wd, host, instance, name):
    """The values collectd stored for HOST/fanhub-INSTANCE/NAME, oldest first."""
    pattern = os.path.join(wd.path, "csv", host, "fanhub-" + instance, name + "-[0-9]*")
    values = []
    for path in sorted(glob.glob(pattern)):  # one file per day: the date sorts
        with open(path, "rb") as f:
            data = f.read()
        for line in data.split(b"\n")[:-1]:  # whole lines only
            if line.startswith(b"epoch,"):
                continue
            values.append(float(line.split(b",")[1]))
    return values


def wait_csv(wd, host, instance, name, value, hub=None, collectd=None):
    def seen():
        values = csv_values(wd, host, instance, name)
        return values and values[-1] == value
    try:
        fh.wait_for(seen, "collectd to store %s/fanhub-%s/%s = %s"
                    % (host, instance, name, value), hub=hub)
    except AssertionError as e:
        # What was stored, what collectd said (an Exec child's stderr is
        # in its log) and what the hub said.
        raise AssertionError("%s; stored: %s\ncollectd's log:\n%s\nhub's log:\n%s"
                             % (e, csv_values(wd, host, instance, name)[-5:],
                                collectd.log()[-3000:] if collectd else "-",
                                hub.log()[-3000:] if hub else "-")) from None


def exec_children(binary):
    """PIDs of processes running `binary` (Exec children of our collectd).
    By /proc/PID/exe: Exec makes argv[0] the program's base name."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink("/proc/%s/exe" % entry)
        except OSError:
            continue
        if exe == binary:
            pids.append(int(entry))
    return pids


def stop_exec_children(binary):
    """collectd sends its Exec children SIGTERM when it stops: they must be
    gone soon after. Kills (by PID) what is left, and fails then."""
    try:
        fh.wait_for(lambda: not exec_children(binary), "the Exec child to exit on SIGTERM",
                    deadline=30)
    except AssertionError:
        for pid in exec_children(binary):
            os.kill(pid, signal.SIGKILL)
        raise


def copy_binary():
    """The Exec child runs as nobody, who may not traverse the build tree:
    a copy in a 0755 directory. The binary links only system libraries
    (the sanitizer runtimes are linked in statically). Returns the
    directory, the binary, and the environment collectd needs for it: a
    sanitizer's suppressions file named in its options is copied there
    too, as the checkout may be in a directory nobody cannot enter (a
    clone in mktemp -d's 0700 one: ThreadSanitizer then refuses to start
    the child)."""
    directory = tempfile.mkdtemp(prefix="fanhub-collectd-bin-")
    os.chmod(directory, 0o755)
    binary = os.path.join(directory, "fanhub")
    shutil.copy2(fh.BIN, binary)
    os.chmod(binary, 0o755)
    env = {}
    for name in ("TSAN_OPTIONS", "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        options = os.environ.get(name, "").split(":")
        for i, option in enumerate(options):
            if option.startswith("suppressions="):
                copy = os.path.join(directory, name.lower() + ".supp")
                shutil.copyfile(option[len("suppressions="):], copy)
                os.chmod(copy, 0o644)
                options[i] = "suppressions=" + copy
                env[name] = ":".join(options)
    return directory, binary, env


# ---------------------------------------------------------------------------
# The hub

def hub_config(pub, wd, control=None, collectd_socket=None, release=True, dead=None):
    """dead: a port where nothing listens, a second bus.connect endpoint
    that stays disconnected."""
    endpoints = [pub.endpoint] + (["tcp://127.0.0.1:%d" % dead] if dead else [])
    text = "bus:\n  connect: [%s]\n  gap_detection: {counter: i}\n" % ", ".join(endpoints)
    if control:
        text += "control: %s\n" % control
    text += "metrics:\n  interval: 1\n"
    if collectd_socket:
        text += ("  collectd: {socket: %s, interval: 1, disconnected_after: 1}\n"
                 % json.dumps(collectd_socket))
    options = "{release_file: %s}" % json.dumps(wd.file("release")) if release else "{ms: 0}"
    text += ("consumers:\n  - name: slow\n    plugin: %s/sleep.so\n    options: %s\n"
             "    queue: {warn_at: %d}\n" % (fh.TEST_PLUGINS, options, WARN_AT))
    return text


def publish(pub, first, count):
    for i in range(first, first + count):
        pub.send("org.fanhub.test.collectd", '{"i":%d}' % i)


def hub_stats(endpoint):
    status, out, err = fh.run(["stats", "-e", endpoint])
    assert status == 0, err
    return json.loads(out)


def collectd_host_of_this_machine():
    """The host name the hub writes: gethostname(), made identifier-safe
    as hub/metrics/stats_format.c does."""
    return "".join("_" if c in '/"\\ ' or ord(c) < 0x20 or ord(c) == 0x7f else c
                   for c in socket.gethostname()) or "localhost"


def collectd_figures(dead):
    """(plugin instance, value name) of every figure docs/metrics.md gives
    a collectd name, for this test's hub: no name, consumer "slow", the
    publisher's endpoint and the dead one. The hub.amqp rows need a
    RabbitMQ (bus.amqp) and the hub.signatures rows bus.validate_signatures
    (test_fedmsg): their names are checked by test_metrics_registry."""
    figures = []
    with open(os.path.join(fh.SOURCE_DIR, "docs", "metrics.md")) as f:
        for line in f:
            if not line.startswith("| `"):
                continue
            cells = [c.strip() for c in line.split("|")[1:6]]
            path, names = cells[0].strip("`"), cells[2]
            if names == "\u2014" or path.startswith(("hub.amqp.", "hub.signatures.")):
                continue
            names = [n.strip().strip("`") for n in names.split(",")]
            if path.startswith("consumers[]."):
                instances = ["slow"]
            elif path.startswith("hub.endpoints[]."):
                instances = ["endpoint_tcp_127.0.0.1_%d" % dead]
            else:
                instances = ["hub"]
            figures += [(i, n) for i in instances for n in names]
    assert len(figures) > 40, figures
    return figures


def check_every_figure(wd, host, dead, hub, collectd):
    """Each figure of docs/metrics.md with a collectd name is stored."""
    for instance, name in collectd_figures(dead):
        fh.wait_for(lambda: csv_values(wd, host, instance, name),
                    "collectd to store %s/fanhub-%s/%s" % (host, instance, name), hub=hub)
    # A few values that say the figures are the right ones.
    assert csv_values(wd, host, "endpoint_tcp_127.0.0.1_%d" % dead, "bool-connected")[-1] == 0
    assert csv_values(wd, host, "slow", "queue_length-warn_at")[-1] == WARN_AT
    assert csv_values(wd, host, "hub", "bool-config_last_reload_successful")[-1] == 1


def notifications(collectd):
    """The notifications collectd's logfile plugin logged: (severity,
    plugin_instance, type, type_instance, message)."""
    found = []
    for line in collectd.log().splitlines():
        if "Notification: severity = " not in line:
            continue
        fields = dict(part.split(" = ", 1) for part in
                      line.split("Notification: ", 1)[1].split(", ", 6))
        found.append((fields["severity"], fields.get("plugin_instance"), fields.get("type"),
                      fields.get("type_instance", ""), fields.get("message")))
    return found


def wait_notification(collectd, hub, severity, instance, text):
    def seen():
        return any(n[0] == severity and n[1] == instance and text in n[4]
                   for n in notifications(collectd))
    fh.wait_for(seen, "collectd to log a %s notification of %s: %s" % (severity, instance, text),
                hub=hub)


def check_backlog_then_completion(wd, host, hub, pub, collectd, dead=None):
    """N messages to the blocked consumer: backlog N-1, then all done;
    with dead, every figure, and the notifications of warn_at and of the
    dead endpoint."""
    pub.wait_subscribed(hub=hub)
    publish(pub, 0, N)
    wait_csv(wd, host, "slow", "queue_length", N - 1, hub, collectd)
    wait_csv(wd, host, "hub", "derive-received", N, hub, collectd)
    wait_csv(wd, host, "slow", "derive-enqueued", N, hub, collectd)
    if dead:
        check_every_figure(wd, host, dead, hub, collectd)
        wait_notification(collectd, hub, "WARNING", "slow",
                          "reached queue.warn_at %d" % WARN_AT)
        wait_notification(collectd, hub, "WARNING", "endpoint_tcp_127.0.0.1_%d" % dead,
                          "not connected for")
    open(wd.file("release"), "w").close()
    wait_csv(wd, host, "slow", "derive-completed", N, hub, collectd)
    wait_csv(wd, host, "slow", "queue_length", 0, hub, collectd)
    if dead:
        wait_notification(collectd, hub, "OKAY", "slow", "below half of queue.warn_at")
        # Each said once: the backlog crossed warn_at once.
        backlog = [n for n in notifications(collectd) if n[1] == "slow"]
        assert [n[0] for n in backlog] == ["WARNING", "OKAY"], backlog
        assert all(n[2] == "queue_length" for n in backlog), backlog
    assert csv_values(wd, host, "slow", "derive-failed")[-1] == 0
    assert csv_values(wd, host, "slow", "derive-dropped")[-1] == 0
    # Whole-run counters only ever grow.
    completed = csv_values(wd, host, "slow", "derive-completed")
    assert completed == sorted(completed), completed


# ---------------------------------------------------------------------------
# Scenarios with collectd

def test_exec_plugin_runs_fanhub_collectd():
    wd = fh.Workdir()
    bindir, binary, exec_env = copy_binary()
    pub = fh.Publisher()
    # tcp: an ipc socket would be 0660 in a directory nobody cannot enter.
    control = "tcp://127.0.0.1:%d" % fh.free_port()
    dead = fh.free_port()
    hub = fh.Hub(wd, hub_config(pub, wd, control=control, dead=dead))
    collectd = None
    try:
        fh.wait_for(lambda: hub_stats_or_none(control), "the hub's control socket", hub=hub)
        collectd = Collectd(wd, collectd_conf(wd, [binary, "collectd", "-e", control,
                                                   "--disconnected-after", "1"]),
                            env=exec_env)
        check_backlog_then_completion(wd, COLLECTD_HOST, hub, pub, collectd, dead)
        # It is collectd's child, and not root.
        children = exec_children(binary)
        assert len(children) == 1, children
        with open("/proc/%d/status" % children[0]) as f:
            uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
        assert uids == [str(pwd.getpwnam(EXEC_USER).pw_uid)] * 4, uids
        # COLLECTD_INTERVAL came through as interval=1; the host name from
        # COLLECTD_HOSTNAME is the directory the values are in.
        log = collectd.log()
        assert "Cowardly refusing" not in log, log
        assert "printing nothing" not in log, log  # the hub was up all along
        collectd.stop()
        stop_exec_children(binary)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        if collectd:
            collectd.kill()
        for pid in exec_children(binary):
            os.kill(pid, signal.SIGKILL)
        hub.kill()
        pub.close()
        shutil.rmtree(bindir, ignore_errors=True)


def hub_stats_or_none(endpoint):
    status, out, _ = fh.run(["stats", "-e", endpoint, "--timeout", "500"])
    return json.loads(out) if status == 0 else None


def test_hub_pushes_to_unixsock():
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        collectd = cleanup.add(Collectd(wd, collectd_conf(wd)))
        dead = fh.free_port()
        hub = cleanup.add(fh.Hub(wd, hub_config(pub, wd, collectd_socket=collectd.socket,
                                                dead=dead)))
        host = collectd_host_of_this_machine()
        check_backlog_then_completion(wd, host, hub, pub, collectd, dead)
        log = hub.log()
        # The first batch is every figure: those of the docs, and the
        # publisher's endpoint's beside the dead one's.
        figures = collectd_figures(dead)
        per_endpoint = sum(1 for instance, _ in figures if instance.startswith("endpoint_"))
        assert "collectd: pushing %d values to %s every 1s" % (
            len(figures) + per_endpoint, collectd.socket) in log, log
        assert "collectd: cannot push" not in log, log
        assert "refused" not in log, log
        assert "[error]" not in collectd.log(), collectd.log()
        assert hub.stop() == 0, hub.log()
        collectd.stop()
    wd.cleanup()


def test_a_consumer_down_then_up_is_notified():
    """A worker consumer whose worker cannot start again (its import
    fails) is down: collectd logs a warning naming it and the error, then
    "okay" once a worker started again."""
    wd = fh.Workdir()
    flaky = fh.PythonConsumer(wd, "flaky")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        collectd = cleanup.add(Collectd(wd, collectd_conf(wd)))
        config = ("bus:\n  connect: [%s]\nmetrics:\n  collectd: {socket: %s, interval: 1}\n"
                  "consumers:\n%s" % (pub.endpoint, json.dumps(collectd.socket), flaky.yaml()))
        hub = cleanup.add(fh.Hub(wd, config, env=flaky.env()))
        pub.wait_subscribed(hub=hub)
        flaky.break_import(hub)
        wait_notification(collectd, hub, "WARNING", "flaky", "consumer 'flaky': down: ")
        down = [n for n in notifications(collectd) if n[1] == "flaky"]
        # Its last error then: the kill, or the import failing after it.
        assert down[0][2:4] == ("gauge", "state") and "down: worker 0" in down[0][4], down
        flaky.mend()
        wait_notification(collectd, hub, "OKAY", "flaky", "consumer 'flaky': up again")
        assert [n[0] for n in notifications(collectd) if n[1] == "flaky"] == [
            "WARNING", "OKAY"], notifications(collectd)
        assert hub.stop() == 0, hub.log()
        collectd.stop()
    wd.cleanup()


def test_hub_outlives_a_collectd_restart():
    wd = fh.Workdir()
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        collectd = cleanup.add(Collectd(wd, collectd_conf(wd)))
        conf = collectd.conf
        lost = "collectd: cannot push to %s" % collectd.socket
        hub = cleanup.add(fh.Hub(wd, hub_config(pub, wd, collectd_socket=collectd.socket,
                                                release=False)))
        host = collectd_host_of_this_machine()
        pub.wait_subscribed(hub=hub)
        publish(pub, 0, 10)
        wait_csv(wd, host, "slow", "derive-completed", 10, hub, collectd)

        collectd.stop()
        hub.wait_log(lost)
        lost_at = hub_stats(hub.control)["hub"]["uptime"]
        # The hub goes on without collectd.
        publish(pub, 10, 10)
        fh.wait_for(lambda: hub_stats(hub.control)["consumers"][0]["completed"] == 20,
                    "the hub to consume without collectd", hub=hub)
        # Several push intervals (1 s each) later, still one line about it.
        fh.wait_for(lambda: hub_stats(hub.control)["hub"]["uptime"] >= lost_at + 4,
                    "four more push intervals", hub=hub)
        assert hub.log().count(lost) == 1, hub.log()

        collectd = cleanup.add(Collectd(wd, open(conf).read()))
        wait_csv(wd, host, "slow", "derive-completed", 20, hub, collectd)
        hub.wait_log("collectd: pushing to %s again" % collectd.socket)
        log = hub.log()
        assert log.count(lost) == 1, log
        assert log.count("collectd: pushing to %s again" % collectd.socket) == 1, log
        assert hub.stop() == 0, hub.log()
        collectd.stop()
    wd.cleanup()


# ---------------------------------------------------------------------------
# `fanhub collectd` against a fake hub

SNAPSHOT = {
    "hub": {"name": "bus1", "version": "0.1.0", "pid": 1, "uptime": 5.0, "interval": 1.0,
            "received": 7, "malformed": 0, "unrouted": 1, "endpoints": []},
    "consumers": [{"name": "c1", "plugin": "log", "capacity": 100, "enqueued": 6,
                   "dequeued": 3, "completed": 2, "failed": 1, "retried": 0, "dropped": 0,
                   "spilled": 0, "dead_lettered": 0, "coalesced": 0, "backlog": 3,
                   "in_flight": 0, "backlog_max": 3, "stuck": 0}],
}


class FakeHub:
    """A ROUTER on a free port that counts STATS requests and answers them
    as `mode` says: "silent" (no answer), "stats" (SNAPSHOT), "error"."""

    def __init__(self):
        self.endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
        self.mode = "silent"
        self.requests = 0
        self.lock = threading.Lock()
        self.stopping = False
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self):
        sock = zmq.Context.instance().socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(self.endpoint)
        self.ready.set()
        try:
            while not self.stopping:
                if not sock.poll(50):
                    continue
                frames = sock.recv_multipart()
                with self.lock:
                    self.requests += 1
                    mode = self.mode
                if mode == "stats":
                    sock.send_multipart(frames[:-1] + [json.dumps(SNAPSHOT).encode()])
                elif mode == "error":
                    sock.send_multipart(frames[:-1] + [b"ERROR not today"])
        finally:
            sock.close()

    def count(self):
        with self.lock:
            return self.requests

    def set_mode(self, mode):
        with self.lock:
            self.mode = mode
            return self.requests

    def close(self):
        self.stopping = True
        self.thread.join(10)


class Program:
    """`fanhub collectd ARGS` with stdout on a pipe we read without
    threads, and stderr in a file."""

    def __init__(self, wd, args, env=None):
        self.stderr_path = wd.file("program.stderr")
        self.err = open(self.stderr_path, "wb")
        read_end, write_end = os.pipe()
        self.proc = subprocess.Popen([fh.BIN, "collectd"] + args, stdout=write_end,
                                     stderr=self.err, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, **(env or {})))
        os.close(write_end)
        self.fd = read_end
        self.out = b""

    def stderr(self):
        with open(self.stderr_path, errors="replace") as f:
            return f.read()

    def read_until(self, condition, what):
        """Reads stdout until condition(text so far) holds."""
        end = time.monotonic() + fh.DEADLINE
        while not condition(self.out.decode(errors="replace")):
            if time.monotonic() > end:
                raise AssertionError("timed out waiting for %s; stdout:\n%s\nstderr:\n%s"
                                     % (what, self.out[-2000:], self.stderr()))
            if select.select([self.fd], [], [], 0.05)[0]:
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise AssertionError("stdout closed while waiting for %s; stderr:\n%s"
                                         % (what, self.stderr()))
                self.out += chunk

    def close_stdout(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def wait(self):
        try:
            status = self.proc.wait(timeout=fh.DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("fanhub collectd did not exit:\n" + self.stderr())
        self.err.close()
        fh.check_sanitizers(self.stderr(), "fanhub collectd")
        return status

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.err.close()
        self.close_stdout()


DOWN = "printing nothing until the hub answers"
BACK = "the hub answers again on "


def said_once_each_time(stderr):
    """The program's down and back lines alternate, down first: each
    outage is said once, however many requests it lasts. (On a loaded
    machine one answer of a live hub may come later than the interval:
    that is one more outage, said once, not a failure.)"""
    said = [DOWN if DOWN in line else BACK for line in stderr.splitlines()
            if DOWN in line or BACK in line]
    assert said[0::2] == [DOWN] * len(said[0::2]), stderr
    assert said[1::2] == [BACK] * len(said[1::2]), stderr


def test_program_outlives_the_hub():
    wd = fh.Workdir()
    hub = FakeHub()
    program = Program(wd, ["-e", hub.endpoint, "--interval", "0.2", "--host", "h1"])
    try:
        # A silent hub: said once, however many times it is asked.
        fh.wait_for(lambda: hub.count() >= 3, "three STATS requests")
        assert program.stderr().count(DOWN) == 1, program.stderr()
        assert "no answer within 200 ms" in program.stderr(), program.stderr()
        assert program.out == b""

        asked = hub.set_mode("stats")
        program.read_until(lambda t: 'PUTVAL "h1/fanhub-bus1.c1/derive-enqueued"' in t,
                           "a whole batch")
        text = program.out.decode()
        for line in ('PUTVAL "h1/fanhub-bus1/derive-received" interval=0.2 N:7\n',
                     'PUTVAL "h1/fanhub-bus1/derive-unrouted" interval=0.2 N:1\n',
                     'PUTVAL "h1/fanhub-bus1.c1/queue_length" interval=0.2 N:3\n',
                     'PUTVAL "h1/fanhub-bus1.c1/derive-completed" interval=0.2 N:2\n',
                     'PUTVAL "h1/fanhub-bus1.c1/derive-failed" interval=0.2 N:1\n'):
            assert line in text, text
        assert text.startswith('PUTVAL "h1/fanhub-bus1/uptime" interval=0.2 N:5\n'), text
        assert "PUTNOTIF" not in text, text
        fh.wait_for(lambda: hub.count() >= asked + 3, "three more requests")
        program.read_until(lambda t: t.count("derive-received") >= 3, "three batches")
        stderr = program.stderr()
        assert BACK + hub.endpoint in stderr, stderr
        said_once_each_time(stderr)

        # A hub that answers an error is as good as none.
        asked = hub.set_mode("error")
        fh.wait_for(lambda: hub.count() >= asked + 3, "three refused requests")
        stderr = program.stderr()
        said_once_each_time(stderr)
        last = [line for line in stderr.splitlines() if DOWN in line or BACK in line][-1]
        assert DOWN in last, stderr  # an answered ERROR is an outage
        assert "the hub answered: ERROR not today" in stderr, stderr

        program.proc.send_signal(signal.SIGTERM)
        assert program.wait() == 0, program.stderr()
        wd.cleanup()
    finally:
        program.kill()
        hub.close()


def test_program_takes_collectds_environment_and_stops_with_its_stdout():
    wd = fh.Workdir()
    hub = FakeHub()
    hub.set_mode("stats")
    program = Program(wd, ["-e", hub.endpoint],
                      env={"COLLECTD_HOSTNAME": "envhost", "COLLECTD_INTERVAL": "0.200"})
    try:
        program.read_until(lambda t: "derive-enqueued" in t, "a batch")
        assert 'PUTVAL "envhost/fanhub-bus1/derive-received" interval=0.2 N:7\n' \
            in program.out.decode(), program.out
        # collectd went away: the next batch finds the pipe closed.
        program.close_stdout()
        assert program.wait() == 1, program.stderr()
        assert "cannot write to stdout: Broken pipe (collectd went away)" in program.stderr()
        wd.cleanup()
    finally:
        program.kill()
        hub.close()


def test_program_refuses_bad_usage():
    for args, env, says in (
            (["--interval", "0"], {}, "--interval: expected seconds"),
            (["--interval", "soon"], {}, "--interval: expected seconds"),
            (["--interval", "5 minutes"], {}, "(or a duration such as 250ms, 2s or 1m)"),
            ([], {"COLLECTD_INTERVAL": "abc"}, "COLLECTD_INTERVAL: expected seconds"),
            (["-c", "x.yaml", "-e", "tcp://127.0.0.1:1"], {}, "give -c or -e, not both"),
            (["extra"], {}, "unexpected argument 'extra'"),
            (["--disconnected-after", "0"], {}, "--disconnected-after: expected seconds"),
            (["--disconnected-after", "soon"], {}, "--disconnected-after: expected seconds")):
        proc = subprocess.run([fh.BIN, "collectd"] + args, capture_output=True,
                              env=dict(os.environ, **env), timeout=fh.DEADLINE)
        err = proc.stderr.decode(errors="replace")
        assert proc.returncode == 2, (args, proc.returncode, err)
        assert says in err, (args, err)
    status, out, _ = fh.run(["collectd", "--help"])
    assert status == 0 and "fanhub-exec.conf" in out and "LoadPlugin exec" in out, out
    # The push's threshold is checked where it is written.
    wd = fh.Workdir()
    path = wd.write("bad.yaml", "bus: {connect: tcp://127.0.0.1:1}\nmetrics:\n  collectd:\n"
                    "    socket: /tmp/x.sock\n    disconnected_after: 0\n"
                    "consumers:\n  - {name: a, plugin: log}\n")
    status, _, err = fh.run(["check", "-c", path])
    assert status == 2 and "%s:5:25" % path in err and "disconnected_after" in err, err
    wd.cleanup()


if __name__ == "__main__":
    if not find_collectd():
        fh.skip_all("collectd is missing: scripts/deps installs it (Debian package collectd-core)")
    if not os.path.exists(TYPES_DB):
        print("FAIL: collectd is installed but %s is missing" % TYPES_DB)
        sys.exit(1)
    fh.main([test_exec_plugin_runs_fanhub_collectd,
             test_hub_pushes_to_unixsock,
             test_a_consumer_down_then_up_is_notified,
             test_hub_outlives_a_collectd_restart,
             test_program_outlives_the_hub,
             test_program_takes_collectds_environment_and_stops_with_its_stdout,
             test_program_refuses_bad_usage])
