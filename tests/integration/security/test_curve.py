"""CURVE on the bus: `fanhub keygen`, a hub that lets in only the keys it
allows (plaintext and unknown keys refused and counted in hub.auth_denied),
bus.allow_ip, and a relay chain hub -> relay -> hub with CURVE on both hops.
Peers are pyzmq sockets with their own CURVE keys; every wait is for a
condition (a subscription, a count), never for time."""
import json
import os
import socket
import stat
import sys

import zmq
from zmq.utils.monitor import recv_monitor_message

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def curve(secret_file, allow=None, server_key=None):
    """A bus.curve setting."""
    setting = {"secret_key_file": secret_file}
    if allow is not None:
        setting["allow"] = [k.decode() for k in allow]
    if server_key is not None:
        setting["server_public_key"] = server_key.decode()
    return setting


def log_yaml(name, path):
    return fh.log_consumer_yaml(name, path, capacity=100000)


def hub_figure(hub, key):
    return hub.stats()["hub"][key]


def test_keygen_and_the_secret_mode():
    wd = fh.Workdir()
    keys = fh.Keys(wd, "hub")
    path, secret_file, public, secret = keys.public_file, keys.secret_file, keys.public, keys.secret
    assert stat.S_IMODE(os.stat(secret_file).st_mode) == 0o600
    assert len(public) == 40 and len(secret) == 40
    with open(path) as f:
        assert secret.decode() not in f.read()  # the public file holds no secret
    status, _, err = fh.run(["keygen", path])
    assert status == 1 and "exists; not overwriting a key" in err, err

    bind = "tcp://127.0.0.1:%d" % fh.free_port()
    config = wd.write("c.yaml", fh.bus_hub_yaml({"bind": bind,
                                                 "curve": curve(secret_file, allow=[public])}))
    status, out, err = fh.run(["check", "-c", config])
    assert status == 0, err
    os.chmod(secret_file, 0o640)
    status, out, err = fh.run(["check", "-c", config])
    assert status == 2, (out, err)
    assert "bus.curve.secret_key_file: secret key file %s: mode 0640 lets other users read" \
        % secret_file in err, err
    assert secret.decode() not in out + err
    status, _, err = fh.run(["run", "-c", config])
    assert status == 2 and "mode 0640" in err, err
    # Half a configuration is refused by name.
    os.chmod(secret_file, 0o600)
    config = wd.write("d.yaml", fh.bus_hub_yaml({"bind": bind, "curve": curve(secret_file)}))
    status, _, err = fh.run(["check", "-c", config])
    assert status == 2 and "bus.curve.allow: missing: with curve, bus.bind" in err, err
    config = wd.write("e.yaml", fh.bus_hub_yaml({"bind": bind, "curve": {
        "secret_key_file": secret_file, "allow_dir": wd.file("none")}}))
    status, _, err = fh.run(["check", "-c", config])
    assert status == 2 and "bus.curve.allow_dir: %s is not a directory" % wd.file("none") in err, err
    wd.cleanup()


