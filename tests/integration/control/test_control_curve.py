"""CURVE on a tcp:// control endpoint (control_curve): `fanhub stats`,
`emit` and `reload` with an allowed key get their answers (keys given
with --curve-key/--server-key, or read from the hub's configuration with
-c); an unknown key, a plaintext client and a wrong server key are
refused, each client says so and exits within its own timeout, and the
hub counts the refusals in hub.auth_denied. The hub's own /metrics thread
still reaches its CURVE control socket. `check` and `run` refuse a tcp
control endpoint off loopback without CURVE unless control_insecure says
so. Every wait is for a condition, never for time."""
import json
import os
import re
import socket
import subprocess
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

CONSUMERS = "consumers:\n  - {name: n, plugin: \"null\"}\n"


def keygen(wd, name):
    """`fanhub keygen` a pair; returns (public file, secret file, public key text)."""
    path = wd.file(name)
    status, _, err = fh.run(["keygen", path])
    assert status == 0, err
    with open(path) as f:
        line = next(l for l in f if l.strip().startswith("public-key"))
    return path, path + "_secret", line.split('"')[1]


def control_yaml(endpoint, curve=None, insecure=None):
    text = "bus:\n  bind: tcp://127.0.0.1:*\ncontrol: %s\n" % endpoint
    if curve is not None:
        text += "control_curve: %s\n" % json.dumps(curve)
    if insecure is not None:
        text += "control_insecure: %s\n" % ("true" if insecure else "false")
    return text + CONSUMERS


class Keys:
    """The hub's pair, an allowed client's, a local client's (client_key_file)
    and a stranger's."""

    def __init__(self, wd):
        self.hub_public_file, self.hub_secret, self.hub_public = keygen(wd, "hub")
        _, self.client_secret, self.client_public = keygen(wd, "client")
        _, self.local_secret, _ = keygen(wd, "local")
        _, self.stranger_secret, _ = keygen(wd, "stranger")

    def curve(self):
        return {"secret_key_file": self.hub_secret, "allow": [self.client_public],
                "client_key_file": self.local_secret}


def start_hub(wd, keys, extra=""):
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    hub = fh.Hub(wd, control_yaml(endpoint, keys.curve()) + extra)
    hub.wait_log("control: serving %s with CURVE (control_curve)" % endpoint)
    return hub, endpoint


def stats(args):
    """`fanhub stats ARGS` with a short timeout: (status, stdout, stderr)."""
    return fh.run(["stats", "-t", "3000"] + args)


def auth_denied(endpoint, keys):
    status, out, err = stats(["-e", endpoint, "--curve-key", keys.client_secret,
                              "--server-key", keys.hub_public])
    assert status == 0, err
    return json.loads(out)["hub"]["auth_denied"]


def test_allowed_keys_get_answers():
    wd = fh.Workdir()
    keys = Keys(wd)
    port = fh.free_port()
    hub, endpoint = start_hub(wd, keys, "metrics:\n  prometheus:\n    listen: \"127.0.0.1:%d\"\n"
                              % port)
    try:
        # --server-key as the key itself, and as the hub's public zcert file.
        for server_key in (keys.hub_public, keys.hub_public_file):
            status, out, err = stats(["-e", endpoint, "--curve-key", keys.client_secret,
                                      "--server-key", server_key])
            assert status == 0, err
            assert json.loads(out)["hub"]["auth_denied"] == 0
        # -c: the server key from control_curve.secret_key_file, the client's
        # pair from client_key_file (let in without being listed).
        status, out, err = stats(["-c", hub.config])
        assert status == 0, err
        assert "auth_denied" in json.loads(out)["hub"]
        status, out, err = fh.run(["emit", "-c", hub.config, "org.test.curve", "{}"])
        assert status == 0 and out.startswith("n: "), (out, err)  # routed to n
        status, out, err = fh.run(["reload", "-c", hub.config])
        assert status == 0 and "reloaded" in out, (out, err)
        # --curve-key overrides client_key_file; a stranger's key is refused.
        status, _, err = stats(["-c", hub.config, "--curve-key", keys.stranger_secret])
        assert status == 1 and "the hub refused this client's key" in err, err
        # The hub's own /metrics thread is a CURVE client of its control socket.
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=60) as r:
            assert r.status == 200
            assert b"fanhub_auth_denied_total" in r.read()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()


