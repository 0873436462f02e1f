"""A private RabbitMQ node for integration tests, from Debian's
rabbitmq-server (scripts/deps installs it), as test_store.py starts its own
PostgreSQL: nothing is shared with the machine's broker or with another
test running at the same time.

Per node, in a temp dir of its own:
- a node name unique to this process and node (fanhub-test-PID-N@localhost);
- free loopback ports for AMQP (RABBITMQ_NODE_PORT), Erlang distribution
  (RABBITMQ_DIST_PORT) and epmd (ERL_EPMD_PORT): an epmd of its own, which
  this module starts in the foreground, so that it has a PID to stop and no
  two tests share one;
- RABBITMQ_MNESIA_BASE, RABBITMQ_LOG_BASE, the config file, the
  rabbitmq-env.conf (empty: /etc/rabbitmq/rabbitmq-env.conf is not read),
  and an enabled-plugins file with rabbitmq_consistent_hash_exchange;
- an Erlang cookie of its own: HOME is the temp dir, and rabbitmqctl runs
  with the same HOME.

It runs as the user who runs the test (root here): RabbitMQ, unlike
PostgreSQL, does not refuse root, and every file it writes is in the temp
dir, so nothing needs a chown and the test can always stop and remove it.
(Debian's /usr/sbin wrappers switch to the rabbitmq user and use
/var/lib/rabbitmq; this module calls /usr/lib/rabbitmq/bin directly.)

The broker is started and stopped by PID: rabbitmq-server (without a
terminal) stays as a shell that turns SIGTERM into a clean stop of its
child, the Erlang VM, whose PID this module reads from /proc. It is waited
for with an AMQP handshake (connection.start comes only once the node has
booted). stop() sends SIGTERM to the shell, SIGKILL to both after a
deadline, and makes sure the VM is gone; then stops its epmd. kill() (and
restart(crash=True)) sends SIGKILL to the VM: a broker crash. Use it as a
context manager, or call stop() in a finally: the node is stopped when the
test fails too. An atexit hook stops any node left running.

Usage:
    with rabbitmq_node.RabbitNode(users=[("fanhub", "secret", "/bridge")]) as node:
        # (fanhublib.Skip when rabbitmq-server is missing)
        node.add_user("other", "pw", vhost="/x")     # rabbitmqctl, seconds per call
        ... amqp://fanhub@127.0.0.1:{node.port}/%2Fbridge ...
        node.restart()                               # same data, same ports
        node.down(); ...; node.start()               # unreachable meanwhile
    RabbitNode(tls=True): also amqps on node.tls_port, node.ca_file signed it
        node.queue_depths("/bridge") -> {"q": (ready, unacked)}
"""
import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import fanhublib as fh

RABBITMQ_BIN = "/usr/lib/rabbitmq/bin"
PLUGINS = ["rabbitmq_consistent_hash_exchange"]
START_DEADLINE = float(os.environ.get("FANHUB_RABBITMQ_START_DEADLINE", "180"))

_running = []
_count = 0


def rabbitmq_server():
    """The path of rabbitmq-server; fanhublib.Skip (a failure under
    CI=true) when the package is not installed."""
    path = os.path.join(RABBITMQ_BIN, "rabbitmq-server")
    return fh.require_tool(path if os.access(path, os.X_OK) and shutil.which("epmd") else None,
                           "RabbitMQ (rabbitmq-server)", "rabbitmq-server")


