#!/usr/bin/python3
"""bus.validate_signatures at a bounded cost, and CRLs that fail loudly
(docs/fedora.md, issue 39 items 1 and 2).

- A flood of messages, each with a different 1 MiB `certificate`, is
  refused as too_large before anything is decoded, every one counted, and
  the hub's memory stays flat; certificates under the limit that fail are
  remembered by hash only.
- A CRL that is not the CA's, or outside its dates, is refused by `fanhub
  check`, at start and at reload, with the reason.
- A CRL that expires while the hub runs: a warning once, the gauge
  fanhub_signature_crl_expires_seconds below 0, and on_crl_expired
  deciding (reject: counted as crl_expired; accept: delivered).
- The chain's other failures each have their reason: crl_issuer, bad_chain.

The PKI is test_fedmsg.py's (the `openssl` command); the messages are
signed with Python's cryptography, as fedmsg signs them.
"""
import base64
import datetime
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import test_fedmsg as tf

TOPIC = tf.TOPIC


def config(wd, pub_endpoint, name="out", ca="ca.crt", crl="ca.crl", extra=""):
    return """bus:
  connect: [%s]
  validate_signatures:
    ca: %s
    crl: %s
%sconsumers:
  - name: out
    plugin: log
    options: {path: %s, flush_ms: 0}
""" % (pub_endpoint, wd.file(ca), wd.file(crl), extra, json.dumps(wd.file(name + ".jsonl")))


def signatures(hub):
    return hub.stats()["hub"]["signatures"]


def rss_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s for %d" % (field, pid))


def utc(seconds):
    """An openssl ca date (YYYYMMDDHHMMSSZ) `seconds` from now."""
    at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds)
    return at.strftime("%Y%m%d%H%M%SZ")


def dated_crl(wd, ca, out, last, next_):
    """ca's CRL with these lastUpdate and nextUpdate (openssl ca dates)."""
    tf.openssl(wd, "ca", "-config", wd.file(ca + ".cnf"), "-gencrl", "-keyfile", ca + ".key",
               "-cert", ca + ".crt", "-crl_lastupdate", last, "-crl_nextupdate", next_,
               "-out", out)
    return wd.file(out)


# Under a sanitizer freed memory stays quarantined, so the memory bound is
# the release build's; there the flood is smaller (its counts still hold).
SANITIZED = bool(os.environ.get("FANHUB_SANITIZE"))
FLOOD = 400 if SANITIZED else 3000


def send_paced(hub, pub, bodies, in_flight=16):
    """Sends bodies, never more than in_flight ahead of the hub's checks
    (so that ZeroMQ's queues, which hold whatever is sent ahead, stay
    small and the hub's own memory is what is measured)."""
    base = signatures(hub)["checked"]
    for n, body in enumerate(bodies, 1):
        pub.send(TOPIC, body)
        if n % in_flight == 0 or n == len(bodies):
            fh.wait_for(lambda: signatures(hub)["checked"] == base + n, "%d checked" % n,
                        hub=hub)


def test_flood_of_large_certificates():
    """3,000 messages (400 under a sanitizer), each with a different 1 MiB
    certificate: every one too_large, the hub's peak RSS under 64 MiB above where it started.
    Then 1,000 distinct garbage certificates under the limit: each
    bad_certificate, again the same, memory flat; a good signer still
    passes."""
    tf.need_tools()
    wd = fh.Workdir()
    tf.make_pki(wd)
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub.endpoint))
    try:
        pub.wait_subscribed(hub=hub)
        good = tf.dumps(tf.py_sign(wd, "alice", tf.envelope(1)))
        send_paced(hub, pub, [good])
        start = rss_kib(hub.proc.pid, "VmRSS")
        garbage = base64.b64encode(os.urandom(3 << 18)).decode()  # 1 MiB of text
        head = tf.envelope(2, signature="c2ln\n")
        whole = tf.dumps(dict(head, certificate=garbage)).encode()
        at = whole.index(garbage[:64].encode())

        def large(i):  # a different certificate each
            return whole[:at] + b"%08d" % i + whole[at + 8:]

        for chunk in range(0, FLOOD, 200):
            send_paced(hub, pub, [large(i) for i in range(chunk, chunk + 200)])
        stats = signatures(hub)
        assert stats["checked"] == FLOOD + 1 and stats["too_large"] == FLOOD, stats
        peak = rss_kib(hub.proc.pid, "VmHWM")
        print("hub RSS %d KiB after one message, peak %d KiB after the flood" % (start, peak))
        assert SANITIZED or peak - start < 64 * 1024, \
            "RSS from %d KiB to a peak of %d KiB" % (start, peak)
        small = [tf.dumps(dict(head, certificate="%08d" % i + garbage[8:12000]))
                 for i in range(1000)]
        send_paced(hub, pub, small + small)
        send_paced(hub, pub, [good])
        stats = signatures(hub)
        assert stats["bad_certificate"] == 2000 and stats["checked"] == FLOOD + 2002, stats
        fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == 2, "the good ones",
                    hub=hub)
        hub.wait_log("failed its signature check (too_large)")
        assert SANITIZED or rss_kib(hub.proc.pid, "VmHWM") - start < 64 * 1024
        assert hub.stop() == 0, hub.log()
        assert "failed %d (bad_certificate 2000, too_large %d)" % (FLOOD + 2000, FLOOD) \
            in hub.log(), hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def crl_cases(wd):
    """(CRL file, the reason in the error) of CRLs that must be refused."""
    tf.make_crl(wd, "other")
    return [
        (dated_crl(wd, "ca", "expired.crl", "20200101000000Z", "20200201000000Z"),
         "expired at 2020-02-01T00:00:00Z (its nextUpdate; crl_expired)"),
        (dated_crl(wd, "ca", "future.crl", "20990101000000Z", "20990201000000Z"),
         "not valid before 2099-01-01T00:00:00Z (its lastUpdate)"),
        (wd.file("other.crl"), "not issued by the configured CA (crl_issuer): its issuer is "
         "/CN=other"),
    ]


