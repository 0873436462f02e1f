"""bench_k1.py - the benchmark's k1-paired case (bench.py --cases
k1-paired): the hub with one `null` consumer (K=1), 100 B, against a raw
libzmq SUB (bench_raw), in paired repetitions (issue 41).

Each repetition is a pair: the raw SUB and the hub run back to back, fed
by the same publisher (bench_pub, full speed) with the same message count
and placement; which of the two goes first alternates pair by pair (raw
first in pairs 1, 3, 5, ...), so that a drift of the machine's load falls
on both sides alike. Each pair gives its own ratios: input (hub in/s over
raw msg/s) and CPU a delivery (hub process CPU a delivery over the raw
SUB's CPU a message). The row is the median of those per-pair ratios, with
their spread (min-max), beside the medians of both sides' rates.

A pair counts only when both of its runs were bound by the receiver (its
publisher offered at least BOUND_MARGIN times what the receiver took) and
the hub lost and dropped nothing: a publisher-bound run measures the
publisher, not the receiver. A pair that does not count is shown, with
why, and left out of the medians; a verdict needs most of the pairs
counted.

The rows here read only the results dict, so a stored results.json is
reported again the same way (bench_report).
"""
import statistics

from bench_common import BOUND_MARGIN
from bench_report import fmt_ns, fmt_rate

b = None  # the bench module (bench.py), set by its case_function

SIZE = 100
TARGET_INPUT = 0.90  # hub in/s >= 0.90x the raw SUB's msg/s (issue 41)
TARGET_CPU = 1.15  # hub CPU a delivery <= 1.15x the raw SUB's CPU a message (issue 41)
RAW_KEYS = ("rate", "cpu_per_msg_ns", "pub_send_rate", "bound_by", "wall_s", "busy_before")
HUB_KEYS = ("in_rate", "cpu_per_delivery_ns", "pub_send_rate", "bound_by", "wall_s", "loss",
            "dropped", "busy_before")


def pair(rep, first, raw, hub):
    """One repetition's pair from a raw_run and a hub_throughput result:
    both sides' figures, the two ratios, and whether the pair counts (and
    if not, why)."""
    raw = {key: raw.get(key) for key in RAW_KEYS}
    hub = {key: hub.get(key) for key in HUB_KEYS}
    why = []
    for bound in sorted({raw["bound_by"], hub["bound_by"]} - {"receiver"}, key=str):
        sides = [side for side, r in (("raw", raw), ("hub", hub)) if r["bound_by"] == bound]
        why.append(f"{' and '.join(sides)} bound by {bound}")
    if hub["loss"] or hub["dropped"]:
        why.append(f"hub lost {hub['loss'] or 0}, dropped {hub['dropped'] or 0}")
    return dict(rep=rep, first=first, raw=raw, hub=hub,
                input_ratio=hub["in_rate"] / raw["rate"],
                cpu_ratio=hub["cpu_per_delivery_ns"] / raw["cpu_per_msg_ns"],
                counted=not why, why="; ".join(why))


def _spread(values):
    if not values:
        return None
    return dict(median=statistics.median(values), min=min(values), max=max(values))


def summarize(placement, n, pairs):
    """The row of one placement: medians of the per-pair ratios over the
    pairs that count, their spread, and both sides' medians (of the
    counted pairs; of all when none counts)."""
    counted = [p for p in pairs if p["counted"]]
    basis = counted or pairs

    def med(side, key):
        return statistics.median(p[side][key] for p in basis)

    return dict(placement=placement, size=SIZE, n=n, reps=len(pairs), counted=len(counted),
                input=_spread([p["input_ratio"] for p in counted]),
                cpu=_spread([p["cpu_ratio"] for p in counted]),
                raw_rate=med("raw", "rate"), raw_cpu_ns=med("raw", "cpu_per_msg_ns"),
                hub_in_rate=med("hub", "in_rate"), hub_cpu_ns=med("hub", "cpu_per_delivery_ns"),
                raw_pub_rate=med("raw", "pub_send_rate"), hub_pub_rate=med("hub", "pub_send_rate"),
                pairs=pairs)


def verdicts(row):
    """(input met, CPU met): None unless more than half the pairs count
    (else there is no median of the run's repetitions to judge)."""
    if row["counted"] * 2 <= row["reps"]:
        return None, None
    return row["input"]["median"] >= TARGET_INPUT, row["cpu"]["median"] <= TARGET_CPU


def bound_text(row):
    """Which side bound the pairs: "receiver, 5 of 5 pairs", or the pairs
    that did not count and why."""
    out = f"receiver, {row['counted']} of {row['reps']} pairs"
    left = [f"pair {p['rep']} ({p['why']})" for p in row["pairs"] if not p["counted"]]
    return out + ("; not counted: " + ", ".join(left) if left else "")


def ratio_text(spread, row):
    if not spread:
        return f"— (0 of {row['reps']} pairs count)"
    return (f"{spread['median']:.2f}x ({spread['min']:.2f}–{spread['max']:.2f}, "
            f"{row['counted']} of {row['reps']} pairs)")


def _log_pair(placement, total, p):
    raw, hub = p["raw"], p["hub"]
    b.log(f"k1-paired {placement} pair {p['rep']}/{total} ({p['first']} first): raw "
          f"{raw['rate']:,.0f} msg/s, {raw['cpu_per_msg_ns']:.0f} ns CPU/msg, publisher "
          f"{raw['pub_send_rate']:,.0f}/s ({raw['bound_by']}-bound); hub in "
          f"{hub['in_rate']:,.0f}/s, {hub['cpu_per_delivery_ns']:.0f} ns CPU/delivery, "
          f"publisher {hub['pub_send_rate']:,.0f}/s ({hub['bound_by']}-bound): input "
          f"x{p['input_ratio']:.2f}, CPU x{p['cpu_ratio']:.2f}"
          + ("" if p["counted"] else f"; not counted ({p['why']})"))