def amqp_answers(port, timeout=2.0):
    """True when an AMQP 0-9-1 server answers the protocol header on port
    with a connection.start frame (type 1, channel 0, class 10 method 10)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"AMQP\x00\x00\x09\x01")
            head = b""
            while len(head) < 11:
                chunk = s.recv(11 - len(head))
                if not chunk:
                    return False
                head += chunk
            return head[0] == 1 and head[1:3] == b"\x00\x00" and head[7:11] == b"\x00\x0a\x00\x0a"
    except OSError:
        return False


class RabbitNode:
    """One private RabbitMQ node, started at construction."""

    def __init__(self, plugins=PLUGINS, users=(), tls=False, queues=(), peer_cert=False):
        """users: (user, password, vhost) made at boot, from a definitions
        file (faster than rabbitmqctl, which starts an Erlang VM per call);
        the default guest/guest on / is kept. queues: (vhost, queue,
        exchange, routing key): a durable queue bound to exchange, from the
        same file, which the node reads at every boot, so they are there
        even after a crash that lost a recent declaration. tls: also a TLS listener on
        127.0.0.1:tls_port, with a certificate for "localhost" signed by a
        CA made here (ca_file: its PEM). peer_cert (with tls): the TLS
        listener requires a client certificate signed by that CA, as
        Fedora's broker does; client_cert and client_key are one."""
        global _count
        rabbitmq_server()
        _count += 1
        self.name = "fanhub-test-%d-%d@localhost" % (os.getpid(), _count)
        self.root = tempfile.mkdtemp(prefix="fanhub-rabbitmq-")
        self.port = fh.free_port()
        self.dist_port = fh.free_port()
        self.epmd_port = fh.free_port()
        self.log_dir = os.path.join(self.root, "log")
        os.makedirs(self.log_dir)
        os.makedirs(os.path.join(self.root, "mnesia"))
        with open(os.path.join(self.root, "enabled_plugins"), "w") as f:
            f.write("[%s].\n" % ",".join(plugins))
        with open(os.path.join(self.root, "rabbitmq-env.conf"), "w") as f:
            f.write("# empty: the machine's /etc/rabbitmq/rabbitmq-env.conf is not read\n")
        self.tls_port = fh.free_port() if tls else None
        self.ca_file = self._make_certificates() if tls else None
        self.client_cert = self.client_key = None
        if tls and peer_cert:
            self.client_cert, self.client_key = self._make_client_certificate()
        definitions = os.path.join(self.root, "definitions.json")
        with open(definitions, "w") as f:
            json.dump(self._definitions([("guest", "guest", "/")] + list(users), queues), f)
        with open(os.path.join(self.root, "rabbitmq.conf"), "w") as f:
            # Loopback only; no disk or memory alarm from a busy test machine
            # (an alarm blocks publishers, which would look like a hub bug).
            f.write("listeners.tcp.default = 127.0.0.1:%d\n"
                    "disk_free_limit.absolute = 1MB\n"
                    "vm_memory_high_watermark.absolute = 4GB\n"
                    "load_definitions = %s\n"
                    "log.console = false\n"
                    "log.file.level = info\n" % (self.port, definitions))
            if tls:
                f.write("listeners.ssl.default = 127.0.0.1:%d\n"
                        "ssl_options.cacertfile = %s\n"
                        "ssl_options.certfile = %s\n"
                        "ssl_options.keyfile = %s\n"
                        "ssl_options.verify = %s\n"
                        "ssl_options.fail_if_no_peer_cert = %s\n"
                        % (self.tls_port, self.ca_file, os.path.join(self.root, "server.pem"),
                           os.path.join(self.root, "server.key"),
                           "verify_peer" if peer_cert else "verify_none",
                           "true" if peer_cert else "false"))
        self.env = dict(os.environ,
                        HOME=self.root,
                        RABBITMQ_NODENAME=self.name,
                        RABBITMQ_USE_LONGNAME="false",
                        RABBITMQ_NODE_IP_ADDRESS="127.0.0.1",
                        RABBITMQ_NODE_PORT=str(self.port),
                        RABBITMQ_DIST_PORT=str(self.dist_port),
                        ERL_EPMD_PORT=str(self.epmd_port),
                        ERL_EPMD_ADDRESS="127.0.0.1",
                        RABBITMQ_CONF_ENV_FILE=os.path.join(self.root, "rabbitmq-env.conf"),
                        RABBITMQ_CONFIG_FILE=os.path.join(self.root, "rabbitmq"),
                        RABBITMQ_MNESIA_BASE=os.path.join(self.root, "mnesia"),
                        RABBITMQ_LOG_BASE=self.log_dir,
                        RABBITMQ_PID_FILE=os.path.join(self.root, "rabbitmq.pid"),
                        RABBITMQ_ENABLED_PLUGINS_FILE=os.path.join(self.root, "enabled_plugins"),
                        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=(
                            "-kernel inet_dist_use_interface {127,0,0,1}"))
        # A private cookie: Erlang makes one in HOME when there is none,
        # but writing it first makes sure no other one is ever read.
        cookie = os.path.join(self.root, ".erlang.cookie")
        with open(cookie, "w") as f:
            f.write(os.urandom(16).hex().upper())
        os.chmod(cookie, 0o400)
        self.epmd = None
        self.proc = None
        _running.append(self)
        try:
            self.start()
        except BaseException:
            self.stop()
            raise

    def _make_certificates(self, prefix=""):
        """A CA (PREFIXca.pem) and, signed by it, a certificate for
        localhost (PREFIXserver.pem, PREFIXserver.key), EC P-256 (quick to
        make); returns the CA's path. Also for a test's own second CA."""
        openssl = fh.require_tool(shutil.which("openssl"), "openssl", "openssl")
        d = lambda name: os.path.join(self.root, prefix + name)  # noqa: E731
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        with open(d("san.cnf"), "w") as f:
            f.write("subjectAltName = DNS:localhost\n")
        steps = [
            [openssl, "req", "-x509"] + ec + ["-keyout", d("ca.key"), "-out", d("ca.pem"),
                                            "-days", "3", "-subj", "/CN=fanhub test CA"],
            [openssl, "req"] + ec + ["-keyout", d("server.key"), "-out", d("server.csr"),
                                   "-subj", "/CN=localhost"],
            [openssl, "x509", "-req", "-in", d("server.csr"), "-CA", d("ca.pem"), "-CAkey",
             d("ca.key"), "-CAcreateserial", "-out", d("server.pem"), "-days", "3",
             "-extfile", d("san.cnf")]]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, timeout=fh.DEADLINE)
            if r.returncode != 0:
                raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
        return d("ca.pem")

    def _make_client_certificate(self):
        """A client certificate (client.pem, client.key) signed by the CA
        of _make_certificates."""
        openssl = fh.require_tool(shutil.which("openssl"), "openssl", "openssl")
        d = lambda name: os.path.join(self.root, name)  # noqa: E731
        steps = [
            [openssl, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", d("client.key"), "-out", d("client.csr"),
             "-subj", "/CN=fanhub test client"],
            [openssl, "x509", "-req", "-in", d("client.csr"), "-CA", d("ca.pem"), "-CAkey",
             d("ca.key"), "-CAcreateserial", "-out", d("client.pem"), "-days", "3"]]
        for cmd in steps:
            r = subprocess.run(cmd, capture_output=True, timeout=fh.DEADLINE)
            if r.returncode != 0:
                raise AssertionError("%s: %s" % (" ".join(cmd), r.stderr.decode(errors="replace")))
        return d("client.pem"), d("client.key")

    @staticmethod
    def _definitions(users, queues):
        vhosts = sorted({v for _, _, v in users} | {q[0] for q in queues})
        return {"users": [{"name": u, "password": p, "tags": ""} for u, p, _ in users],
                "vhosts": [{"name": v} for v in vhosts],
                "permissions": [{"user": u, "vhost": v, "configure": ".*", "write": ".*",
                                 "read": ".*"} for u, _, v in users],
                "queues": [{"name": q, "vhost": v, "durable": True, "auto_delete": False,
                            "arguments": {}} for v, q, _, _ in queues],
                "bindings": [{"source": x, "vhost": v, "destination": q,
                              "destination_type": "queue", "routing_key": k,
                              "arguments": {}} for v, q, x, k in queues]}

    # -- life cycle ---------------------------------------------------------

    def start(self):
        """Starts epmd (when not running) and the node; returns once the
        node answers AMQP."""
        if self.epmd is None or self.epmd.poll() is not None:
            self.epmd = subprocess.Popen(["epmd", "-port", str(self.epmd_port),
                                          "-address", "127.0.0.1"],
                                         env=self.env, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = open(os.path.join(self.log_dir, "startup.log"), "ab")
        self.proc = subprocess.Popen([os.path.join(RABBITMQ_BIN, "rabbitmq-server")],
                                     env=self.env, cwd=self.root, stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=out)
        out.close()
        end = time.monotonic() + START_DEADLINE
        while True:
            if self.proc.poll() is not None:
                raise AssertionError("rabbitmq-server exited (%s) at start:\n%s"
                                     % (self.proc.returncode, self.log()[-6000:]))
            left = end - time.monotonic()
            if left <= 0:
                raise AssertionError("RabbitMQ %s did not start within %ss:\n%s"
                                     % (self.name, START_DEADLINE, self.log()[-6000:]))
            # The AMQP listener opens when the node has booted; a
            # connection.start is the node's own word that it takes clients
            # (rabbitmqctl await_startup says the same, but costs an Erlang
            # VM per try).
            if amqp_answers(self.port):
                return
            time.sleep(0.2)

    def vm_pid(self):
        """The Erlang VM's PID: rabbitmq-server, without a terminal, stays
        as a shell that turns SIGTERM into a clean stop, and runs the VM as
        its child. None when neither runs."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                children = [int(p) for p in f.read().split()]
        except OSError:
            return None
        return children[0] if children else None

    def stop(self, deadline=fh.DEADLINE):
        """Stops the node by its PID (SIGTERM to rabbitmq-server, which
        stops the VM cleanly; SIGKILL to both after deadline seconds), then
        its epmd. Safe to call twice."""
        if self.proc is not None and self.proc.poll() is None:
            vm = self.vm_pid()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                self.kill()
            if vm is not None:
                self._kill_pid(vm)  # never left behind, even if the shell was killed
        if self.epmd is not None and self.epmd.poll() is None:
            self.epmd.terminate()
            self.epmd.wait()
        if self in _running:
            _running.remove(self)

    @staticmethod
    def _kill_pid(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def kill(self):
        """SIGKILL of the Erlang VM (its epmd stays): a crash, as clients
        see it. The rabbitmq-server shell then exits by itself."""
        if self.proc is None or self.proc.poll() is not None:
            return
        vm = self.vm_pid()
        if vm is not None:
            self._kill_pid(vm)
        try:
            self.proc.wait(timeout=fh.DEADLINE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def down(self, crash=False):
        """Stops the broker (SIGKILL of the VM with crash=True: a crash as
        clients see it), keeping its epmd, name, ports and data, for
        start() or a test of an unreachable broker."""
        if crash:
            self.kill()
        elif self.proc is not None and self.proc.poll() is None:
            vm = self.vm_pid()
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=fh.DEADLINE)
            if vm is not None:
                self._kill_pid(vm)
        if self not in _running:
            _running.append(self)  # its epmd still runs

    def restart(self, crash=False):
        """down(crash), then start() again with the same name, ports and
        data: durable queues and persistent messages are kept."""
        self.down(crash)
        self.start()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def cleanup(self):
        """Stops the node and removes its directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        # The directory (logs) is kept when the test failed.
        if kind is None:
            self.cleanup()
        else:
            self.stop()
            print("RabbitMQ %s: logs kept in %s" % (self.name, self.log_dir))
        return False

    # -- administration -----------------------------------------------------

    def ctl(self, args, check=True, timeout=fh.DEADLINE):
        """Runs `rabbitmqctl -n NODE ARGS...` with the node's cookie."""
        r = subprocess.run([os.path.join(RABBITMQ_BIN, "rabbitmqctl"), "-n", self.name] + args,
                           env=self.env, capture_output=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError("rabbitmqctl %s: %s%s" % (" ".join(args),
                                 r.stdout.decode(errors="replace"),
                                 r.stderr.decode(errors="replace")))
        return r

    def add_vhost(self, vhost):
        if vhost != "/":
            self.ctl(["add_vhost", vhost])

    def add_user(self, user, password, vhost="/"):
        """A user with every permission on vhost (made when missing)."""
        self.add_vhost(vhost)
        self.ctl(["add_user", user, password])
        self.ctl(["set_permissions", "-p", vhost, user, ".*", ".*", ".*"])

    def queue_depths(self, vhost="/"):
        """{queue name: (messages ready, messages unacknowledged)}."""
        r = self.ctl(["list_queues", "-p", vhost, "--formatter", "json", "--silent",
                      "name", "messages_ready", "messages_unacknowledged"])
        rows = json.loads(r.stdout.decode() or "[]")
        return {q["name"]: (q["messages_ready"], q["messages_unacknowledged"]) for q in rows}

    def url(self, user="guest", vhost="/"):
        """An amqp:// URL without a password (vhost percent-encoded)."""
        from urllib.parse import quote
        return "amqp://%s@127.0.0.1:%d/%s" % (user, self.port, quote(vhost, safe=""))

    def log(self):
        """The startup output and the node's own log, for failures."""
        text = ""
        for name in sorted(os.listdir(self.log_dir)):
            try:
                with open(os.path.join(self.log_dir, name), errors="replace") as f:
                    text += "==> %s <==\n%s\n" % (name, f.read()[-8000:])
            except OSError:
                pass
        return text


@atexit.register
def _stop_all():
    for node in list(_running):
        node.stop(deadline=30)


def _smoke():
    """The harness itself: a user from the definitions, one made by
    rabbitmqctl, a persistent message kept across a clean restart and a
    crash, queue depths, and no process left behind."""
    import pika
    with RabbitNode(users=[("fanhub", "pw", "/smoke")]) as node:
        params = pika.ConnectionParameters("127.0.0.1", node.port, "/smoke",
                                           pika.PlainCredentials("fanhub", "pw"))
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        ch.queue_declare("kept", durable=True)
        ch.basic_publish("", "kept", b"x", pika.BasicProperties(delivery_mode=2))
        conn.close()
        node.add_user("other", "pw2", vhost="/other")
        assert node.queue_depths("/smoke") == {"kept": (1, 0)}
        vm = node.vm_pid()
        node.restart()
        assert node.vm_pid() != vm and not os.path.exists("/proc/%d" % vm)
        vm = node.vm_pid()
        node.restart(crash=True)
        assert node.vm_pid() != vm and not os.path.exists("/proc/%d" % vm)
        assert node.queue_depths("/smoke") == {"kept": (1, 0)}
        out = node.ctl(["list_vhosts", "--silent"]).stdout.decode()
        assert "/smoke" in out and "/other" in out, out
        vm, epmd = node.vm_pid(), node.epmd.pid
    for pid in (vm, epmd):
        assert not os.path.exists("/proc/%d" % pid), pid
    print("ok: %s on port %d" % (node.name, node.port))


if __name__ == "__main__":
    try:
        _smoke()
    except fh.Skip as e:
        fh.skip_all(str(e))