def test_crl_refused_at_check_start_and_reload():
    """An expired, a not yet valid and a foreign CRL: check, a start and a
    reload each refuse it with its reason, naming the crl key."""
    tf.need_tools()
    wd = fh.Workdir()
    tf.make_pki(wd)
    cases = crl_cases(wd)
    for crl, why in cases:
        path = wd.write("c.yaml", config(wd, "tcp://127.0.0.1:9", crl=os.path.basename(crl)))
        want = "bus.validate_signatures.crl: %s: %s" % (crl, why)
        status, _, err = fh.run(["check", "-c", path])
        assert status == 2 and want in err, (want, err)
        status, _, err = fh.run(["run", "-c", path])
        assert status != 0 and want in err, (want, err)
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub.endpoint))
    try:
        pub.wait_subscribed(hub=hub)
        assert signatures(hub)["crl_expires_seconds"] > 0
        with open(wd.file("ca.crl")) as f:
            good = f.read()
        for crl, why in cases:
            with open(crl) as f:
                wd.write("ca.crl", f.read())
            status, _, err = fh.run(["reload", "-e", hub.control])
            assert status != 0 and why in err, (why, err)
        wd.write("ca.crl", good)
        pub.send(TOPIC, tf.dumps(tf.py_sign(wd, "alice", tf.envelope(1))))
        fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == 1, "delivered", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def start_pair(wd, seconds):
    """Two hubs (on_crl_expired reject and accept) on a CRL whose
    nextUpdate is `seconds` ahead; None when a start found it expired
    already (a slow machine: the caller tries a longer one)."""
    dated_crl(wd, "ca", "short.crl", utc(-60), utc(seconds))
    pubs, hubs = [], []
    for policy in ("reject", "accept"):
        pub = fh.Publisher()
        hub = fh.Hub(wd, config(wd, pub.endpoint, name=policy, crl="short.crl",
                                extra="    on_crl_expired: %s\n" % policy), name=policy)
        pubs.append(pub)
        hubs.append(hub)
    try:
        for pub, hub in zip(pubs, hubs):
            pub.wait_subscribed(hub=hub)
        return pubs, hubs
    except AssertionError:
        if not any("crl_expired" in h.log() for h in hubs):
            raise
        for pub, hub in zip(pubs, hubs):
            hub.kill()
            pub.close()
        return None


