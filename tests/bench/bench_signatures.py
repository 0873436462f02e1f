"""bench_signatures.py - the benchmark's signatures case (bench.py --cases
signatures): the hub's input rate with bus.validate_signatures on against
off, in the same run, and what one validation costs; then the rate at
which it rejects a flood of made-up certificates.

A CA and a signer are made with `openssl`; SIGNED distinct fedmsg messages
(about 2.5 KB each: the envelope with its signature and certificate, as on
the Fedora bus) are signed with Python's cryptography into a JSON-lines
file, which `fanhub pub --jsonl` sends N times round (encoded once at load,
so the publisher costs the same either way). The hub has one null consumer;
with validation on every message is checked (and passes: a failure would
be dropped and the run would not complete). Off and on alternate rep by
rep. The cost of a validation is the difference of the hub's CPU per
message, on minus off: one signer means one certificate parse for the
whole run (the cache), so it is a JSON parse, a canonical re-encoding and
one RSA-2048 SHA-1 verification.

The yardstick (issue 41): evp_verify (tests/bench/evp_verify.c), a
process of ours that times OpenSSL's EVP_DigestVerify (RSA-2048, PKCS#1
v1.5, SHA-1) over the canonical payload and the signature of the first
signed message, with the signer's certificate, on its thread's CPU
clock, once a repetition beside the hub's runs (pinned like the hub).
The row: hub CPU a validated message (on) over that verification
(target <= 1.5x).

Rejected: REJECTED messages of the same shape, each with a different
certificate of the same size that is not one (random base64), so each is
a hash, a base64 and PEM attempt, and bad_certificate (remembered by hash
in a table of 1,024: cycling over 4,096 mostly misses it). Nothing is
delivered; the run ends when the hub has received them all.
"""
import base64
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

SIGNED = 256
TARGET_VS_EVP = 1.5  # hub CPU a validated message <= 1.5x EVP_DigestVerify (issue 41)
REJECTED = 4096
TOPIC = "org.fedoraproject.prod.buildsys.build.state.change"


