"""What the bench reports, checked without timing anything: its runs are
stand-ins that answer fixed figures, so what is checked is the method
and the output.

The k1-paired case (tests/bench/bench_k1.py, issue 41): each pair runs
the raw SUB and the hub with the same message count, size and placement,
the first of the two alternating pair by pair; the row is the median of
the per-pair ratios (not a ratio of medians) over the pairs where both
runs were bound by the receiver and nothing was lost; a pair bound by its
publisher is shown with why and left out; no verdict unless most pairs
count; the results.md rows carry both rates, the publishers' rates and
"bound by". And `scripts/bench --help` names every case bench.py knows.

The Moksha row of issue 41's table without moksha-hub (Debian packages
only python3-moksha.common): the runner's own figures, said to be with
its stand-in for moksha's Consumer, and why moksha-hub was not measured;
with moksha-hub, the runner against it."""
import os
import re
import sys
import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

sys.path.insert(0, os.path.join(fh.SOURCE_DIR, "tests", "bench"))
import bench  # noqa: E402  (tests/bench/bench.py)
import bench_k1  # noqa: E402
import bench_report  # noqa: E402

PINNED = ("pinned", 0, 1)


def fake_bench_module(raws, hubs, calls):
    """A stand-in for bench.py as bench_k1 sees it (its `b`): raw_run and
    hub_throughput answer the next of raws and hubs and note each call."""

    def raw_run(_bench, n, size, placement):
        calls.append(("raw", n, size, placement))
        return raws.pop(0)

    def hub_throughput(_bench, k, size, n, placement):
        calls.append(("hub", n, size, placement, k))
        return hubs.pop(0)

    return types.SimpleNamespace(raw_run=raw_run, hub_throughput=hub_throughput,
                                 retry=lambda fn, *a, **kw: fn(*a, **kw), log=lambda _: None)


def raw(rate, cpu_ns, pub=None, bound="receiver"):
    return dict(rate=rate, cpu_per_msg_ns=cpu_ns, pub_send_rate=pub or 2 * rate,
                bound_by=bound, wall_s=1.0, busy_before=0.0)


def hub(rate, cpu_ns, pub=None, bound="receiver", loss=0, dropped=0):
    return dict(in_rate=rate, cpu_per_delivery_ns=cpu_ns, pub_send_rate=pub or 2 * rate,
                bound_by=bound, wall_s=1.0, loss=loss, dropped=dropped, busy_before=0.0)


def run_case(raws, hubs, reps, n=1000):
    calls = []
    bench_k1.b = fake_bench_module(list(raws), list(hubs), calls)
    results = {}
    bench_k1.case_k1_paired(types.SimpleNamespace(placements=[PINNED]),
                            {"k1_n": n, "k1_reps": reps}, results)
    return results, calls


def test_pairs_alternate_with_the_same_publisher_and_count():
    results, calls = run_case([raw(100, 500)] * 4, [hub(90, 550)] * 4, reps=4, n=1234)
    assert [c[0] for c in calls] == ["raw", "hub", "hub", "raw", "raw", "hub", "hub", "raw"]
    assert all(c[1] == 1234 and c[2] == 100 and c[3] == PINNED for c in calls), calls
    assert all(c[4] == 1 for c in calls if c[0] == "hub"), calls  # K=1
    row, = results["k1_paired"]["rows"]
    assert [p["first"] for p in row["pairs"]] == ["raw", "hub", "raw", "hub"]
    assert row["reps"] == row["counted"] == 4 and row["n"] == 1234


def test_the_row_is_the_median_of_per_pair_ratios():
    # per pair: input 0.9, 0.5, 1.1 (median 0.9); the ratio of the
    # medians would be 100/200 = 0.5. CPU: 1.2, 1.0, 1.5 (median 1.2).
    results, _ = run_case([raw(100, 500), raw(200, 400), raw(300, 200)],
                          [hub(90, 600), hub(100, 400), hub(330, 300)], reps=3)
    row, = results["k1_paired"]["rows"]
    assert abs(row["input"]["median"] - 0.9) < 1e-9, row["input"]
    assert abs(row["input"]["min"] - 0.5) < 1e-9 and abs(row["input"]["max"] - 1.1) < 1e-9
    assert abs(row["cpu"]["median"] - 1.2) < 1e-9, row["cpu"]
    assert (row["raw_rate"], row["hub_in_rate"]) == (200, 100)
    assert bench_k1.verdicts(row) == (True, False)  # 0.9 >= 0.90; 1.2 > 1.15


def test_a_publisher_bound_pair_is_shown_and_not_counted():
    results, _ = run_case([raw(100, 500), raw(100, 500, pub=110, bound="publisher"),
                           raw(100, 500)],
                          [hub(95, 560), hub(50, 900), hub(80, 520, loss=3)], reps=3)
    row, = results["k1_paired"]["rows"]
    counted = [p["counted"] for p in row["pairs"]]
    assert counted == [True, False, False], row["pairs"]
    assert row["pairs"][1]["why"] == "raw bound by publisher", row["pairs"][1]
    assert row["pairs"][2]["why"] == "hub lost 3, dropped 0", row["pairs"][2]
    # Only pair 1 counts: its ratios alone, and 1 of 3 is no verdict.
    assert abs(row["input"]["median"] - 0.95) < 1e-9 and row["counted"] == 1
    assert bench_k1.verdicts(row) == (None, None)
    text = bench_k1.bound_text(row)
    assert text == ("receiver, 1 of 3 pairs; not counted: pair 2 (raw bound by publisher), "
                    "pair 3 (hub lost 3, dropped 0)"), text