def test_refused_clients_say_so_and_are_counted():
    wd = fh.Workdir()
    keys = Keys(wd)
    hub, endpoint = start_hub(wd, keys)
    sock = None
    try:
        assert auth_denied(endpoint, keys) == 0
        # An unknown key: refused by the ZAP handler, said at once.
        status, out, err = stats(["-e", endpoint, "--curve-key", keys.stranger_secret,
                                  "--server-key", keys.hub_public])
        assert status == 1 and out == "", (out, err)
        assert "the hub refused this client's key" in err, err
        fh.wait_for(lambda: auth_denied(endpoint, keys) >= 1, "the unknown key counted",
                    hub=hub)
        # Plaintext: the mechanisms differ; the client names what is missing.
        status, out, err = stats(["-e", endpoint])
        assert status == 1 and out == "", (out, err)
        assert "it requires CURVE; give --curve-key and --server-key" in err, err
        # The hub counts a plaintext client once it has read its mechanism:
        # a ZMTP 3.0 greeting with NULL, written by hand and kept open (a
        # libzmq client may see the mismatch first and reset the connection
        # before the hub reads it: refused too, but not always counted).
        before = auth_denied(endpoint, keys)
        sock = socket.create_connection(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])))
        sock.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL" + b"\x00" * 16
                     + b"\x00" + b"\x00" * 31)
        fh.wait_for(lambda: auth_denied(endpoint, keys) > before, "the plaintext client counted",
                    hub=hub)
        # Another server key: the handshake does not decrypt; the client
        # gives up at its timeout and says what to check.
        before = auth_denied(endpoint, keys)
        status, out, err = fh.run(["stats", "-t", "500", "-e", endpoint, "--curve-key",
                                   keys.client_secret, "--server-key", keys.client_public])
        assert status == 1 and "no answer within 500 ms" in err, err
        assert "is the server key its control public key?" in err, err
        fh.wait_for(lambda: auth_denied(endpoint, keys) > before, "the wrong server key counted",
                    hub=hub)
        # emit and reload refuse the same way, before anything is sent.
        for command in (["emit", "-e", endpoint, "org.x", "{}"], ["reload", "-e", endpoint]):
            status, out, err = fh.run(command)
            assert status == 1 and "it requires CURVE" in err, (command, out, err)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        if sock is not None:
            sock.close()
        hub.kill()


def test_ports_chosen_by_the_hub_are_logged():
    """control tcp://127.0.0.1:*, bus.bind tcp://127.0.0.1:* and HTTP on
    port 0: the hub binds ports of its choosing and logs them, so a test
    never picks a port and hopes; its /metrics thread reaches the control
    port it got."""
    wd = fh.Workdir()
    keys = Keys(wd)
    hub = fh.Hub(wd, control_yaml("tcp://127.0.0.1:*", keys.curve())
                 + "metrics:\n  prometheus:\n    listen: \"127.0.0.1:0\"\n")
    try:
        endpoint = hub.bound("control: serving ", r"(tcp://127\.0\.0\.1:\d+) with CURVE")
        assert endpoint != "tcp://127.0.0.1:0", hub.log()
        assert auth_denied(endpoint, keys) == 0
        bus = hub.bound("bus.bind: listening on ")
        assert re.fullmatch(r"tcp://127\.0\.0\.1:\d+", bus), hub.log()
        status, out, err = stats(["-e", endpoint, "--curve-key", keys.client_secret,
                                  "--server-key", keys.hub_public])
        assert status == 0, err
        [bind] = json.loads(out)["hub"]["endpoints"]
        assert bind["endpoint"] == "tcp://127.0.0.1:*" and bind["bound"] == bus, bind
        http = hub.bound("prometheus: serving http://", r"(127\.0\.0\.1:\d+)/metrics")
        with urllib.request.urlopen("http://%s/metrics" % http, timeout=60) as r:
            assert r.status == 200 and b"fanhub_auth_denied_total" in r.read()
        # A client cannot be told '*': it needs the port the log names.
        for args in (["-e", "tcp://127.0.0.1:*"], ["-c", hub.config]):
            status, _, err = stats(args)
            assert status == 2 and "its log says \"control: serving\"" in err, (status, err)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()


