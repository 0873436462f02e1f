"""CURVE failures on the bus recover and are counted (issue 28 item 7).

A mechanism mismatch on bus.connect (a plaintext publisher at a CURVE
hub's endpoint, or the reverse) is logged once with the cause, counted in
the endpoint's handshake_failures, and the hub keeps trying until the
right publisher is there; a wrong server_public_key is one warning, not
ten lines a second; a bound CURVE hub counts every refused plaintext peer
in auth_denied and logs it. Peers are pyzmq sockets; every wait is for a
condition."""
import os
import sys
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def hub_config(wd, connect=None, bind=None, curve=None):
    bus = {"connect_warning": 0}  # only the handshake's lines, however slow the machine
    for key, value in (("connect", connect), ("bind", bind), ("curve", curve)):
        if value:
            bus[key] = value
    return fh.bus_hub_yaml(bus, fh.log_consumer_yaml("all", wd.file("all.jsonl")))


def deliver(hub, wd, pub, n=3):
    """The hub subscribed through pub: n messages reach the consumer."""
    fh.wait_for(lambda: pub.poll(0), "the hub's subscription", hub=hub)
    pub.recv()
    before = fh.count_lines(wd.file("all.jsonl"))
    for i in range(n):
        pub.send_multipart([b"org.test.curve", b'{"i": %d}' % i])
    fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= before + n, "%d messages" % n,
                hub=hub)


def lines_with(hub, text):
    return [line for line in hub.log().splitlines() if text in line]


def mismatch_then_recover(hub_is_curve):
    wd = fh.Workdir()
    hub_keys = fh.Keys(wd, "hub")
    pub_public, pub_secret = zmq.curve_keypair()
    address = "tcp://127.0.0.1:%d" % fh.free_port()
    curve = {"secret_key_file": hub_keys.secret_file, "server_public_key": pub_public.decode()}
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, hub_config(wd, connect=address,
                                                curve=curve if hub_is_curve else None)))
        hub.wait_ready()
        # The wrong kind of publisher: plaintext for a CURVE hub, or CURVE
        # for a plaintext one.
        wrong = cleanup.add(fh.bind_xpub(address, None if hub_is_curve else pub_secret))
        fh.wait_for(lambda: fh.endpoint_stats(hub, address)["handshake_failures"] >= 3,
                    "failed handshakes, retried", hub=hub)
        e = fh.endpoint_stats(hub, address)
        # Whichever side sees the mismatch first hangs up: the cause is
        # the mismatch, or the peer closing mid-handshake.
        assert e["connected"] is False, e
        assert ("security mechanism mismatch" in e["last_error"]
                or ("CURVE peer?" if not hub_is_curve else "plaintext peer?") in e["last_error"]), e
        warned = lines_with(hub, "bus: %s: handshake failed: " % address)
        assert len(warned) == 1, hub.log()  # once per streak
        wrong.close()
        wrong = None
        # The right publisher comes back: the hub connects and delivers.
        right = cleanup.add(fh.bind_xpub(address, pub_secret if hub_is_curve else None))
        hub.wait_log("fanhub: info: bus: connected to %s" % address)
        deliver(hub, wd, right)
        assert fh.endpoint_stats(hub, address)["connected"] is True
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_curve_hub_plaintext_publisher_then_the_right_one():
    mismatch_then_recover(True)


def test_plaintext_hub_curve_publisher_then_a_plaintext_one():
    mismatch_then_recover(False)


def test_wrong_server_key_is_one_warning_and_counted():
    wd = fh.Workdir()
    hub_keys = fh.Keys(wd, "hub")
    pub_public, pub_secret = zmq.curve_keypair()
    other_public, _ = zmq.curve_keypair()
    address = "tcp://127.0.0.1:%d" % fh.free_port()
    curve = {"secret_key_file": hub_keys.secret_file, "server_public_key": other_public.decode()}
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, hub_config(wd, connect=address, curve=curve)))
        hub.wait_ready()
        cleanup.add(fh.bind_xpub(address, pub_secret))
        fh.wait_for(lambda: fh.endpoint_stats(hub, address)["handshake_failures"] >= 4,
                    "four failed handshakes", hub=hub)
        e = fh.endpoint_stats(hub, address)
        assert e["connected"] is False, e
        assert "a wrong bus.curve.server_public_key" in e["last_error"], e
        about = lines_with(hub, address)
        # "connecting to" at start, then one warning for the whole streak.
        assert len(about) == 2, hub.log()
        assert "handshake failed: the peer closed the connection" in about[1], about
        status, out, _ = fh.run(["stats", "-e", hub.control, "--format", "prometheus"])
        assert 'fanhub_endpoint_handshake_failures_total{endpoint="%s",kind="connect"}' % address \
            in out, out
        # check --connect says so too, with the configured keys.
        status, out, err = fh.run(["check", "--connect", "-c", hub.config])
        assert status == 1, (status, out, err)
        assert "  %s: handshake failed: the peer closed the connection" % address in out, out
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_bound_curve_hub_counts_and_logs_every_plaintext_peer():
    wd = fh.Workdir()
    hub_keys = fh.Keys(wd, "hub")
    allowed_public, _ = zmq.curve_keypair()
    address = "tcp://127.0.0.1:%d" % fh.free_port()
    curve = {"secret_key_file": hub_keys.secret_file, "allow": [allowed_public.decode()]}
    with fh.Cleanup() as cleanup:
        hub = cleanup.add(fh.Hub(wd, hub_config(wd, bind=address, curve=curve)))
        hub.wait_ready()
        for i in range(10):
            before = hub.stats()["hub"]["auth_denied"]
            plain = zmq.Context.instance().socket(zmq.PUB)
            plain.setsockopt(zmq.LINGER, 0)
            plain.connect(address)
            try:
                fh.wait_for(lambda: hub.stats()["hub"]["auth_denied"] > before,
                            "plaintext peer %d to be refused and counted" % i, deadline=20,
                            hub=hub)
            finally:
                plain.close()
        hub.wait_log("fanhub: warning: bus: %s refused a peer: handshake failed" % address)
        assert hub.stats()["hub"]["received"] == 0
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_curve_hub_plaintext_publisher_then_the_right_one,
             test_plaintext_hub_curve_publisher_then_a_plaintext_one,
             test_wrong_server_key_is_one_warning_and_counted,
             test_bound_curve_hub_counts_and_logs_every_plaintext_peer])