def _pki(b, d):
    def ssl(*args):
        p = subprocess.run(["openssl"] + list(args), cwd=d, capture_output=True, text=True)
        if p.returncode != 0:
            raise b.BenchError(f"openssl {args[0]}: {p.stderr.strip()[-300:]}")
    ssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
        "-days", "2", "-subj", "/CN=bench-ca")
    ssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "signer.key", "-out", "signer.csr",
        "-subj", "/CN=koji-koji01")
    ssl("x509", "-req", "-in", "signer.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "signer.crt", "-days", "2")


def _signed_file(d):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding
    with open(os.path.join(d, "signer.key"), "rb") as f:
        key = serialization.load_pem_private_key(f.read(), password=None)
    with open(os.path.join(d, "signer.crt"), "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read()).public_bytes(serialization.Encoding.PEM)

    def lines(data):
        text = base64.b64encode(data).decode()
        return "\n".join(text[i:i + 76] for i in range(0, len(text), 76)) + "\n"

    path = os.path.join(d, "signed.jsonl")
    rejected = os.path.join(d, "rejected.jsonl")
    with open(path, "w") as out, open(rejected, "w") as bad:
        for i in range(SIGNED):
            msg = {"topic": TOPIC, "i": i + 1, "timestamp": 1700000000 + i, "username": "koji",
                   "msg_id": "2026-00000000-0000-4000-8000-%012d" % i, "crypto": "x509",
                   "msg": {"build_id": i, "name": "fanhub", "owner": "bench",
                           "version": "0.%d" % i, "instance": "primary", "new": 1, "old": 0}}
            data = json.dumps(msg, sort_keys=True, separators=(",", ":")).encode()
            sig = key.sign(data, padding.PKCS1v15(), hashes.SHA1())
            if i == 0:  # evp_verify's payload and signature
                with open(os.path.join(d, "payload.bin"), "wb") as f:
                    f.write(data)
                with open(os.path.join(d, "signature.bin"), "wb") as f:
                    f.write(sig)
            msg["signature"] = lines(sig)
            msg["certificate"] = lines(cert)
            size = len(json.dumps(msg, sort_keys=True, separators=(",", ":")))
            out.write(json.dumps({"topic": TOPIC, "body": msg}) + "\n")
        for i in range(REJECTED):
            msg["certificate"] = lines(os.urandom(len(cert)))
            bad.write(json.dumps({"topic": TOPIC, "body": msg}) + "\n")
    return path, rejected, size


def _evp_verify(b, bench, d, cpu, count):
    """One run of evp_verify on the bench's first signed message: ns of
    its thread's CPU a verification (EVP_DigestVerify, and SHA-1 +
    EVP_PKEY_verify)."""
    cmd = [os.path.join(bench.build, "bin", "evp_verify"), os.path.join(d, "signer.crt"),
           os.path.join(d, "payload.bin"), os.path.join(d, "signature.bin"), str(count)]
    if cpu is not None:
        cmd = ["taskset", "-c", str(cpu)] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise b.BenchError("evp_verify: " + (p.stderr or p.stdout).strip()[-300:])
    return json.loads(p.stdout)


def run(b, bench, prof, results):
    d = bench.path("signatures")
    os.makedirs(d, exist_ok=True)
    try:
        _pki(b, d)
        jsonl, rejected, size = _signed_file(d)
    except (ImportError, OSError) as e:
        results["signatures"] = {"status": f"not measured: {e}"}
        b.log(results["signatures"]["status"])
        return
    n = max(SIGNED, prof["tp_n"] // 10)
    on = ("  validate_signatures: {ca: %s, routing_policy: {%s: [koji-koji01]}, "
          "routing_nitpicky: true}" % (json.dumps(os.path.join(d, "ca.crt")), TOPIC))
    rows = []
    for placement in bench.placements:
        runs = {"off": [], "on": [], "rejected": []}
        evp = []
        for _ in range(prof["reps"]):
            evp.append(_evp_verify(b, bench, d, placement[2], 5_000 if prof["reps"] == 1
                                   else 20_000))
            runs["off"].append(b.retry(b.hub_throughput, bench, 1, size, n, placement,
                                       jsonl=jsonl))
            runs["on"].append(b.retry(b.hub_throughput, bench, 1, size, n, placement,
                                      jsonl=jsonl, bus_extra=on))
            runs["rejected"].append(b.retry(b.hub_throughput, bench, 1, size, n, placement,
                                            jsonl=rejected, bus_extra=on, expect_deliveries=0))
        row = dict(placement=placement[0], size=size, n=n)
        for mode, rs in runs.items():
            row[mode] = b.rep_median(rs, b.TP_KEYS)
        row["in_ratio"] = row["on"]["in_rate"] / row["off"]["in_rate"]
        row["cost_ns"] = row["on"]["cpu_per_msg_ns"] - row["off"]["cpu_per_msg_ns"]
        row["evp_verify_ns"] = b.median([e["digest_verify_ns"] for e in evp])
        row["pkey_verify_ns"] = b.median([e["pkey_verify_ns"] for e in evp])
        row["evp_runs"] = evp
        row["vs_evp"] = row["on"]["cpu_per_msg_ns"] / row["evp_verify_ns"]
        rows.append(row)
        b.log(f"signatures {placement[0]}: off {row['off']['in_rate']:,.0f}/s "
              f"({row['off']['cpu_per_msg_ns']:,.0f} ns hub CPU/msg), on "
              f"{row['on']['in_rate']:,.0f}/s ({row['on']['cpu_per_msg_ns']:,.0f} ns): "
              f"x{row['in_ratio']:.2f} rate, a validation costs {row['cost_ns'] / 1000:.1f} us; "
              f"accepted {row['on']['in_rate']:,.0f}/s, rejected "
              f"{row['rejected']['in_rate']:,.0f}/s; OpenSSL EVP_DigestVerify in-process "
              f"{row['evp_verify_ns'] / 1000:.1f} us (SHA-1 + EVP_PKEY_verify "
              f"{row['pkey_verify_ns'] / 1000:.1f} us): hub CPU a validated message "
              f"{row['vs_evp']:.2f}x (target <= {TARGET_VS_EVP}x)")
    results["signatures"] = {"status": "measured", "rows": rows}


def markdown(sig):
    out = ["## Signatures (bus.validate_signatures on against off)\n"]
    if sig.get("status") != "measured":
        out.append(sig.get("status", "not run") + "\n")
        return out
    out.append("One null consumer, `fanhub pub --jsonl` cycling %d distinct signed fedmsg "
               "messages of one signer (one certificate: the cache makes each check a "
               "signature verification, not a certificate parse). *cost*: hub CPU per message, "
               "on minus off. *rejected/s*: %d messages each with a different made-up "
               "certificate of the same size (bad_certificate), dropped.\n" % (SIGNED, REJECTED))
    out.append("| Placement | Size | Messages | off in/s | on in/s | on/off | off CPU/msg | "
               "on CPU/msg | cost of a validation | accepted/s | rejected/s |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in sig["rows"]:
        out.append(f"| {r['placement']} | {r['size']:,} B | {r['n']:,} | "
                   f"{r['off']['in_rate']:,.0f} | {r['on']['in_rate']:,.0f} | "
                   f"x{r['in_ratio']:.2f} | {r['off']['cpu_per_msg_ns'] / 1000:.1f} us | "
                   f"{r['on']['cpu_per_msg_ns'] / 1000:.1f} us | {r['cost_ns'] / 1000:.1f} us | "
                   f"{r['on']['in_rate']:,.0f} | "
                   f"{r.get('rejected', {}).get('in_rate', 0):,.0f} |")
    out.append("")
    for r in sig["rows"]:
        if "evp_verify_ns" in r:
            out.append(f"- {r['placement']}: OpenSSL's RSA-2048 verification of the same "
                       f"message in-process (evp_verify: EVP_DigestVerify) "
                       f"{r['evp_verify_ns'] / 1000:.1f} us (SHA-1 + EVP_PKEY_verify, a "
                       f"context kept: {r['pkey_verify_ns'] / 1000:.1f} us); hub CPU a "
                       f"validated message {r['on']['cpu_per_msg_ns'] / 1000:.1f} us = "
                       f"**{r['vs_evp']:.2f}x** (target <= {TARGET_VS_EVP}x: "
                       f"{'met' if r['vs_evp'] <= TARGET_VS_EVP else 'NOT met'})")
    out.append("")
    return out
