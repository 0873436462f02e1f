"""bench_pub (the benchmark's publisher) as a CURVE client, as the curve
case of scripts/bench runs it: keys from `fanhub keygen`, the hub's public
key as text and bench_pub's own zcert secret file; a hub with bus.curve
takes in every message. A wrong server key fails the handshake (bench_pub
exits 1, the hub counts it), and half or broken key options are usage
errors (exit 2) that name what is wrong."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

BENCH_PUB = os.path.join(os.path.dirname(os.path.abspath(fh.BIN)), "bench_pub")


def bench_pub(args, timeout=fh.DEADLINE):
    if not os.path.exists(BENCH_PUB):
        raise AssertionError("%s is missing: build the bench_pub target" % BENCH_PUB)
    proc = subprocess.run([BENCH_PUB] + args, capture_output=True, timeout=timeout)
    out = proc.stdout.decode(errors="replace")
    err = proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, "bench_pub")
    return proc.returncode, out, err


def keygen(wd, name):
    """`fanhub keygen` a pair; returns (its public key text, the secret file)."""
    path = wd.file(name)
    status, _, err = fh.run(["keygen", path])
    assert status == 0, err
    with open(path) as f:
        line = next(l for l in f if l.strip().startswith("public-key"))
    return line.split('"')[1], path + "_secret"


def curve_hub(wd, hub_secret, allowed_public):
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    hub = fh.Hub(wd, "bus:\n  bind: %s\n  curve: %s\nconsumers:\n"
                 "  - {name: n, plugin: \"null\"}\n"
                 % (endpoint, json.dumps({"secret_key_file": hub_secret,
                                          "allow": [allowed_public]})))
    hub.wait_ready()
    return hub, endpoint


def test_bench_pub_is_a_curve_client_the_hub_lets_in():
    wd = fh.Workdir()
    hub_public, hub_secret = keygen(wd, "hub")
    pub_public, pub_secret = keygen(wd, "pub")
    hub, endpoint = curve_hub(wd, hub_secret, pub_public)
    try:
        status, out, err = bench_pub(["--connect", endpoint, "-n", "5000", "--size", "1024",
                                      "--curve-server-key", hub_public,
                                      "--curve-keys", pub_secret])
        assert status == 0, err
        lines = out.split()
        assert lines[0] == "ready", out
        assert json.loads(lines[-1])["sent"] == 5000, out
        fh.wait_for(lambda: hub.consumer(hub.stats(), "n")["completed"] == 5000,
                    "5000 CURVE messages delivered", hub=hub)
        stats = hub.stats()
        assert stats["hub"]["received"] == 5000, stats["hub"]
        assert stats["hub"]["auth_denied"] == 0, stats["hub"]
    finally:
        hub.stop()
    wd.cleanup()


def test_bench_pub_with_a_wrong_server_key_is_refused():
    wd = fh.Workdir()
    _, hub_secret = keygen(wd, "hub")
    pub_public, pub_secret = keygen(wd, "pub")
    hub, endpoint = curve_hub(wd, hub_secret, pub_public)
    try:
        # The publisher's own public key as the server key: the hub cannot
        # open the handshake, and bench_pub never sees a subscription.
        status, out, err = bench_pub(["--connect", endpoint, "-n", "10", "--timeout", "5",
                                      "--curve-server-key", pub_public,
                                      "--curve-keys", pub_secret])
        assert status == 1, (status, out, err)
        assert "0 of 1 subscriptions within 5 s" in err, err
        fh.wait_for(lambda: hub.stats()["hub"]["auth_denied"] >= 1,
                    "the refused handshake counted", hub=hub)
        assert hub.stats()["hub"]["received"] == 0
    finally:
        hub.stop()
    wd.cleanup()


def test_bench_pub_curve_usage_errors():
    wd = fh.Workdir()
    hub_public, _ = keygen(wd, "hub")
    _, pub_secret = keygen(wd, "pub")
    pub_public_file = pub_secret[:-len("_secret")]
    base = ["--connect", "tcp://127.0.0.1:1", "-n", "1"]
    cases = [
        (["--curve-server-key", hub_public], "--curve-server-key and --curve-keys go together"),
        (["--curve-keys", pub_secret], "--curve-server-key and --curve-keys go together"),
        (["--curve-server-key", "tooshort", "--curve-keys", pub_secret],
         "--curve-server-key tooshort: not 40 characters of Z85"),
        (["--curve-server-key", hub_public, "--curve-keys", pub_public_file],
         "--curve-keys %s: no public-key and secret-key in it" % pub_public_file),
        (["--curve-server-key", hub_public, "--curve-keys", wd.file("missing")],
         "%s: No such file or directory" % wd.file("missing")),
    ]
    for args, message in cases:
        status, out, err = bench_pub(base + args)
        assert status == 2, (args, status, out, err)
        assert message in err, (args, err)
        assert "ready" not in out, (args, out)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_bench_pub_is_a_curve_client_the_hub_lets_in,
             test_bench_pub_with_a_wrong_server_key_is_refused,
             test_bench_pub_curve_usage_errors])