def test_plaintext_and_unknown_keys_refused_allowed_key_delivered():
    n = 10000
    wd = fh.Workdir()
    hub_keys, client_keys = fh.Keys(wd, "hub"), fh.Keys(wd, "client")
    hub_secret, hub_public = hub_keys.secret_file, hub_keys.public
    stranger_public, stranger_secret = zmq.curve_keypair()
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    with fh.Cleanup() as cleanup:
        config = fh.bus_hub_yaml({"bind": endpoint,
                                  "curve": curve(hub_secret, allow=[client_keys.public])},
                                 log_yaml("all", wd.file("all.jsonl")))
        hub = cleanup.add(fh.Hub(wd, config))
        hub.wait_ready()
        # Plaintext: a ZMTP 3.0 greeting with the NULL mechanism, written by
        # hand and kept open until the hub answers, so that the hub reads
        # all of it (a libzmq client may see the mismatch first and reset
        # the connection before the hub has read the mechanism: refused
        # too, but the hub cannot tell why).
        plain = socket.create_connection(("127.0.0.1", int(endpoint.rsplit(":", 1)[1])))
        plain.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL" + b"\x00" * 16
                      + b"\x00" + b"\x00" * 31)
        fh.wait_for(lambda: hub_figure(hub, "auth_denied") >= 1,
                    "the plaintext publisher to be refused", hub=hub)
        plain.close()
        assert hub_figure(hub, "received") == 0
        denied = hub_figure(hub, "auth_denied")

        # CURVE, with a key the hub does not know: ZAP says no.
        stranger = cleanup.add(fh.zmq_peer(client=(stranger_public, stranger_secret, hub_public)))
        stranger.connect(endpoint)
        fh.wait_for(lambda: hub_figure(hub, "auth_denied") > denied,
                    "the unknown key to be refused", hub=hub)
        assert stranger.poll(0) == 0  # the hub never subscribed through it
        stranger.close()

        # The allowed key: every message, exactly.
        client = cleanup.add(fh.zmq_peer(client=(client_keys.public, client_keys.secret,
                                                 hub_public)))
        client.connect(endpoint)
        fh.wait_for(lambda: client.poll(0), "the hub's subscription", hub=hub)
        client.recv()
        for i in range(n):
            client.send_multipart([b"org.test.curve", b'{"i": %d}' % i])
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= n, "%d messages" % n, hub=hub)
        stats = hub.stats()
        text = json.dumps(stats)
        assert stats["hub"]["received"] == n, stats["hub"]
        assert stats["hub"]["malformed"] == 0
        assert stats["hub"]["peers_refused"] == 0
        bodies = [json.loads(line["body"])["i"] for line in fh.read_jsonl(wd.file("all.jsonl"))]
        assert bodies == list(range(n))
        # The figure reaches Prometheus and collectd too.
        status, out, err = fh.run(["stats", "-e", hub.control, "--format", "prometheus"])
        assert status == 0 and "fanhub_auth_denied_total %d" % stats["hub"]["auth_denied"] in out, out
        status, out, err = fh.run(["stats", "-e", hub.control, "--format", "collectd"])
        assert status == 0 and "derive-auth_denied" in out, out
        assert hub.stop() == 0, hub.log()
        secret_text = hub_keys.secret.decode()
        assert secret_text not in text and secret_text not in hub.log()
    wd.cleanup()


def test_allow_dir():
    """Keys from a zcert directory (zcertstore): a client whose public
    certificate is there gets in."""
    wd = fh.Workdir()
    hub_keys = fh.Keys(wd, "hub")
    os.mkdir(wd.file("allowed"))
    client_keys = fh.Keys(wd, "allowed/client")
    os.rename(client_keys.secret_file, wd.file("client_secret"))  # only the public file stays
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    with fh.Cleanup() as cleanup:
        config = fh.bus_hub_yaml({"bind": endpoint, "curve": {
            "secret_key_file": hub_keys.secret_file, "allow_dir": wd.file("allowed")}},
            log_yaml("all", wd.file("all.jsonl")))
        hub = cleanup.add(fh.Hub(wd, config))
        hub.wait_ready()
        client = cleanup.add(fh.zmq_peer(client=(client_keys.public, client_keys.secret,
                                                 hub_keys.public)))
        client.connect(endpoint)
        fh.wait_for(lambda: client.poll(0), "the hub's subscription", hub=hub)
        client.recv()
        for i in range(10):
            client.send_multipart([b"org.test.dir", b"%d" % i])
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= 10, "10 messages", hub=hub)
        assert hub.stats()["hub"]["auth_denied"] == 0
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_allow_ip_refuses_other_addresses():
    # The non-loopback addresses in allow_ip below are only an allow-list
    # the hub matches peers against: every socket of the test is on
    # loopback (127.0.0.1), and nothing is ever sent to them.
    wd = fh.Workdir()
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml({"bind": endpoint, "allow_ip": ["192.0.2.1"]},
                                                     log_yaml("all", wd.file("all.jsonl")))))
        hub.wait_ready()
        pub = cleanup.add(fh.zmq_peer())
        pub.connect(endpoint)
        fh.wait_for(lambda: hub_figure(hub, "auth_denied") >= 1,
                    "a connection from 127.0.0.1 to be refused", hub=hub)
        assert pub.poll(0) == 0
        assert hub_figure(hub, "received") == 0
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_allow_ip_networks():
    """bus.allow_ip takes networks: 127.0.0.0/8 lets a loopback publisher
    in, 10.0.0.0/8 (with an IPv6 network beside it) refuses it."""
    wd = fh.Workdir()
    for allow, admitted in ((["10.0.0.0/8", "::1/128", "127.0.0.0/8"], True),
                            (["10.0.0.0/8", "2001:db8::/32"], False)):
        endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
        path = wd.file("all-%s.jsonl" % admitted)
        with fh.Cleanup() as cleanup:
            config = fh.bus_hub_yaml({"bind": endpoint, "allow_ip": allow}, log_yaml("all", path))
            hub = cleanup.add(fh.Hub(wd, config, name="hub-%s" % admitted))
            hub.wait_ready()
            pub = cleanup.add(fh.zmq_peer())
            pub.connect(endpoint)
            if admitted:
                fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
                pub.send_multipart([b"org.test.cidr", b"in"])
                fh.wait_for(lambda: fh.count_lines(path) == 1, "the message delivered", hub=hub)
                assert hub_figure(hub, "auth_denied") == 0
            else:
                fh.wait_for(lambda: hub_figure(hub, "auth_denied") >= 1,
                            "127.0.0.1 refused by 10.0.0.0/8", hub=hub)
                assert pub.poll(0) == 0
                assert hub_figure(hub, "received") == 0
            assert hub.stop() == 0, hub.log()
    status, _, err = fh.run(["check", "-c", wd.write("bad.yaml", "bus:\n  bind: tcp://127.0.0.1:1\n"
                                                     "  allow_ip: [10.0.0.1/8]\nconsumers:\n"
                                                     "  - {name: n, plugin: \"null\"}\n")])
    assert status == 2 and "got '10.0.0.1/8': bits are set past the prefix length" in err, err
    wd.cleanup()


