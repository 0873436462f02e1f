#!/usr/bin/python3
"""The fedmsg envelope and its X.509 signatures (docs/fedora.md).

`fanhub pub --fedmsg` and `fanhub emit --fedmsg` wrap bodies as fedmsg
did; a hub with bus.validate_signatures checks them against a CA, a CRL
and a routing policy. The PKI is made here with the `openssl` command (a
CA, a second CA, signers, one revoked); an independent signer and checker
is written here with Python's `cryptography` (python3-cryptography), so
the hub's signing and checking agree with each other and with it.
"""
import base64
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
except ImportError:  # python3-cryptography, installed by scripts/deps
    x509 = None

TOPIC = "org.fedoraproject.prod.buildsys.build.state.change"
ID_RE = re.compile(r"^\d{4}-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
REASONS = ("missing_fields", "bad_certificate", "bad_signature", "topic_mismatch",
           "unknown_ca", "revoked", "not_allowed")


def need_tools():
    fh.require_tool(shutil.which("openssl"), "openssl", "openssl")
    fh.require_tool(x509, "python3 cryptography", "python3-cryptography")


def dumps(obj):
    """fedmsg.encoding.dumps: sorted keys, compact, ASCII-only."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def openssl(wd, *args):
    proc = subprocess.run(["openssl"] + list(args), cwd=wd.path, capture_output=True)
    assert proc.returncode == 0, "openssl %s: %s" % (" ".join(args), proc.stderr.decode())


CA_CNF = """[ca]
default_ca = local
[local]
database = %(dir)s/%(name)s.index
crlnumber = %(dir)s/%(name)s.crlnumber
default_md = sha256
default_crl_days = 30
[req]
distinguished_name = dn
[dn]
[v3_ca]
basicConstraints = critical,CA:true
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
"""


def make_ca(wd, name):
    cnf = wd.write(name + ".cnf", CA_CNF % {"dir": wd.path, "name": name})
    wd.write(name + ".index", "")
    wd.write(name + ".crlnumber", "01\n")
    openssl(wd, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
            "-out", name + ".crt", "-days", "30", "-subj", "/CN=%s" % name, "-config", cnf,
            "-extensions", "v3_ca")


def make_signer(wd, ca, name):
    openssl(wd, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
            "-out", name + ".csr", "-subj", "/O=Fedora Project/CN=%s" % name)
    openssl(wd, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "30")


def make_crl(wd, ca, revoke=()):
    cnf = wd.file(ca + ".cnf")
    for name in revoke:
        openssl(wd, "ca", "-config", cnf, "-revoke", name + ".crt", "-keyfile", ca + ".key",
                "-cert", ca + ".crt")
    openssl(wd, "ca", "-config", cnf, "-gencrl", "-keyfile", ca + ".key", "-cert", ca + ".crt",
            "-out", ca + ".crl")


def make_pki(wd):
    """ca: signers alice (allowed), mallory (allowed, then revoked), bob
    (not allowed for TOPIC); other: eve, from another CA."""
    make_ca(wd, "ca")
    make_ca(wd, "other")
    for name in ("alice", "bob", "mallory"):
        make_signer(wd, "ca", name)
    make_signer(wd, "other", "eve")
    make_crl(wd, "ca", revoke=["mallory"])


def py_sign(wd, name, message):
    """An independent fedmsg signer (fedmsg.crypto.x509_ng.sign)."""
    message = dict(message, crypto="x509")
    with open(wd.file(name + ".key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    with open(wd.file(name + ".crt"), "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    signature = key.sign(dumps(message).encode(), padding.PKCS1v15(), hashes.SHA1())

    def lines(data):
        text = base64.b64encode(data).decode()
        return "\n".join(text[i:i + 76] for i in range(0, len(text), 76)) + "\n"

    message["signature"] = lines(signature)
    message["certificate"] = lines(cert.public_bytes(serialization.Encoding.PEM))
    return message


def py_verify(message):
    """An independent check of the signature (fedmsg.crypto.x509_ng.validate,
    the signature step); returns the signer's common name."""
    cert = x509.load_pem_x509_certificate(base64.b64decode(message["certificate"]))
    stripped = {k: v for k, v in message.items() if k not in ("signature", "certificate")}
    cert.public_key().verify(base64.b64decode(message["signature"]),
                             dumps(stripped).encode(), padding.PKCS1v15(), hashes.SHA1())
    return cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value


def envelope(i=1, **fields):
    base = {"topic": TOPIC, "msg": {"build_id": i, "owner": "me"}, "i": i,
            "msg_id": "2026-00000000-0000-4000-8000-%012d" % i, "timestamp": 1700000000 + i,
            "username": "koji"}
    base.update(fields)
    return base


def pub_bound(args, count):
    """fanhub pub --bind (it waits for our subscription) --fedmsg ARGS."""
    port = fh.free_port()
    endpoint = "tcp://127.0.0.1:%d" % port
    proc = subprocess.Popen([fh.BIN, "pub", "--bind", endpoint, "--fedmsg", "-q", "-n",
                             str(count)] + args, stderr=subprocess.PIPE)
    sock = zmq.Context.instance().socket(zmq.SUB)
    sock.setsockopt(zmq.SUBSCRIBE, b"")
    sock.connect(endpoint)
    got = []
    try:
        end = time.monotonic() + fh.DEADLINE
        while len(got) < count:
            assert time.monotonic() < end, "fanhub pub sent %d of %d" % (len(got), count)
            if sock.poll(100):
                got.append(sock.recv_multipart())
    finally:
        sock.close(0)
        _, err = proc.communicate(timeout=fh.DEADLINE)
        fh.check_sanitizers(err.decode(errors="replace"), "fanhub pub")
    assert proc.returncode == 0, err
    return got


def test_pub_envelope():
    """The envelope of pub --fedmsg, parsed back field by field, is the
    bytes fedmsg's encoder writes for the same fields."""
    before = int(time.time())
    body = '{"b":[1,2.5,"\u00e9\u20ac\U0001f600"],"a":null}'
    got = pub_bound(["-t", TOPIC, "--body", body, "--username", "koji"], 3)
    after = int(time.time())
    for n, (topic, data) in enumerate(got, 1):
        assert topic == TOPIC.encode()
        msg = json.loads(data)
        assert sorted(msg) == ["i", "msg", "msg_id", "timestamp", "topic", "username"], msg
        assert msg["topic"] == TOPIC and msg["username"] == "koji" and msg["i"] == n
        assert msg["msg"] == json.loads(body)
        assert ID_RE.match(msg["msg_id"]) and msg["msg_id"][:4] == time.strftime("%Y", time.gmtime())
        assert isinstance(msg["timestamp"], int) and before <= msg["timestamp"] <= after
        assert data == dumps(msg).encode(), data
    assert len({json.loads(d)["msg_id"] for _, d in got}) == 3
    # A body that is not JSON goes as fedmsg-logger sent lines.
    (_, data), = pub_bound(["-t", TOPIC, "--body", "hello \u00e9"], 1)
    assert json.loads(data)["msg"] == {"log": "hello \u00e9"}


def test_pub_signed_independent():
    """pub --fedmsg --sign-key/--sign-cert: the signature verifies with an
    independent implementation, over fedmsg's canonical bytes."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    got = pub_bound(["-t", TOPIC, "--body", '{"x":1.5}', "--sign-key", wd.file("alice.key"),
                     "--sign-cert", wd.file("alice.crt")], 2)
    for topic, data in got:
        msg = json.loads(data)
        assert msg["crypto"] == "x509"
        for field in ("signature", "certificate"):
            lines = msg[field].split("\n")
            assert lines[-1] == "" and all(len(l) == 76 for l in lines[:-2]), msg[field]
        assert py_verify(msg) == "alice"
        assert data == dumps(msg).encode()
    # A key that is not the certificate's is refused before anything is sent.
    status, _, err = fh.run(["pub", "--fedmsg", "--sign-key", wd.file("bob.key"),
                             "--sign-cert", wd.file("alice.crt"), "-n", "1"])
    assert status == 2 and "not the key's" in err, err
    status, _, err = fh.run(["pub", "--sign-key", wd.file("bob.key"), "-n", "1"])
    assert status == 2 and "go with --fedmsg" in err, err
    wd.cleanup()


def hub_config(wd, pub_endpoint, extra=""):
    return """bus:
  connect: [%s]
  validate_signatures:
    ca: %s
    crl: %s
    routing_policy:
      %s: [alice, mallory]
%sconsumers:
  - name: out
    plugin: log
    options: {path: %s, flush_ms: 0}
""" % (pub_endpoint, wd.file("ca.crt"), wd.file("ca.crl"), TOPIC, extra,
       json.dumps(wd.file("out.jsonl")))


def test_hub_validates():
    """Each failure is counted under its reason and not delivered; messages
    signed by the hub's own signer and by the independent one pass."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(wd, pub.endpoint))
    pub.wait_subscribed(hub=hub)
    good = py_sign(wd, "alice", envelope(1))
    assert py_verify(good) == "alice"
    tampered = dict(good, msg={"build_id": 666, "owner": "me"})
    cases = [
        (TOPIC, dumps(good), None),
        (TOPIC, dumps(tampered), "bad_signature"),
        (TOPIC + ".x", dumps(good), "topic_mismatch"),
        (TOPIC, dumps(py_sign(wd, "eve", envelope(2))), "unknown_ca"),
        (TOPIC, dumps(py_sign(wd, "mallory", envelope(3))), "revoked"),
        (TOPIC, dumps(py_sign(wd, "bob", envelope(4))), "not_allowed"),
        (TOPIC, dumps(envelope(5)), "missing_fields"),
        (TOPIC, "not json", "missing_fields"),
        (TOPIC, dumps(dict(good, certificate="bm90IGEgY2VydA==\n")), "bad_certificate"),
        # A topic the policy does not list: allowed (routing_nitpicky off).
        ("org.other.topic", dumps(py_sign(wd, "bob", envelope(6, topic="org.other.topic"))), None),
        (TOPIC, dumps(py_sign(wd, "alice", envelope(7))), None),
    ]
    for topic, body, _ in cases:
        pub.send(topic, body)
    delivered = [c for c in cases if c[2] is None]
    fh.wait_for(lambda: hub.stats()["hub"]["signatures"]["checked"] == len(cases),
                "every message checked", hub=hub)
    fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == len(delivered), "deliveries",
                hub=hub)
    stats = hub.stats()["hub"]
    for reason in REASONS:
        want = sum(1 for c in cases if c[2] == reason)
        assert stats["signatures"][reason] == want, (reason, stats)
    lines = fh.read_jsonl(wd.file("out.jsonl"))
    assert [json.loads(l["body"])["i"] for l in lines] == [1, 6, 7]
    # Counted in Prometheus too, and logged with the msg_id and the signer.
    status, prom, _ = fh.run(["stats", "-e", hub.control, "-f", "prometheus"])
    assert status == 0 and "fanhub_signature_revoked_total 1\n" in prom, prom
    hub.wait_log("failed its signature check (revoked)")
    assert "msg_id 2026-00000000-0000-4000-8000-000000000003, signer mallory" in hub.log()
    # The hub's own signer (fanhub pub --sign-key) passes its own checker.
    before = fh.count_lines(wd.file("out.jsonl"))
    pub.close()
    status, _, err = fh.run(["pub", "--bind", pub.endpoint, "--fedmsg", "-q", "-t", TOPIC,
                             "--body", '{"from":"fanhub"}', "--sign-key", wd.file("alice.key"),
                             "--sign-cert", wd.file("alice.crt"), "--timeout", "60"])
    assert status == 0, err
    fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == before + 1,
                "the hub-signed message delivered", hub=hub)
    body = json.loads(fh.read_jsonl(wd.file("out.jsonl"))[-1]["body"])
    assert body["msg"] == {"from": "fanhub"} and py_verify(body) == "alice"
    # A reload reads the CRL again: alice revoked, her next message refused.
    make_crl(wd, "ca", revoke=["alice"])
    status, _, err = fh.run(["reload", "-e", hub.control])
    assert status == 0, err
    checked = hub.stats()["hub"]["signatures"]["checked"]
    status, _, err = fh.run(["pub", "--bind", pub.endpoint, "--fedmsg", "-q", "-t", TOPIC,
                             "--body", "{}", "--sign-key", wd.file("alice.key"),
                             "--sign-cert", wd.file("alice.crt"), "--timeout", "60"])
    assert status == 0, err
    fh.wait_for(lambda: hub.stats()["hub"]["signatures"]["checked"] == checked + 1,
                "the message after the reload checked", hub=hub)
    assert hub.stats()["hub"]["signatures"]["revoked"] == 2
    # A CRL that no longer loads: the reload is refused, the old one stays.
    wd.write("ca.crl", "garbage")
    status, _, err = fh.run(["reload", "-e", hub.control])
    assert status != 0 and "ca.crl" in err, err
    assert hub.stop() == 0, hub.log()
    assert "hub: signatures checked 13, failed 9 (missing_fields 2, bad_certificate 1, " \
        "bad_signature 1, topic_mismatch 1, unknown_ca 1, revoked 2, not_allowed 1)" \
        in hub.log(), hub.log()
    wd.cleanup()