def test_client_key_options_are_checked():
    wd = fh.Workdir()
    keys = Keys(wd)
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    cases = [
        (["-e", endpoint, "--curve-key", keys.client_secret],
         "--curve-key without --server-key"),
        (["-e", endpoint, "--server-key", keys.hub_public], "--server-key without --curve-key"),
        (["-e", endpoint, "--curve-key", keys.client_secret, "--server-key", "short"],
         "--server-key short: neither 40 characters of Z85 nor a zcert file"),
        (["-e", "ipc://" + wd.file("c.sock"), "--curve-key", keys.client_secret,
          "--server-key", keys.hub_public], "CURVE keys are for a tcp:// control endpoint"),
        (["-e", endpoint, "--curve-key", keys.hub_public_file, "--server-key", keys.hub_public],
         "holds no curve/secret-key"),
    ]
    os.chmod(keys.hub_public_file, 0o600)  # past the mode check: what it holds
    os.chmod(keys.stranger_secret, 0o644)
    cases.append((["-e", endpoint, "--curve-key", keys.stranger_secret, "--server-key",
                   keys.hub_public], "mode 0644 lets other users read or change it"))
    for args, why in cases:
        status, out, err = stats(args)
        assert status == 2 and why in err, (args, out, err)
        assert "secret-key" not in out  # never a secret on the way
    # -c with control_curve but no client key anywhere.
    curve = {"secret_key_file": keys.hub_secret, "allow": [keys.client_public]}
    config = wd.write("nokey.yaml", control_yaml(endpoint, curve))
    status, _, err = stats(["-c", config])
    assert status == 2 and "has control_curve: give --curve-key FILE" in err, err
    wd.cleanup()


def test_check_and_run_refuse_a_control_endpoint_off_loopback_in_clear():
    wd = fh.Workdir()
    keys = Keys(wd)
    port = fh.free_port()
    exposed = "tcp://0.0.0.0:%d" % port
    config = wd.write("clear.yaml", control_yaml(exposed))
    for command in ("check", "run"):
        status, _, err = fh.run([command, "-c", config])
        assert status == 2, (command, err)
        assert "control: %s is not on loopback" % exposed in err, err
        assert "control_curve:" in err and "control_insecure: true" in err, err
    # Said on purpose: served in clear, and the log says so.
    config = wd.write("insecure.yaml", control_yaml(exposed, insecure=True))
    status, _, err = fh.run(["check", "-c", config])
    assert status == 0, err
    # With CURVE: accepted, on every interface.
    config = wd.write("curve.yaml", control_yaml(exposed, keys.curve()))
    status, out, err = fh.run(["check", "-c", config])
    assert status == 0, err
    assert open(keys.hub_secret).read().split('secret-key = "')[1][:40] not in out + err
    # CURVE on an ipc socket is refused: its owner and mode guard it.
    config = wd.write("ipc.yaml", control_yaml("ipc://" + wd.file("c.sock"), keys.curve()))
    status, _, err = fh.run(["check", "-c", config])
    assert status == 2 and "CURVE is for a tcp:// control endpoint" in err, err
    # A secret key file others may read is refused, in check as in run.
    os.chmod(keys.hub_secret, 0o640)
    config = wd.write("mode.yaml", control_yaml("tcp://127.0.0.1:%d" % port, keys.curve()))
    for command in ("check", "run"):
        status, _, err = fh.run([command, "-c", config])
        assert status == 2 and "control_curve.secret_key_file: secret key file" in err, err
        assert "mode 0640" in err, err
    wd.cleanup()


def test_insecure_endpoint_off_loopback_is_served_and_logged():
    wd = fh.Workdir()
    port = fh.free_port()
    hub = fh.Hub(wd, control_yaml("tcp://0.0.0.0:%d" % port, insecure=True))
    try:
        hub.wait_log("control: serving tcp://0.0.0.0:%d in clear (control_insecure)" % port)
        status, out, err = stats(["-e", "tcp://127.0.0.1:%d" % port])
        assert status == 0, err
        assert json.loads(out)["hub"]["auth_denied"] == 0
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()