def test_relay_chain_with_curve_on_both_hops():
    """publisher --CURVE--> hub A (bus.bind) -> relay (bind, CURVE server,
    its ZAP lets hub B in) --CURVE--> hub B (bus.connect)."""
    n = 2000
    wd = fh.Workdir()
    a, relay_keys, b = fh.Keys(wd, "a"), fh.Keys(wd, "relay"), fh.Keys(wd, "b")
    pub_public, pub_secret = zmq.curve_keypair()
    a_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    relay_endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    relay = {"bind": relay_endpoint, "require_subscriber": True, "subscriber_wait_ms": 120000,
             "curve": curve(relay_keys.secret_file, allow=[b.public])}
    with fh.Cleanup() as cleanup:
        config = fh.bus_hub_yaml({"bind": a_endpoint,
                                  "curve": curve(a.secret_file, allow=[pub_public])},
                                 "  - name: relay\n    plugin: relay\n    options: %s\n"
                                 % json.dumps(relay))
        hub_a = cleanup.add(fh.Hub(wd, config, name="a"))
        hub_a.wait_ready()
        hub_b = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml(
            {"connect": relay_endpoint,
             "curve": curve(b.secret_file, server_key=relay_keys.public)},
            log_yaml("mirror", wd.file("b.jsonl"))), name="b"))
        hub_b.wait_ready()
        client = cleanup.add(fh.zmq_peer(client=(pub_public, pub_secret, a.public)))
        client.connect(a_endpoint)
        fh.wait_for(lambda: client.poll(0), "hub A's subscription", hub=hub_a)
        client.recv()
        for i in range(n):
            client.send_multipart([b"org.test.chain", b"%d" % i])
        fh.wait_for(lambda: fh.count_lines(wd.file("b.jsonl")) >= n,
                    "hub B to log %d relayed messages" % n, hub=hub_b)
        bodies = [int(line["body"]) for line in fh.read_jsonl(wd.file("b.jsonl"))]
        assert bodies == list(range(n))
        assert hub_a.stats()["hub"]["auth_denied"] == 0
        assert hub_b.stats()["hub"]["received"] == n
        # A subscriber the relay does not know gets nothing: its handshake
        # is refused by the relay's own ZAP handler.
        stranger_public, stranger_secret = zmq.curve_keypair()
        stranger = cleanup.add(fh.zmq_peer(zmq.SUB, client=(stranger_public, stranger_secret,
                                                            relay_keys.public)))
        stranger.setsockopt(zmq.SUBSCRIBE, b"")
        monitor = stranger.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                                              | zmq.EVENT_HANDSHAKE_FAILED_AUTH
                                              | zmq.EVENT_HANDSHAKE_SUCCEEDED)
        stranger.connect(relay_endpoint)
        assert monitor.poll(fh.DEADLINE * 1000), "no handshake outcome for the stranger"
        event = recv_monitor_message(monitor)
        assert event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH, event
        stranger.disable_monitor()
        monitor.close()
        stranger.close()
        assert hub_a.stop() == 0, hub_a.log()
        assert hub_b.stop() == 0, hub_b.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_keygen_and_the_secret_mode,
             test_plaintext_and_unknown_keys_refused_allowed_key_delivered,
             test_allow_dir,
             test_allow_ip_refuses_other_addresses,
             test_allow_ip_networks,
             test_relay_chain_with_curve_on_both_hops])