def test_escapes_read_as_written():
    """The hub reads a signed body's certificate and signature as written
    (no parse of those two strings, hub/security/sig_skim.c) where it can,
    and parses the whole body where it cannot: either way its verdict is
    the one of a JSON parser (Python's here), whatever the escapes."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(wd, pub.endpoint))
    pub.wait_subscribed(hub=hub)
    good = py_sign(wd, "alice", envelope(1))
    text = dumps(good)
    cert = json.dumps(good["certificate"])
    cases = [
        ("plain", text, None),
        ("spaces, \\/ in the signature",
         json.dumps(good, indent=1).replace("/", "\\/"), None),
        ("\\u000a in the certificate", text.replace(cert, cert.replace("\\n", "\\u000a")), None),
        ("an escaped key", text.replace('"certificate"', '"certific\\u0061te"'), None),
        ("the certificate twice, the last counts",
         text.replace('"certificate"', '"certificate":"bm90IGEgY2VydA==\\n","certificate"'), None),
        ("a bad escape in the certificate", text.replace(cert, cert[:20] + '\\x' + cert[20:]),
         "missing_fields"),
        ("a raw control character", text.replace(cert, cert[:20] + "\t" + cert[20:]),
         "missing_fields"),
        ("text after the object", text + " x", "missing_fields"),
        ("the same certificate, another signature",
         dumps(dict(good, msg={"build_id": 666, "owner": "me"})), "bad_signature"),
    ]
    for name, body, want in cases:
        try:
            parsed = json.loads(body)
            python = "ok" if py_verify(parsed) == "alice" else "not alice"
        except ValueError:
            python = "missing_fields"
        except Exception:  # cryptography's InvalidSignature
            python = "bad_signature"
        assert python == (want or "ok"), (name, python)
        pub.send(TOPIC, body)
    fh.wait_for(lambda: hub.stats()["hub"]["signatures"]["checked"] == len(cases),
                "every message checked", hub=hub)
    delivered = [c for c in cases if c[2] is None]
    fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == len(delivered), "deliveries",
                hub=hub)
    stats = hub.stats()["hub"]["signatures"]
    for reason in REASONS:
        want = sum(1 for c in cases if c[2] == reason)
        assert stats[reason] == want, (reason, stats)
    assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_nul_strings():
    """\\u0000 in a JSON string is JSON (fedmsg and Python's json read it):
    pub --fedmsg wraps such a body as JSON, byte-exact as fedmsg encodes
    it; a message signed over one passes the hub's check (and a changed
    one fails it: the NUL is in the canonical bytes), and the hub's own
    signature over one verifies independently."""
    body = '{"a":"x\\u0000y","b":["\\u0000"]}'
    (_, data), = pub_bound(["-t", TOPIC, "--body", body], 1)
    msg = json.loads(data)
    assert msg["msg"] == {"a": "x\x00y", "b": ["\x00"]}, msg
    assert data == dumps(msg).encode() and b'"x\\u0000y"' in data, data
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(wd, pub.endpoint))
    try:
        pub.wait_subscribed(hub=hub)
        good = py_sign(wd, "alice", envelope(1, msg={"log": "a\x00b"}))
        changed = dict(good, msg={"log": "a\x00c"}, msg_id="nul\x00id")
        pub.send(TOPIC, dumps(good))
        pub.send(TOPIC, dumps(changed))
        fh.wait_for(lambda: hub.stats()["hub"]["signatures"]["checked"] == 2, "both checked",
                    hub=hub)
        hub.wait_log("failed its signature check (bad_signature): topic %s, msg_id nul?id, "
                     "signer alice" % TOPIC)
        pub.close()
        status, _, err = fh.run(["pub", "--bind", pub.endpoint, "--fedmsg", "-q", "-t", TOPIC,
                                 "--body", body, "--sign-key", wd.file("alice.key"),
                                 "--sign-cert", wd.file("alice.crt"), "--timeout", "60"])
        assert status == 0, err
        fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == 2, "deliveries", hub=hub)
        stats = hub.stats()["hub"]["signatures"]
        assert stats["checked"] == 3 and stats["bad_signature"] == 1, stats
        first, second = [l["body"].encode() for l in fh.read_jsonl(wd.file("out.jsonl"))]
        assert first == dumps(good).encode(), first
        signed = json.loads(second)
        assert second == dumps(signed).encode() and py_verify(signed) == "alice", second
        assert signed["msg"] == {"a": "x\x00y", "b": ["\x00"]}, signed
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_config_errors():
    """fanhub check loads the CA, CRL and policy: each mistake is one line
    with FILE:LINE:COL and the key."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    wd.write("junk.pem", "junk")
    ca, crl = wd.file("ca.crt"), wd.file("ca.crl")
    # (value, the text at the position named, the error after the key)
    cases = [
        ("{ca: %s, crl: %s}" % (ca, crl), None, None),
        ("{crl: %s}" % crl, "{", "ca: missing"),
        ("{ca: %s}" % wd.file("none.pem"), wd.file("none.pem"), "ca: " + wd.file("none.pem")),
        ("{ca: %s}" % wd.file("junk.pem"), wd.file("junk.pem"), "ca: " + wd.file("junk.pem")),
        ("{ca: %s, crl: %s}" % (ca, wd.file("junk.pem")), wd.file("junk.pem"), "crl: "),
        ("{ca: %s, cr: x}" % ca, "x}", "cr: unknown key"),
        ("{ca: %s, on_failure: keep}" % ca, "keep", "on_failure: expected drop or deliver"),
        ("{ca: %s, routing_nitpicky: 3}" % ca, "3}", "routing_nitpicky: expected true or false"),
        ("{ca: %s, routing_policy: [a]}" % ca, "[a]", "routing_policy: expected a map"),
        ("{ca: %s, routing_policy: {t: a}}" % ca, "a}", "routing_policy.t: expected a list"),
        ("{ca: %s, routing_policy: {t: [[a]]}}" % ca, "[a]]", "routing_policy.t: expected names"),
        ("[]", "[]", None),
    ]
    lead = "  validate_signatures: "
    for value, at, want in cases:
        path = wd.write("c.yaml", "bus:\n  connect: [tcp://127.0.0.1:9]\n  validate_signatures: %s\n"
                        "consumers:\n  - {name: c, plugin: log}\n" % value)
        status, out, err = fh.run(["check", "-c", path])
        if at is None:
            assert status == 0, err
            continue
        where = "%s:3:%d: bus.validate_signatures" % (path, len(lead) + value.index(at) + 1)
        want = where + (": expected a map" if want is None else "." + want)
        assert status == 2 and want in err, (value, want, err)
    wd.cleanup()