def test_no_pair_counted_gives_no_ratio():
    both = dict(pub=100, bound="publisher")
    results, _ = run_case([raw(100, 500, **both)] * 2, [hub(90, 550, **both)] * 2, reps=2)
    row, = results["k1_paired"]["rows"]
    assert row["input"] is None and row["cpu"] is None
    assert bench_k1.ratio_text(row["input"], row) == "— (0 of 2 pairs count)"
    assert bench_k1.verdicts(row) == (None, None)
    assert "pair 1 (raw and hub bound by publisher)" in bench_k1.bound_text(row)


def table_rows(lines, first_cell):
    """The cells of the markdown table rows whose first cell is first_cell."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines
            if line.startswith(f"| {first_cell} |")]


def test_results_md_rows():
    results, _ = run_case([raw(2_000_000, 400, pub=3_000_000), raw(2_000_000, 400)],
                          [hub(1_900_000, 440, pub=2_900_000), hub(1_740_000, 470)], reps=2)
    results["placements"] = ["pinned"]
    out = []
    bench_report._md_issue41(results, out.append)
    rows = table_rows(out, "K=1 `null`, 100 B: input, median of 2 paired reps")
    assert len(rows) == 1 and len(rows[0]) == 9, out
    fig, pl, measured, ref, ratio, target, met, pubs, bound = rows[0]
    assert (pl, measured, ref, target, met) == ("pinned", "1.82 M/s", "raw SUB 2.00 M/s",
                                                "≥ 0.9x", "yes"), rows[0]
    assert ratio == "0.91x (0.87–0.95, 2 of 2 pairs)", ratio
    assert pubs == "hub's 3.19 M/s / raw's 3.50 M/s", pubs
    assert bound == "receiver, 2 of 2 pairs", bound
    cpu = table_rows(out, "K=1: hub CPU a delivery, median of the same pairs")
    assert cpu and cpu[0][2:7] == ["455 ns", "raw SUB 400 ns", "1.14x (1.10–1.18, 2 of 2 pairs)",
                                   "≤ 1.15x", "yes"], cpu
    out = []
    bench_report._md_k1_paired(results, out.append)
    pairs = table_rows(out, "pinned")
    assert len(pairs) == 3 and all(len(p) == 14 for p in pairs), out
    assert pairs[0][1:3] == ["1", "raw"] and pairs[1][1:3] == ["2", "hub"], pairs
    assert pairs[0][11:] == ["0.95x", "1.10x", "yes"], pairs[0]
    assert pairs[2][1] == "median" and pairs[2][13] == "2 of 2", pairs[2]


def test_without_the_case_the_table_says_so():
    results = {"placements": ["pinned"], "signatures": {"rows": [dict(
        placement="pinned", evp_verify_ns=20_000, vs_evp=1.4,
        on=dict(cpu_per_msg_ns=28_000, pub_send_rate=30_000, bound_by="receiver"))]}}
    out = []
    bench_report._md_issue41(results, out.append)
    assert "K=1 against the raw SUB: not measured in this run (the k1-paired case).\n" in out
    assert not table_rows(out, "K=1 `null`, 100 B: input, median of 2 paired reps"), out


def moksha_row(rate, cpu_us):
    return dict(rate=rate, cpu_us=cpu_us, pub_send_rate=4 * rate, bound_by="receiver")


def test_the_moksha_row_says_what_it_measured():
    why = "moksha.hub is not importable by /usr/bin/python3 (only python3-moksha.common)"
    worker = {"moksha": {"fanhub runner": moksha_row(50_000, 19.0)}, "moksha_missing": why}
    out = []
    bench_report._md_issue41({"placements": ["unpinned"], "worker": worker}, out.append)
    row, = table_rows(out, "Moksha consumer class, K=1: fanhub runner alone (its stand-in "
                           "for moksha's `Consumer`)")
    assert row[1:] == ["unpinned", "50 k/s, 19.0 µs CPU", "moksha-hub not measured: " + why,
                       "—", "—", "n/a", "200 k/s", "receiver"], row
    worker["moksha"]["moksha-hub"] = moksha_row(25_000, 38.0)
    out = []
    bench_report._md_issue41({"placements": ["unpinned"], "worker": worker}, out.append)
    row, = table_rows(out, "Moksha consumer class, K=1: fanhub runner against moksha-hub "
                           "(threaded)")
    assert row[3:5] == ["moksha-hub 25 k/s, 38.0 µs", "2.00x the rate, 0.50x the CPU"], row


def test_bench_help_names_every_case():
    with open(os.path.join(fh.SOURCE_DIR, "scripts", "bench")) as f:
        text = f.read()
    listed = re.search(r"--cases LIST\s+a subset of ([a-z0-9,\-#\s]+?)\(the", text)
    assert listed, "scripts/bench: no --cases list in its usage"
    names = re.sub(r"\s|#", "", listed.group(1)).split(",")
    assert names == bench.CASES, (names, bench.CASES)
    for case in bench.CASES + bench.EXTRA_CASES:
        assert callable(bench.case_function(case)), case
    assert "--k1-messages N" in text and "k1-paired:" in text


if __name__ == "__main__":
    fh.main([test_pairs_alternate_with_the_same_publisher_and_count,
             test_the_row_is_the_median_of_per_pair_ratios,
             test_a_publisher_bound_pair_is_shown_and_not_counted,
             test_no_pair_counted_gives_no_ratio,
             test_results_md_rows,
             test_without_the_case_the_table_says_so,
             test_the_moksha_row_says_what_it_measured,
             test_bench_help_names_every_case])