def case_k1_paired(bench, prof, results):
    """K=1 against the raw SUB in prof["k1_reps"] pairs of prof["k1_n"]
    messages each, per placement; see the module's text."""
    n, reps = prof["k1_n"], prof["k1_reps"]
    rows = []
    for placement in bench.placements:
        pairs = []
        for i in range(reps):
            order = ("raw", "hub") if i % 2 == 0 else ("hub", "raw")
            got = {}
            for side in order:
                if side == "raw":
                    got[side] = b.retry(b.raw_run, bench, n, SIZE, placement)
                else:
                    got[side] = b.retry(b.hub_throughput, bench, 1, SIZE, n, placement)
            pairs.append(pair(i + 1, order[0], got["raw"], got["hub"]))
            _log_pair(placement[0], reps, pairs[-1])
        row = summarize(placement[0], n, pairs)
        rows.append(row)
        b.log(f"k1-paired {placement[0]}: input {ratio_text(row['input'], row)}, CPU a "
              f"delivery {ratio_text(row['cpu'], row)}; bound by {bound_text(row)}")
    results["k1_paired"] = {"status": "measured", "rows": rows}


def issue41_rows(results, rows):
    """The K=1 rows of bench_report's table "The paths of issue 41"."""
    entry = results.get("k1_paired")
    if not entry:
        return
    for row in entry["rows"]:
        met_input, met_cpu = verdicts(row)
        pubs = (f"hub's {fmt_rate(row['hub_pub_rate'])} / raw's "
                f"{fmt_rate(row['raw_pub_rate'])}", bound_text(row))
        rows.append((f"K=1 `null`, 100 B: input, median of {row['reps']} paired reps",
                     row["placement"], fmt_rate(row["hub_in_rate"]),
                     f"raw SUB {fmt_rate(row['raw_rate'])}", ratio_text(row["input"], row),
                     f"≥ {TARGET_INPUT}x", met_input) + pubs)
        rows.append(("K=1: hub CPU a delivery, median of the same pairs", row["placement"],
                     fmt_ns(row["hub_cpu_ns"]), f"raw SUB {fmt_ns(row['raw_cpu_ns'])}",
                     ratio_text(row["cpu"], row), f"≤ {TARGET_CPU}x", met_cpu) + pubs)


def markdown(results, w):
    """The case's own section: every pair, then each placement's medians."""
    entry = results.get("k1_paired")
    if not entry:
        return
    w("## K=1 against the raw SUB, paired repetitions (k1-paired)\n")
    w("One `null` consumer, 100 B, bench_pub at full speed. Each pair runs the raw SUB "
      "(bench_raw) and the hub back to back with the same publisher and message count, the "
      "first of the two alternating. *input*: hub in/s over raw msg/s; *CPU*: hub CPU a "
      "delivery over raw CPU a message; both per pair. *bound by*: receiver when the "
      f"publisher offered at least {BOUND_MARGIN}x what the receiver took. A pair counts "
      "only when both runs were receiver-bound and the hub lost and dropped nothing; the "
      "median and min–max are of the counted pairs' ratios.\n")
    w("| Placement | Pair | First | raw msg/s | raw CPU/msg | raw publisher/s | raw bound by | "
      "hub in/s | hub CPU/delivery | hub publisher/s | hub bound by | input | CPU | counted |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in entry["rows"]:
        for p in row["pairs"]:
            raw, hub = p["raw"], p["hub"]
            w(f"| {row['placement']} | {p['rep']} | {p['first']} | {fmt_rate(raw['rate'])} | "
              f"{fmt_ns(raw['cpu_per_msg_ns'])} | {fmt_rate(raw['pub_send_rate'])} | "
              f"{raw['bound_by']} | {fmt_rate(hub['in_rate'])} | "
              f"{fmt_ns(hub['cpu_per_delivery_ns'])} | {fmt_rate(hub['pub_send_rate'])} | "
              f"{hub['bound_by']} | {p['input_ratio']:.2f}x | {p['cpu_ratio']:.2f}x | "
              f"{'yes' if p['counted'] else 'no: ' + p['why']} |")
        w(f"| {row['placement']} | median | | {fmt_rate(row['raw_rate'])} | "
          f"{fmt_ns(row['raw_cpu_ns'])} | {fmt_rate(row['raw_pub_rate'])} | | "
          f"{fmt_rate(row['hub_in_rate'])} | {fmt_ns(row['hub_cpu_ns'])} | "
          f"{fmt_rate(row['hub_pub_rate'])} | | {ratio_text(row['input'], row)} | "
          f"{ratio_text(row['cpu'], row)} | {row['counted']} of {row['reps']} |")
    w("")


def figures(results, put):
    """The comparable figures (bench_report.figures, for --compare)."""
    for row in (results.get("k1_paired") or {}).get("rows", []):
        case = f"{row['placement']} {row['size']} B K=1 paired"
        put("k1-paired", case, "input hub/raw", (row["input"] or {}).get("median"), True)
        put("k1-paired", case, "CPU hub/raw", (row["cpu"] or {}).get("median"), False)
        put("k1-paired", case, "hub in/s", row["hub_in_rate"], True)
        put("k1-paired", case, "raw msg/s", row["raw_rate"], True)