def test_tail_is_a_curve_client_of_bus_publish():
    """`fanhub tail --curve-key --server-key` subscribes to a hub's
    bus.publish under bus.curve; its key must be allowed."""
    wd = fh.Workdir()
    keys = Keys(wd)
    publish = "tcp://127.0.0.1:%d" % fh.free_port()
    curve = {"secret_key_file": keys.hub_secret, "allow": [keys.client_public]}
    hub = fh.Hub(wd, "bus:\n  bind: tcp://127.0.0.1:%d\n  publish: %s\n  curve: %s\n%s"
                 % (fh.free_port(), publish, json.dumps(curve), CONSUMERS))
    tail = None
    try:
        hub.wait_ready()
        tail = subprocess.Popen([fh.BIN, "tail", "-n", "1", "--connect", publish, "--curve-key",
                                 keys.client_secret, "--server-key", keys.hub_public,
                                 "org.test."], stdout=subprocess.PIPE, stderr=subprocess.PIPE)

        def emitted():  # until tail, subscribed at some point, got one and exited
            status, _, err = fh.run(["emit", "-c", hub.config, "org.test.tail", "hello"])
            assert status == 0, err
            return tail.poll() is not None
        fh.wait_for(emitted, "tail to receive an emitted message", hub=hub)
        out, err = tail.communicate()
        assert tail.returncode == 0, err
        assert out == b"org.test.tail hello\n", (out, err)
        assert hub_denied(hub) == 0
        assert hub.stop() == 0, hub.log()
    finally:
        if tail is not None and tail.poll() is None:
            tail.kill()
            tail.wait()
        hub.kill()
    for args, why in ((["--curve-key", keys.client_secret], "--curve-key without --server-key"),
                      (["-b", "tcp://127.0.0.1:1", "--curve-key", keys.client_secret,
                        "--server-key", keys.hub_public], "--curve-key is for --connect")):
        status, _, err = fh.run(["tail"] + args)
        assert status == 2 and why in err, (args, err)
    wd.cleanup()


class HangsUpFirst:
    """A control endpoint that hangs up on libzmq before its greeting, as a
    hub that saw the mismatch first does (the race the client loses on a
    busy machine), and answers the client's probe, which sends 11 bytes at
    once (libzmq sends 10, then waits for ours), with a ZMTP 3.0 greeting
    naming `mechanism`."""

    def __init__(self, mechanism):
        self.greeting = (b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00"
                         + mechanism.ljust(20, b"\x00") + b"\x01" + b"\x00" * 31)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = "tcp://127.0.0.1:%d" % self.listener.getsockname()[1]
        self.hung_up = self.probed = 0
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            with conn:
                data = b""
                while len(data) < 10:
                    chunk = conn.recv(64)
                    if not chunk:
                        break
                    data += chunk
                # Counted first: the client may be gone once it has read.
                if len(data) >= 11 and data[10] == 3:
                    self.probed += 1
                    conn.sendall(self.greeting)
                else:
                    self.hung_up += 1

    def close(self):
        self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self.thread.join()


def test_hang_up_before_the_greeting_is_probed():
    """A hub that hangs up before the client reads its greeting: the client
    reads the greeting itself once and names the mechanism it wants; when
    the greeting shows no mismatch, it waits out its timeout as before."""
    wd = fh.Workdir()
    _, secret, public = keygen(wd, "probe")
    keyed = ["--curve-key", secret, "--server-key", public]
    cases = ((b"CURVE", [], "it requires CURVE; give --curve-key and --server-key"),
             (b"NULL", keyed, "it does not speak CURVE on this endpoint"),
             (b"NULL", [], "no answer within 1000 ms"))
    for mechanism, args, said in cases:
        with fh.Cleanup() as cleanup:
            server = cleanup.add(HangsUpFirst(mechanism))
            status, out, err = fh.run(["stats", "-t", "1000", "-e", server.endpoint] + args)
            assert status == 1 and out == "" and said in err, (mechanism, args, err)
            assert server.hung_up >= 1 and server.probed == 1, (server.hung_up, server.probed)
    wd.cleanup()


def hub_denied(hub):
    return hub.stats()["hub"]["auth_denied"]


if __name__ == "__main__":
    fh.main([test_allowed_keys_get_answers,
             test_refused_clients_say_so_and_are_counted,
             test_ports_chosen_by_the_hub_are_logged,
             test_client_key_options_are_checked,
             test_hang_up_before_the_greeting_is_probed,
             test_check_and_run_refuse_a_control_endpoint_off_loopback_in_clear,
             test_insecure_endpoint_off_loopback_is_served_and_logged,
             test_tail_is_a_curve_client_of_bus_publish])