def test_deliver_on_failure():
    """on_failure: deliver: a failing message is counted and delivered."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(wd, pub.endpoint).replace(
        "    routing_policy:", "    on_failure: deliver\n    routing_policy:"))
    try:
        pub.wait_subscribed(hub=hub)
        pub.send(TOPIC, dumps(py_sign(wd, "bob", envelope(4))))
        pub.send(TOPIC, dumps(envelope(5)))
        fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == 2, "both delivered",
                    hub=hub)
        stats = hub.stats()["hub"]["signatures"]
        assert stats["not_allowed"] == 1 and stats["missing_fields"] == 1, stats
        hub.wait_log("delivered a bus message that failed its signature check (not_allowed)")
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_wrap_refuses():
    """A body that is neither JSON nor UTF-8 text cannot be wrapped."""
    status, _, err = fh.run(["pub", "--fedmsg", "--connect", "tcp://127.0.0.1:%d" % fh.free_port(),
                             "--wait-subscribers", "0", "--stdin"], stdin=b"\xff\xfe\n")
    assert status == 1 and "neither JSON nor UTF-8 text" in err, err
    status, _, err = fh.run(["emit", "-e", "ipc:///nonexistent/x.sock", "--fedmsg", TOPIC, "-"],
                            stdin=b"\xff")
    assert status == 1 and "neither JSON nor UTF-8 text" in err, err
    status, _, err = fh.run(["pub", "--fedmsg", "--sign-key", "/nonexistent.key",
                             "--sign-cert", "/nonexistent.crt"])
    assert status == 2 and "/nonexistent.key" in err, err


def test_emit_envelope():
    """emit --fedmsg: the consumer gets the envelope, signed when asked."""
    need_tools()
    wd = fh.Workdir()
    make_pki(wd)
    hub = fh.Hub(wd, """bus:
  bind: [tcp://127.0.0.1:%d]
consumers:
  - name: out
    plugin: log
    options: {path: %s, flush_ms: 0}
""" % (fh.free_port(), json.dumps(wd.file("out.jsonl"))))
    try:
        hub.wait_ready()
        status, out, err = fh.run(["emit", "-e", hub.control, "--wait", "--fedmsg",
                                   "--username", "me", TOPIC, '{"x":1}'])
        assert status == 0, out + err
        status, out, err = fh.run(["emit", "-e", hub.control, "--wait", "--fedmsg",
                                   "--sign-key", wd.file("bob.key"), "--sign-cert",
                                   wd.file("bob.crt"), TOPIC, "-"], stdin=b"a line")
        assert status == 0, out + err
        first, second = [json.loads(l["body"]) for l in fh.read_jsonl(wd.file("out.jsonl"))]
        assert first["msg"] == {"x": 1} and first["i"] == 1 and first["username"] == "me"
        assert first["topic"] == TOPIC and ID_RE.match(first["msg_id"])
        assert second["msg"] == {"log": "a line"} and py_verify(second) == "bob"
        status, out, err = fh.run(["emit", "-e", hub.control, "--sign-key", "x", TOPIC])
        assert status == 2 and "go with --fedmsg" in err, err
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
    wd.cleanup()


def test_messages_named_by_msg_id():
    """A failure's log line, the dead letter (list, list --json, show) and a
    crash line name the message by its msg_id."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, """bus:
  connect: [%s]
state_dir: %s
consumers:
  - name: picky
    plugin: %s/flaky.so
    topics: [org.picky]
    retry: {max_attempts: 1}
    options: {retries: 0, final: fail}
  - name: boom
    plugin: %s/crash.so
    topics: [org.boom]
    options: {how: segv}
""" % (pub.endpoint, wd.file("state"), fh.TEST_PLUGINS, fh.TEST_PLUGINS))
    try:
        pub.wait_subscribed(hub=hub)
        named = envelope(1, topic="org.picky")
        pub.send("org.picky", dumps(named))
        pub.send("org.picky", '{"no":"id"}')
        pub.send("org.picky", b"\xff\x00\xfe bytes")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "picky")["dead_lettered"] == 3,
                    "three dead letters", hub=hub)
        hub.wait_log("message 1 msg_id %s (org.picky) failed" % named["msg_id"])
        status, out, err = fh.run(["dead-letter", "list", "-c", hub.config, "picky"])
        assert status == 0, err
        header, first, second, third = out.splitlines()
        assert header.split()[:4] == ["ID", "SEQ", "TOPIC", "MSG_ID"], header
        assert first.split()[3] == named["msg_id"] and second.split()[3] == "-", out
        status, out, err = fh.run(["dead-letter", "list", "--json", "-c", hub.config, "picky"])
        entries = [json.loads(line) for line in out.splitlines()]
        assert [e["msg_id"] for e in entries] == [named["msg_id"], None, None], entries
        # Bytes that are not UTF-8 come as base64; times as RFC 3339 in UTC.
        status, out, err = fh.run(["dead-letter", "show", "--json", "-c", hub.config, "picky",
                                   entries[2]["id"]])
        shown = json.loads(out)
        assert base64.b64decode(shown["body_base64"], validate=True) == b"\xff\x00\xfe bytes"
        for key in ("received", "first_attempt", "last_attempt"):
            at = datetime.datetime.strptime(shown[key][:19], "%Y-%m-%dT%H:%M:%S").replace(
                tzinfo=datetime.timezone.utc)
            ns = int(at.timestamp()) * 10 ** 9 + int(shown[key][20:29])
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$", shown[key]), shown
            assert ns == shown[key + "_ns"], shown
        status, out, err = fh.run(["dead-letter", "show", "-c", hub.config, "picky",
                                   entries[0]["id"]])
        assert "msg_id:         %s\n" % named["msg_id"] in out, out
        # A plugin that crashes on a fedmsg message: the line names it.
        pub.send("org.boom", dumps(envelope(9, topic="org.boom")))
        assert hub.wait(deadline=fh.DEADLINE) != 0
        assert "consumer 'boom', plugin %s/crash.so, message 4 (topic org.boom, msg_id %s)" % (
            fh.TEST_PLUGINS, envelope(9)["msg_id"]) in hub.log(), hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_tail_terse_and_exclude():
    """tail --terse: time, topic and msg_id a line; --exclude leaves out."""
    pub = fh.Publisher()
    proc = subprocess.Popen([fh.BIN, "tail", "--terse", "--exclude", "*.skip", "-n", "2",
                             "--connect", pub.endpoint], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pub.wait_subscribed()
        pub.send("org.a.skip", dumps(envelope(1)))
        pub.send("org.a.keep", dumps(envelope(2)))
        pub.send("org.a.keep", "plain text")
        out, err = proc.communicate(timeout=fh.DEADLINE)
    finally:
        proc.kill()
        pub.close()
    assert proc.returncode == 0, err
    lines = [l.split(" ") for l in out.decode().splitlines()]
    assert [l[1:] for l in lines] == [["org.a.keep", envelope(2)["msg_id"]],
                                       ["org.a.keep", "-"]], lines
    assert all(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", l[0]) for l in lines)


def test_tail_pretty_on_a_terminal():
    """On a terminal tail shows the topic, then the JSON body indented."""
    import pty
    master, slave = pty.openpty()
    pub = fh.Publisher()
    proc = subprocess.Popen([fh.BIN, "tail", "-n", "1", "--connect", pub.endpoint], stdout=slave,
                            stderr=subprocess.PIPE)
    os.close(slave)
    out = b""
    try:
        pub.wait_subscribed()
        pub.send("org.a.b", '{"b":[1],"a":"x"}')
        _, err = proc.communicate(timeout=fh.DEADLINE)
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the terminal's other end is closed
                break
            if not chunk:
                break
            out += chunk
    finally:
        proc.kill()
        pub.close()
        os.close(master)
    assert proc.returncode == 0, err
    text = out.decode().replace("\r\n", "\n")
    assert text == 'org.a.b\n{\n  "a": "x",\n  "b": [\n    1\n  ]\n}\n\n', repr(text)


if __name__ == "__main__":
    fh.main([test_pub_envelope, test_pub_signed_independent, test_hub_validates,
             test_escapes_read_as_written, test_config_errors,
             test_deliver_on_failure, test_nul_strings, test_wrap_refuses, test_emit_envelope,
             test_messages_named_by_msg_id, test_tail_terse_and_exclude,
             test_tail_pretty_on_a_terminal])
