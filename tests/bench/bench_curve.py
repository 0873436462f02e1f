"""bench_curve.py - the benchmark's CURVE case (bench.py --cases curve): hub
K=1 fed by bench_pub, plaintext against bus.curve in the same run, at
100 B and 1 KiB, with the keys made by fanhub keygen (CurveKeys).
"""
import os
import re
import subprocess

b = None  # the bench module (bench.py), set by its case_function
CURVE_SIZES = [100, 1024]


def zcert_public_key(path):
    """The public key (Z85) of a zcert file, as `fanhub keygen` writes it."""
    with open(path) as f:
        m = re.search(r'^\s*public-key\s*=\s*"(.{40})"', f.read(), re.M)
    if not m:
        raise b.BenchError(f"{path}: no public-key in this zcert file")
    return m.group(1)


class CurveKeys:
    """The key pairs of a CURVE bus, made by `fanhub keygen` as an operator
    makes them: the hub's (the server; the hub reads hub_secret) and
    bench_pub's (a client; bench_pub reads pub_secret, the hub allows its
    public key)."""

    def __init__(self, bench):
        keydir = os.path.join(bench.tmp, "curve-keys")
        os.makedirs(keydir, mode=0o700, exist_ok=True)
        for name in ("hub", "pub"):
            p = subprocess.run([bench.fanhub, "keygen", os.path.join(keydir, name)],
                               capture_output=True, text=True, timeout=30)
            if p.returncode != 0:
                raise b.BenchError(f"fanhub keygen {name} failed ({p.returncode}): "
                                 + (p.stderr or p.stdout).strip())
        self.hub_secret_file = os.path.join(keydir, "hub_secret")
        self.hub_public = zcert_public_key(os.path.join(keydir, "hub"))
        self.pub_secret_file = os.path.join(keydir, "pub_secret")
        self.pub_public = zcert_public_key(os.path.join(keydir, "pub"))


def case_curve(bench, prof, results):
    """What CURVE on the bus costs: hub K=1 (one null consumer) fed by
    bench_pub at 100 B and 1 KiB, plaintext against CURVE (bus.curve with
    the hub as server, bench_pub a client in its allow list) in the same
    run. The two alternate rep by rep, so that a change in the machine's
    load falls on both. Reports the hub's input rate and CPU per message,
    the publisher's own rate and the bound-by column, and CURVE/plaintext
    for both figures. The encryption of bench_pub's side runs in its
    libzmq I/O thread, after the send loop that send_rate times: a CURVE
    case can be bound by that thread while the column says receiver; the
    table's "hub busy" (hub CPU over wall time) tells the two apart."""
    try:
        keys = CurveKeys(bench)
    except b.BenchError as e:
        results["curve"] = {"status": f"not measured: {e}"}
        b.log(results["curve"]["status"])
        return
    rows = []
    for placement in bench.placements:
        for size in CURVE_SIZES:
            n = b.tp_count(prof, size)
            runs = {"plaintext": [], "curve": []}
            for _ in range(prof["reps"]):
                runs["plaintext"].append(b.retry(b.hub_throughput, bench, 1, size, n, placement))
                runs["curve"].append(b.retry(b.hub_throughput, bench, 1, size, n, placement,
                                           curve=keys))
            row = dict(placement=placement[0], size=size, n=n)
            for bus, rs in runs.items():
                r = b.rep_median(rs, b.TP_KEYS)
                r.update(loss=max(x["loss"] for x in rs), dropped=max(x["dropped"] for x in rs))
                row[bus] = r
            row["in_ratio"] = row["curve"]["in_rate"] / row["plaintext"]["in_rate"]
            row["cpu_ratio"] = (row["curve"]["cpu_per_msg_ns"]
                                / row["plaintext"]["cpu_per_msg_ns"])
            rows.append(row)
            pt, cv = row["plaintext"], row["curve"]
            b.log(f"curve {placement[0]} {size} B: plaintext in {pt['in_rate']:,.0f}/s "
                f"({pt['cpu_per_msg_ns']:.0f} ns hub CPU/msg, publisher "
                f"{pt['pub_send_rate']:,.0f}/s, {pt['bound_by']}-bound), CURVE in "
                f"{cv['in_rate']:,.0f}/s ({cv['cpu_per_msg_ns']:.0f} ns, publisher "
                f"{cv['pub_send_rate']:,.0f}/s, {cv['bound_by']}-bound): "
                f"x{row['in_ratio']:.2f} rate, x{row['cpu_ratio']:.2f} CPU/msg")
    results["curve"] = {"status": "measured", "rows": rows}