def test_crl_expires_while_running():
    """A CRL's nextUpdate passes while the hubs run: each warns once, its
    gauge goes below 0 (STATS and Prometheus); a signed message is then
    refused as crl_expired (reject) or delivered (accept). A reload with
    a current CRL ends it."""
    tf.need_tools()
    wd = fh.Workdir()
    tf.make_pki(wd)
    pair, seconds = None, 5
    while pair is None:
        assert seconds < 400, "every short CRL had expired before the hubs were up"
        pair = start_pair(wd, seconds)
        seconds *= 3
    (pub_r, pub_a), (reject, accept) = pair
    try:
        for hub in (reject, accept):
            hub.wait_log("the CRL expired at")
            fh.wait_for(lambda: signatures(hub)["crl_expires_seconds"] <= 0, "the gauge <= 0",
                        hub=hub)
        assert "every signed message is refused as crl_expired" in reject.log()
        assert "signed messages still pass (on_crl_expired: accept)" in accept.log()
        alice = tf.dumps(tf.py_sign(wd, "alice", tf.envelope(1)))
        pub_r.send(TOPIC, alice)
        pub_a.send(TOPIC, alice)
        fh.wait_for(lambda: signatures(reject)["crl_expired"] == 1, "crl_expired counted",
                    hub=reject)
        fh.wait_for(lambda: fh.count_lines(wd.file("accept.jsonl")) == 1, "delivered",
                    hub=accept)
        reject.wait_log("failed its signature check (crl_expired)")
        assert signatures(accept)["crl_expired"] == 0
        assert fh.count_lines(wd.file("reject.jsonl")) == 0
        status, prom, _ = fh.run(["stats", "-e", reject.control, "-f", "prometheus"])
        assert status == 0 and "fanhub_signature_crl_expired_total 1\n" in prom, prom
        line = [l for l in prom.splitlines()
                if l.startswith("fanhub_signature_crl_expires_seconds ")]
        assert len(line) == 1 and int(line[0].split()[1]) <= 0, line
        for hub in (reject, accept):
            assert hub.log().count("the CRL expired at") == 1, hub.log()
        # A current CRL, loaded by a reload: the gauge is ahead again.
        tf.make_crl(wd, "ca")
        os.replace(wd.file("ca.crl"), wd.file("short.crl"))
        status, _, err = fh.run(["reload", "-e", reject.control])
        assert status == 0, err
        fh.wait_for(lambda: signatures(reject)["crl_expires_seconds"] > 86400,
                    "the new CRL's nextUpdate", hub=reject)
        pub_r.send(TOPIC, alice)
        fh.wait_for(lambda: fh.count_lines(wd.file("reject.jsonl")) == 1, "delivered",
                    hub=reject)
        for hub in (reject, accept):
            assert hub.stop() == 0, hub.log()
    finally:
        for hub, pub in ((reject, pub_r), (accept, pub_a)):
            hub.kill()
            pub.close()
    wd.cleanup()


def expired_signer(wd, name):
    """A certificate of the CA whose validity ended in 2020."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    with open(wd.file("ca.key"), "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    with open(wd.file("ca.crt"), "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, name)]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(4242)
            .not_valid_before(datetime.datetime(2020, 1, 1))
            .not_valid_after(datetime.datetime(2020, 2, 1))
            .sign(ca_key, hashes.SHA256()))
    wd.write(name + ".key", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()).decode())
    wd.write(name + ".crt", cert.public_bytes(serialization.Encoding.PEM).decode())


def test_chain_reasons_and_limits():
    """With a CA file of two CAs and the CRL of one: the other's signer is
    crl_issuer; an expired signer of the CA is bad_chain; a field over
    max_field_bytes is too_large. Bad values of the new keys are refused."""
    tf.need_tools()
    wd = fh.Workdir()
    tf.make_pki(wd)
    expired_signer(wd, "old")
    with open(wd.file("ca.crt")) as a, open(wd.file("other.crt")) as b:
        wd.write("both.crt", a.read() + b.read())
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(wd, pub.endpoint, ca="both.crt",
                            extra="    max_field_bytes: 4KiB\n    on_crl_expired: reject\n"))
    try:
        pub.wait_subscribed(hub=hub)
        cases = [
            (tf.py_sign(wd, "eve", tf.envelope(1)), "crl_issuer"),
            (tf.py_sign(wd, "old", tf.envelope(2)), "bad_chain"),
            (dict(tf.py_sign(wd, "alice", tf.envelope(3)), signature="A" * 4097), "too_large"),
            (tf.py_sign(wd, "mallory", tf.envelope(4)), "revoked"),
            (tf.py_sign(wd, "alice", tf.envelope(5)), None),
        ]
        send_paced(hub, pub, [tf.dumps(m) for m, _ in cases], 1)
        stats = signatures(hub)
        for reason in ("crl_issuer", "bad_chain", "too_large", "revoked"):
            assert stats[reason] == 1, (reason, stats)
            hub.wait_log("failed its signature check (%s)" % reason)
        assert "signer eve" in hub.log() and "signer old" in hub.log()
        fh.wait_for(lambda: fh.count_lines(wd.file("out.jsonl")) == 1, "alice's", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    size = "max_field_bytes: expected a size such as 4096, 64KiB or 1MiB, from 1KiB to 64MiB"
    for value, want in (("max_field_bytes: 100", size), ("max_field_bytes: 1GiB", size),
                        ("on_crl_expired: keep", "on_crl_expired: expected reject or accept")):
        path = wd.write("c.yaml", config(wd, "tcp://127.0.0.1:9", extra="    %s\n" % value))
        status, _, err = fh.run(["check", "-c", path])
        assert status == 2 and "bus.validate_signatures." + want in err, (value, err)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_chain_reasons_and_limits, test_crl_refused_at_check_start_and_reload,
             test_crl_expires_while_running, test_flood_of_large_certificates])
