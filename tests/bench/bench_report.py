"""bench_report.py - what a run of bench.py reports: the machine, the
targets met or not (evaluate), results.md (markdown), the charts
(gnuplot), and the comparison of two runs' results.json (compare).
Reads only a run's results dict, so a stored results.json can be
reported again.
"""
import json
import os
import platform
import shutil
import subprocess

import zmq

from bench_common import BOUND_MARGIN, QUIET, TARGETS, log


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    zmq_version = zmq.zmq_version()
    return dict(nproc=os.cpu_count(), cpu=model, kernel=platform.release(),
                os=_os_release(), libzmq=zmq_version, python=platform.python_version())


def _os_release():
    try:
        with open("/etc/os-release") as f:
            for line in f:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return ""


def _fmt_ctx(v):
    return "—" if v is None else f"{v:.2f}"


def fmt_rate(v):
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v/1e6:.2f} M/s"
    if v >= 1e3:
        return f"{v/1e3:.0f} k/s"
    return f"{v:.0f} /s"


def fmt_us(ns):
    return "—" if ns is None else (f"{ns/1e3:.1f} µs" if ns < 1e7 else f"{ns/1e6:.1f} ms")


def fmt_ns(ns):
    return "—" if ns is None else f"{ns:,.0f} ns"


def find(rows, **kw):
    for r in rows or []:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def receiver_bound(*rows):
    return all(r.get("bound_by") == "receiver" for r in rows)


def _eval_throughput(results, placement, rows):
    """K=1 and K=4 against raw: input, deliveries, CPU."""
    tp = results.get("throughput", [])
    pb = "publisher-bound: no ratio"
    raw = find(tp, kind="raw", size=100, placement=placement)
    k1 = find(tp, kind="hub", k=1, size=100, placement=placement)
    k4 = find(tp, kind="hub", k=4, size=100, placement=placement)
    if raw and k1:
        bound = receiver_bound(raw, k1)
        ratio = k1["in_rate"] / raw["rate"]
        lossless = k1["loss"] == 0 and k1["dropped"] == 0
        rows.append(("K=1 sustained input, 100 B", placement, fmt_rate(k1["in_rate"]),
                     f"{ratio:.2f}x" if bound else "—",
                     f"≥ {TARGETS['k1_input']}x raw, zero loss",
                     (ratio >= TARGETS["k1_input"] and lossless) if bound else None,
                     f"loss {k1['loss']}, dropped {k1['dropped']}; publisher "
                     f"{fmt_rate(k1['pub_send_rate'])} ({k1['bound_by']}), raw's "
                     f"{fmt_rate(raw['pub_send_rate'])} ({raw['bound_by']})"))
        ratio = k1["cpu_per_delivery_ns"] / raw["cpu_per_msg_ns"]
        rows.append(("K=1 hub CPU per delivery", placement,
                     fmt_ns(k1["cpu_per_delivery_ns"]), f"{ratio:.2f}x",
                     f"≤ {TARGETS['k1_cpu']}x raw CPU/msg",
                     ratio <= TARGETS["k1_cpu"] if bound else None,
                     f"raw {fmt_ns(raw['cpu_per_msg_ns'])}"
                     + ("" if bound else "; " + pb + " to judge by (shown for reference)")))
    if raw and k4:
        bound = receiver_bound(raw, k4)
        ratio = k4["deliveries_rate"] / raw["rate"]
        rows.append(("K=4 deliveries/s, 100 B", placement, fmt_rate(k4["deliveries_rate"]),
                     f"{ratio:.2f}x" if bound else "—", "≥ 0.45x raw msg/s",
                     (ratio >= TARGETS["k4_deliveries"] and k4["loss"] == 0
                      and k4["dropped"] == 0) if bound else None,
                     f"loss {k4['loss']}, dropped {k4['dropped']}"))
        ratio = k4["cpu_per_delivery_ns"] / raw["cpu_per_msg_ns"]
        rows.append(("K=4 hub CPU per delivery", placement,
                     fmt_ns(k4["cpu_per_delivery_ns"]), f"{ratio:.2f}x",
                     "≤ 2.5x raw CPU/msg", ratio <= TARGETS["k4_cpu"] if bound else None,
                     "" if bound else pb))


def _eval_latency(results, placement, rows):
    """p99 at 10k msg/s, K=8, against raw."""
    lat = results.get("latency", [])
    lraw = find(lat, kind="raw", rate=10_000, placement=placement)
    l8 = find(lat, kind="hub", k=8, rate=10_000, placement=placement)
    if lraw and l8:
        ratio = l8["p99_ns"] / lraw["p99_ns"]
        rows.append(("p99 latency, 10k msg/s, K=8", placement, fmt_us(l8["p99_ns"]),
                     f"{ratio:.2f}x", f"≤ {TARGETS['lat_p99']}x raw p99",
                     ratio <= TARGETS["lat_p99"],
                     f"raw p99 {fmt_us(lraw['p99_ns'])}; ctx sw/msg "
                     f"{_fmt_ctx(l8.get('ctx_per_msg'))} vs raw "
                     f"{_fmt_ctx(lraw.get('ctx_per_msg'))}"))


def _eval_routing(results, placement, rows):
    """Routing to 100 and 1,000 consumers, idle RSS."""
    rt = find(results.get("routing"), placement=placement)
    if rt:
        ratio = rt["cost_vs_unrouted"]
        rows.append(("Routing: 100 consumers, 3 match, CPU/delivery", placement,
                     fmt_ns(rt["cpu_per_delivery_ns"]), f"{ratio:.2f}x of 3 unrouted",
                     f"≤ {TARGETS['routing_cost']}x", ratio <= TARGETS["routing_cost"],
                     f"3 unrouted: {fmt_ns(rt['reference_k3']['cpu_per_delivery_ns'])}; "
                     f"ctx sw/msg {_fmt_ctx(rt.get('ctx_per_msg'))} vs "
                     f"{_fmt_ctx(rt['reference_k3'].get('ctx_per_msg'))}"))
    sc = find(results.get("scale"), placement=placement)
    if sc:
        b = sc["broadcast"]
        rows.append((f"{sc['consumers']:,} idle consumers, RSS", placement,
                     f"{b['rss_idle']/2**20:,.0f} MiB", "—",
                     f"≤ {TARGETS['idle_rss'] // 2**20} MiB",
                     b["rss_idle"] <= TARGETS["idle_rss"],
                     f"{b['rss_after']/2**20:,.0f} MiB after {b['n']:,} messages to all; "
                     f"{b['threads']:,} threads"))
        rows.append((f"Routing: {sc['consumers']:,} consumers, 3 match, CPU/delivery",
                     placement, fmt_ns(sc["routed"]["cpu_per_delivery_ns"]),
                     f"{sc['cost_vs_unrouted']:.2f}x of 3 unrouted",
                     f"≤ {TARGETS['scale_cost']}x", sc["cost_vs_unrouted"] <= TARGETS["scale_cost"],
                     f"3 unrouted: {fmt_ns(sc['reference_k3']['cpu_per_delivery_ns'])}; "
                     f"ctx sw/msg {_fmt_ctx(sc['routed'].get('ctx_per_msg'))} vs "
                     f"{_fmt_ctx(sc['reference_k3'].get('ctx_per_msg'))}"))


def _eval_neighbour(results, placement, rows):
    """The log consumer beside a spilling neighbour."""
    nb = results.get("neighbour", {})
    for r in nb.get("rows", []):
        if r["placement"] == placement:
            # Every repetition's ratio must hold, not only their median.
            ratios = r.get("ratios") or [r["ratio"]]
            rows.append(("Log consumer beside a spilling neighbour (fsync: always)",
                         placement, fmt_rate(r["beside_spill"]["deliveries_rate"]),
                         f"{r['ratio']:.2f}x of alone (median); each run "
                         + ", ".join(f"{x:.2f}" for x in ratios),
                         f"≥ {TARGETS['neighbour']}x in every run",
                         min(ratios) >= TARGETS["neighbour"],
                         f"alone {fmt_rate(r['alone']['deliveries_rate'])}; budget "
                         f"{fmt_ns(r.get('budget_ns'))}/msg at {r.get('busy', 0):.2f} "
                         f"CPUs busy, the spool's own work "
                         f"{fmt_ns((r.get('floor') or {}).get('spill_ns'))}/msg; "
                         f"issue 12"))
            floor = (r.get("floor") or {}).get("spill_ns")
            if floor and r.get("added_ns") is not None:
                ratio = r["added_ns"] / floor
                rows.append(("Spill path: hub CPU a message beside the spiller, minus alone",
                             placement, fmt_ns(r["added_ns"]), f"{ratio:.2f}x spill_floor",
                             f"≤ {TARGETS['spill_vs_floor']}x spill_floor",
                             ratio <= TARGETS["spill_vs_floor"],
                             f"spill_floor {fmt_ns(floor)}/msg (encode, CRC-32C, pwrite, "
                             f"fdatasync); issue 30"))


def _eval_resources(results, placement, rows):
    """The cost of STATS scraping; RSS against payload."""
    m = find(results.get("metrics"), placement=placement)
    if m:
        rows.append(("STATS scraped at 10 Hz (K=4)", placement,
                     f"{m['cost']*100:+.1f} % throughput", "—", "≤ 3 % cost",
                     m["cost"] <= TARGETS["metrics_cost"],
                     f"CPU/delivery {m['cpu_cost']*100:+.1f} %"
                     + (f"; each pair {', '.join(f'{c*100:+.1f}' for c in m['cost_pairs'])} %; "
                        f"control thread {m['control_share']*100:.2f} % of the hub's CPU "
                        f"({m['control_share_off']*100:.2f} % unscraped)"
                        if "cost_pairs" in m else "")))
    mem = find(results.get("memory"), k=4, placement=placement)
    if mem:
        rows.append((f"RSS, 4 consumers × {mem['n']:,} queued 1 KiB", placement,
                     f"{mem['rss']/2**20:,.0f} MiB", "—",
                     f"≤ 1.3x payload + 64 MiB = {mem['limit']/2**20:,.0f} MiB",
                     mem["rss"] <= mem["limit"],
                     f"payload {mem['payload']/2**20:,.0f} MiB, RSS/payload "
                     f"{mem['ratio']:.2f}"))


def evaluate(results):
    """The target rows: (figure, placement, value, vs raw, target, met,
    note); met is None when the case is publisher-bound (no ratio)."""
    rows = []
    for placement in results["placements"]:
        for family in (_eval_throughput, _eval_latency, _eval_routing, _eval_neighbour,
                       _eval_resources):
            family(results, placement, rows)
    ck = results.get("check")
    if ck:
        ok = ck["accepted"]
        rows.append((f"fanhub check of {ck['consumers']:,} consumers", "—",
                     f"refused in {ck['wall_s']:.2f} s, {ck['max_rss']/2**20:,.0f} MiB", "—",
                     "< 10 s and < 1 GiB",
                     ck["wall_s"] < TARGETS["check_s"] and ck["max_rss"] < TARGETS["check_rss"],
                     f"a hub runs at most {ok['consumers']:,}: check of {ok['consumers']:,} "
                     f"{ok['wall_s']:.2f} s, {ok['max_rss']/2**20:,.0f} MiB"))
    return rows


def throughput_table(w, tp):
    w("| Placement | Body | Case | publisher/s | in/s | bound by | deliveries/s | "
      "vs raw (deliveries) | CPU/delivery | vs raw CPU/msg | loss | dropped | backlog max | "
      "ctx sw/msg |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in tp:
        raw = find(tp, kind="raw", size=r["size"], placement=r["placement"])
        conns = f", {r['connections']} publishers" if r.get("connections", 1) > 1 else ""
        if r["kind"] == "raw":
            w(f"| {r['placement']} | {r['size']} B | raw libzmq SUB{conns} | "
              f"{fmt_rate(r.get('pub_send_rate'))} | {fmt_rate(r['rate'])} | "
              f"{r.get('bound_by', '?')} | {fmt_rate(r['rate'])} | 1.00x | "
              f"{fmt_ns(r['cpu_per_msg_ns'])} | 1.00x | {r['loss']} | — | — | "
              f"{_fmt_ctx(r.get('ctx_per_msg'))} |")
        else:
            bound = raw is not None and receiver_bound(raw, r)
            ratio = f"{r['deliveries_rate']/raw['rate']:.2f}x" if bound else "—"
            cpu_ratio = (f"{r['cpu_per_delivery_ns']/raw['cpu_per_msg_ns']:.2f}x"
                         if raw else "—")
            w(f"| {r['placement']} | {r['size']} B | hub K={r['k']}{conns} | "
              f"{fmt_rate(r.get('pub_send_rate'))} | {fmt_rate(r['in_rate'])} | "
              f"{r.get('bound_by', '?')} | {fmt_rate(r['deliveries_rate'])} | {ratio} | "
              f"{fmt_ns(r['cpu_per_delivery_ns'])} | {cpu_ratio} | {r['loss']} | "
              f"{r['dropped']} | {r['backlog_max']:,.0f} | {_fmt_ctx(r.get('ctx_per_msg'))} |")
    w("")


def _md_header(results, w):
    """The title, the machine and the other work seen on it."""
    m = results["machine"]
    w(f"# fanhub benchmark ({results['profile']})\n")
    w(f"Run {results['started']} on {m['nproc']} CPUs, {m['cpu']}, Linux {m['kernel']} "
      f"({m['os']}), libzmq {m['libzmq']}; {results.get('fanhub_version', '?')} "
      f"(git {results.get('git', '?')}), Release build. Every figure is the median of "
      f"{results['reps']} run{'s' if results['reps'] != 1 else ''}. *pinned*: publisher on CPU 0, hub (or raw subscriber) on "
      f"CPU 1 (`taskset`); *unpinned*: the scheduler's choice.\n")
    bg = results.get("background_busy")
    if bg:
        w(f"Other work on the machine just before each run (share of all CPUs busy): "
          f"median {bg['median']*100:.0f} %, max {bg['max']*100:.0f} % over {bg['runs']} runs"
          + (" — **figures disturbed**." if bg["max"] > QUIET["threshold"] else ".") + "\n")


def _md_targets(results, w):
    """Each target: measured, against raw, met or not."""
    w("## Targets\n")
    w("| Figure | Placement | Measured | vs raw | Target | Met? | Notes |")
    w("|---|---|---|---|---|---|---|")
    for fig, pl, val, ratio, target, met, note in evaluate(results):
        verdict = "n/a" if met is None else ("yes" if met else "**no**")
        w(f"| {fig} | {pl} | {val} | {ratio} | {target} | {verdict} | {note} |")
    w("")


def _issue41_k1(results, rows):
    import bench_k1
    bench_k1.issue41_rows(results, rows)


def _issue41_worker(results, rows):
    import bench_worker
    wk = results.get("worker") or {}
    noop = [r for r in wk.get("rows", []) if r.get("consumer") == "no-op"]
    if len(noop) == 2:
        one, two = noop
        pubs = (f"{fmt_rate(one['pub_send_rate'])} / {fmt_rate(two['pub_send_rate'])}",
                f"{one['bound_by']} / {two['bound_by']}")
        rows.append(("No-op Python consumer (`prefetch: 1000`), `workers: 1`: hub + worker "
                     "CPU a message",
                     "unpinned", f"{one['cpu_us']:.2f} µs (hub {one['hub_cpu_us']:.2f}, "
                     f"worker {one['worker_cpu_us']:.2f})", f"at {fmt_rate(one['rate'])}", "—",
                     f"≤ {bench_worker.TARGET_NOOP_CPU_US:g} µs",
                     one["cpu_us"] <= bench_worker.TARGET_NOOP_CPU_US) + pubs[:1]
                    + (one["bound_by"],))
        ratio = two["hub_cpu_us"] / one["hub_cpu_us"]
        rows.append(("No-op Python consumer, `workers: 2` (no `order_by`): hub CPU a "
                     "message",
                     "unpinned", f"{two['hub_cpu_us']:.2f} µs",
                     f"`workers: 1` {one['hub_cpu_us']:.2f} µs", f"{ratio:.2f}x",
                     f"≤ {bench_worker.TARGET_HUB_POOL}x",
                     ratio <= bench_worker.TARGET_HUB_POOL) + pubs)
    moksha = wk.get("moksha") or {}
    runner, hub = moksha.get("fanhub runner"), moksha.get("moksha-hub")
    if runner and hub:
        rows.append(("Moksha consumer class, K=1: fanhub runner against moksha-hub (threaded)",
                     "unpinned", f"{fmt_rate(runner['rate'])}, {runner['cpu_us']:.1f} µs CPU",
                     f"moksha-hub {fmt_rate(hub['rate'])}, {hub['cpu_us']:.1f} µs",
                     f"{runner['rate'] / hub['rate']:.2f}x the rate, "
                     f"{runner['cpu_us'] / hub['cpu_us']:.2f}x the CPU", "—", None,
                     f"{fmt_rate(runner['pub_send_rate'])} / {fmt_rate(hub['pub_send_rate'])}",
                     f"{runner['bound_by']} / {hub['bound_by']}"))
    elif runner:
        # No moksha-hub to compare with: the runner's own figures, with
        # the runner's stand-in for moksha's Consumer, and why.
        rows.append(("Moksha consumer class, K=1: fanhub runner alone (its stand-in for "
                     "moksha's `Consumer`)", "unpinned",
                     f"{fmt_rate(runner['rate'])}, {runner['cpu_us']:.1f} µs CPU",
                     "moksha-hub not measured: " + (wk.get("moksha_missing")
                                                    or "no moksha-hub rows"), "—", "—", None,
                     fmt_rate(runner["pub_send_rate"]), runner["bound_by"]))
    elif wk:
        rows.append(("Moksha consumer class against moksha-hub", "—", "not measured", "—", "—",
                     "—", None, "—", moksha.get("status") or wk.get("moksha_missing")
                     or "no moksha-hub rows"))


def _issue41_signatures(results, rows):
    import bench_signatures
    sig = results.get("signatures") or {}
    for r in sig.get("rows", []):
        if "evp_verify_ns" not in r:
            continue
        on = r["on"]
        rows.append(("Signatures: hub CPU a validated message", r["placement"],
                     fmt_us(on["cpu_per_msg_ns"]),
                     f"EVP_DigestVerify in-process {fmt_us(r['evp_verify_ns'])}",
                     f"{r['vs_evp']:.2f}x", f"≤ {bench_signatures.TARGET_VS_EVP}x",
                     r["vs_evp"] <= bench_signatures.TARGET_VS_EVP,
                     fmt_rate(on.get("pub_send_rate")), on.get("bound_by", "?")))


def _md_issue41(results, w):
    """Issue 41's rows: each path against its reference measured in the
    same run, with the publisher's rate and what bound the case."""
    rows = []
    for family in (_issue41_k1, _issue41_worker, _issue41_signatures):
        family(results, rows)
    if not rows:
        return
    w("## The paths of issue 41, each against its reference in the same run\n")
    w("*K=1*: the k1-paired case, the raw SUB and the hub back to back in each pair (the "
      "first alternating), the median of the per-pair ratios over the pairs where both "
      "were receiver-bound (min–max and how many counted beside it; no verdict unless most "
      "did). "
      "*Python*: the worker case, `workers: 1` and `2` interleaved rep by rep; CPU of the "
      "hub (its CPU clock) and of its worker processes (/proc/PID/stat). *Signatures*: hub "
      "CPU a message with validation on, against evp_verify (OpenSSL's EVP_DigestVerify of "
      "the same message, timed in-process, once a repetition). A case bound by its "
      "publisher gets no verdict.\n")
    if "k1_paired" not in results:
        w("K=1 against the raw SUB: not measured in this run (the k1-paired case).\n")
    w("| Figure | Placement | Measured | Reference | Ratio | Target | Met? | publisher/s | "
      "bound by |")
    w("|---|---|---|---|---|---|---|---|---|")
    for fig, pl, val, ref, ratio, target, met, pub, bound in rows:
        verdict = "n/a" if met is None else ("yes" if met else "**no**")
        w(f"| {fig} | {pl} | {val} | {ref} | {ratio} | {target} | {verdict} | {pub} | "
          f"{bound} |")
    w("")


def _md_k1_paired(results, w):
    """K=1 against the raw SUB, pair by pair."""
    import bench_k1
    bench_k1.markdown(results, w)


def _md_throughput(results, w):
    """Throughput and fan-in (eight publishers)."""
    tp = results.get("throughput")
    if tp:
        w("## Throughput (full speed, K null consumers)\n")
        w("*publisher/s*: bench_pub's own send rate (first to last send). *in/s*: messages "
          "sent per second of wall time from the first send to the last delivery (raw: last "
          "receipt). *bound by*: receiver when the publisher offered at least "
          f"{BOUND_MARGIN}x what the receiver took, else publisher; a publisher-bound case, "
          "or one whose raw baseline is, gets no ratio (—). *CPU/delivery*: hub process CPU "
          "time (all threads) over deliveries; raw: subscriber process CPU per message.\n")
        throughput_table(w, tp)
    fi = results.get("fanin")
    if fi:
        w("## Eight publishers at once (100 B)\n")
        w("bench_pub with 8 connections (a thread and an XPUB socket each), K=1.\n")
        throughput_table(w, fi)


def _md_latency(results, w):
    """Latency percentiles against raw at each rate."""
    lat = results.get("latency")
    if lat:
        w("## Latency (publish → consume start, 100 B, fixed rate)\n")
        w("Hub: K latency plugins, all deliveries merged; raw: bench_raw at the same rate. "
          "*ctx sw/msg*: context switches of all the process's threads per message "
          "published.\n")
        w("| Placement | Rate | Case | p50 | p99 | p99.9 | max | p99 vs raw | ctx sw/msg |")
        w("|---|---|---|---|---|---|---|---|---|")
        for r in lat:
            raw = find(lat, kind="raw", rate=r["rate"], placement=r["placement"])
            case = "raw libzmq SUB" if r["kind"] == "raw" else f"hub K={r['k']}"
            w(f"| {r['placement']} | {r['rate']:,}/s | {case} | {fmt_us(r['p50_ns'])} | "
              f"{fmt_us(r['p99_ns'])} | {fmt_us(r['p999_ns'])} | {fmt_us(r['max_ns'])} | "
              f"{r['p99_ns']/raw['p99_ns']:.2f}x | {_fmt_ctx(r.get('ctx_per_msg'))} |")
        w("")


def _md_routing(results, w):
    """Topic routing: 100 consumers against 3 without topics."""
    rt = results.get("routing")
    if rt:
        w("## Topic routing at scale\n")
        w("100 consumers, one pattern each (40 prefixes `org.bench.sNN.`, 50 globs "
          "`org.bench.*.evB.kC`, 10 globs `*.evB.*`), 2,000 topics, each message matching "
          "exactly 3. Reference: the same messages to 3 consumers without topics (the same "
          "deliveries, no routing).\n")
        w("| Placement | Case | in/s | deliveries/s | hub CPU/msg | hub CPU/delivery | "
          "ctx sw/msg | loss | dropped |")
        w("|---|---|---|---|---|---|---|---|---|")
        for r in rt:
            for name, x in (("100 consumers, 3 match", r), ("3 consumers, no topics",
                                                            r.get("reference_k3"))):
                if not x:
                    continue
                w(f"| {r['placement']} | {name} | {fmt_rate(x['in_rate'])} | "
                  f"{fmt_rate(x['deliveries_rate'])} | {fmt_ns(x['cpu_per_msg_ns'])} | "
                  f"{fmt_ns(x['cpu_per_delivery_ns'])} | {_fmt_ctx(x.get('ctx_per_msg'))} | "
                  f"{x['loss']} | {x['dropped']} |")
        w("")


def _md_scale(results, w):
    """Many consumers, and fanhub check of 20,000."""
    sc = results.get("scale")
    if sc:
        w("## Many consumers on few cores\n")
        w("Null consumers with the default queue capacity (100,000). *idle*: RSS once the "
          "hub answers; *after*: once every message was delivered. *broadcast*: every "
          "message to every consumer. *routed*: each consumer has one prefix shared by 3, "
          "each message matches 3; against the same messages to 3 consumers without "
          "topics.\n")
        w("| Placement | Consumers | Threads | RSS idle | Case | messages | deliveries/s | "
          "CPU/delivery | ctx sw/delivery | RSS after | loss | dropped |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in sc:
            for name, x in (("broadcast", r["broadcast"]), ("routed, 3 match", r["routed"]),
                            ("3 consumers, no topics", r["reference_k3"])):
                w(f"| {r['placement']} | {x['k']:,} | {x.get('threads', 0):,} | "
                  f"{x['rss_idle']/2**20:,.0f} MiB | {name} | {x['n']:,} | "
                  f"{fmt_rate(x['deliveries_rate'])} | {fmt_ns(x['cpu_per_delivery_ns'])} | "
                  f"{_fmt_ctx(x.get('ctx_per_delivery'))} | {x['rss_after']/2**20:,.0f} MiB | "
                  f"{x['loss']} | {x['dropped']} |")
            w(f"\n{r['placement']}: routed CPU/delivery is x{r['cost_vs_unrouted']:.2f} that of "
              "3 unrouted consumers.\n")
    ck = results.get("check")
    if ck:
        ok = ck["accepted"]
        w(f"`fanhub check` of {ck['consumers']:,} null consumers: refused (a hub runs at most "
          f"{ok['consumers']:,}) in {ck['wall_s']:.2f} s wall, {ck['cpu_s']:.2f} s CPU, peak RSS "
          f"{ck['max_rss']/2**20:,.0f} MiB. Of {ok['consumers']:,}: checked in "
          f"{ok['wall_s']:.2f} s wall, {ok['cpu_s']:.2f} s CPU, peak RSS "
          f"{ok['max_rss']/2**20:,.0f} MiB.\n")


def _md_metrics(results, w):
    """What STATS scraping and the collectd push cost."""
    mt = results.get("metrics")
    if mt:
        w("## Metrics cost (K=4, 100 B, full speed)\n")
        w("The cost is the median of each repetition's pair (off, then on, back to back); the "
          "control thread's share of the hub's CPU is what serving the scrapes took.\n")
        w("| Placement | off: deliveries/s | STATS at 10 Hz | cost (each pair) | "
          "CPU/delivery off → on | control thread, of the hub's CPU (unscraped) |"
          + (" collectd push | cost |" if any("collectd" in r for r in mt) else ""))
        w("|---|---|---|---|---|---|" + ("---|---|" if any("collectd" in r for r in mt) else ""))
        for r in mt:
            line = (f"| {r['placement']} | {fmt_rate(r['off']['deliveries_rate'])} | "
                    f"{fmt_rate(r['scrape10hz']['deliveries_rate'])} | {r['cost']*100:+.1f} %"
                    + (f" ({', '.join(f'{c*100:+.1f}' for c in r['cost_pairs'])})"
                       if "cost_pairs" in r else "")
                    + f" | {fmt_ns(r['off']['cpu_per_delivery_ns'])} → "
                    f"{fmt_ns(r['scrape10hz']['cpu_per_delivery_ns'])} | "
                    + (f"{r['control_share']*100:.2f} % ({r['control_share_off']*100:.2f} %) |"
                       if "control_share" in r else "— |"))
            if "collectd" in r:
                line += (f" {fmt_rate(r['collectd']['deliveries_rate'])} | "
                         f"{r['collectd_cost']*100:+.1f} % |")
            w(line)
        w(f"\ncollectd push: {results.get('collectd_push', 'not run')}.\n")


def _md_memory(results, w):
    """RSS against the payload queued."""
    mem = results.get("memory")
    if mem:
        w("## Memory (consumers held, 1 KiB bodies queued)\n")
        w("| Placement | Consumers | Queued each | RSS | RSS idle | unique payload | "
          "RSS / payload | limit (1.3x + 64 MiB) |")
        w("|---|---|---|---|---|---|---|---|")
        for r in mem:
            w(f"| {r['placement']} | {r['k']} | {r['queued']:,.0f} | {r['rss']/2**20:,.0f} MiB | "
              f"{r['rss_idle']/2**20:,.0f} MiB | {r['payload']/2**20:,.0f} MiB | "
              f"{r['ratio']:.2f} | {r['limit']/2**20:,.0f} MiB |")
        w("")


def _md_neighbour(results, w):
    """The log consumer beside a spilling neighbour."""
    nb = results.get("neighbour")
    if nb:
        w("## A spilling neighbour (spool.fsync: always)\n")
        w(f"- {nb['status']}")
        for r in nb.get("rows", []):
            w(f"  - {r['placement']}: the log consumer alone "
              f"{fmt_rate(r['alone']['deliveries_rate'])}, beside a held consumer that spills "
              f"{fmt_rate(r['beside_spill']['deliveries_rate'])}: x{r['ratio']:.2f} "
              f"(hub CPU/msg {fmt_ns(r['alone']['cpu_per_msg_ns'])} → "
              f"{fmt_ns(r['beside_spill']['cpu_per_msg_ns'])})")
            refusing = r.get("beside_refusing")
            if not refusing:
                continue  # a run from before the yardsticks
            w(f"    - beside the same held consumer with `overflow: drop-newest` (it only "
              f"refuses): {fmt_rate(refusing['deliveries_rate'])}, x{r['refusing_ratio']:.2f} "
              f"(hub CPU/msg {fmt_ns(refusing['cpu_per_msg_ns'])})")
            f = r.get("floor")
            w(f"    - the hub alone was {r['busy']:.2f} CPUs busy, so "
              f"{TARGETS['neighbour']}x leaves the spill {fmt_ns(r['budget_ns'])} of CPU a "
              f"message (binding when the hub has one CPU), {fmt_ns(r['left_ns'])} once "
              f"the refusing neighbour's {fmt_ns(r['refusal_ns'])} is taken; the spill added "
              f"{fmt_ns(r['added_ns'])}. The spool's own work on one CPU, nothing in the way "
              + (f"(spill_floor, passes of {f['pass']:,} records of {f['record_bytes']} B): "
                 f"{fmt_ns(f['spill_ns'])} a message (reading its frames and append; append "
                 f"{fmt_ns(f['append_ns'])}; the kernel's write and fdatasync of as many bytes "
                 f"alone {fmt_ns(f['io_ns'])}); releasing it, which its last holder pays "
                 f"anyway, {fmt_ns(f['release_ns'])}" if f else "(spill_floor): not measured"))
        w("")


def _md_curve(results, w):
    """CURVE against plaintext."""
    cv = results.get("curve")
    if cv:
        w("## CURVE against plaintext (hub K=1, one null consumer)\n")
        if cv.get("rows"):
            w("*hub busy*: hub CPU time over the run's wall time, in CPUs. Pinned, the "
              "hub has one CPU: near 1, the hub was the bottleneck, not the encryption "
              "in the publisher's I/O thread (which bench_pub's own rate does not "
              "time).\n")
            w("| Placement | Body | Bus | publisher/s | in/s | bound by | hub CPU/msg | "
              "hub busy | loss | dropped |")
            w("|---|---|---|---|---|---|---|---|---|---|")
            for r in cv["rows"]:
                for bus in ("plaintext", "curve"):
                    x = r[bus]
                    w(f"| {r['placement']} | {r['size']} B | {bus} | "
                      f"{fmt_rate(x.get('pub_send_rate'))} | {fmt_rate(x['in_rate'])} | "
                      f"{x.get('bound_by', '?')} | {fmt_ns(x['cpu_per_msg_ns'])} | "
                      f"{x['hub_cpu_s'] / x['wall_s']:.2f} | {x['loss']} | {x['dropped']} |")
                w(f"| {r['placement']} | {r['size']} B | CURVE/plaintext | | "
                  f"{r['in_ratio']:.2f}x | | {r['cpu_ratio']:.2f}x | | | |")
            w("")
        else:
            w(f"- {cv['status']}\n")


def _md_modules(results, w):
    """The sections of the cases that write their own."""
    import bench_amqp
    bench_amqp.markdown(results, w)
    import bench_cluster
    bench_cluster.markdown(results, w)
    import bench_worker
    bench_worker.markdown(results, w)


def _md_spill_pool(results, w):
    """Spill and the ordered pool."""
    w("## Spill and ordered pool\n")
    for name in ("spill", "pool"):
        entry = results.get(name, {"status": "not run"})
        w(f"- {name}: {entry['status']}")
        for r in entry.get("rows", []):
            if name == "pool":
                w(f"  - {r['placement']}: workers 8 {fmt_rate(r['w8']['deliveries_rate'])} "
                  f"({r['w8']['n']:,} msgs), workers 1 {fmt_rate(r['w1']['deliveries_rate'])} "
                  f"({r['w1']['n']:,} msgs) over {r['keys']:,} keys: x{r['speedup']:.2f}; "
                  f"loss {r['w8']['loss']}/{r['w1']['loss']}")
            else:
                w(f"  - {r['placement']}: in {fmt_rate(r['in_rate'])} while spilling "
                  f"({r['spilled']:,.0f} spilled), drain {fmt_rate(r['drain_rate'])}, "
                  f"loss {r['loss']}, dropped {r['dropped']}")
    w("")


def _md_callgrind(results, w):
    """Instructions per delivery."""
    cg = results.get("callgrind", {})
    w("## Instructions per delivery (callgrind)\n")
    if cg.get("status") == "measured":
        w("The hub under `valgrind --tool=callgrind`, counters zeroed once it is up, null "
          "consumers, 100 B bodies at full speed: every instruction of every hub thread "
          "(libzmq's I/O thread included) over the deliveries.\n")
        w("*routing*: the routing case (100 consumers, 3 match); *unrouted3*: the same "
          "messages to 3 consumers without topics; *scale*: 1,000 consumers, 3 match.\n")
        w("| Case | Consumers | Messages | Ir total | Ir / message | Ir / delivery |")
        w("|---|---|---|---|---|---|")
        for r in cg["rows"]:
            w(f"| {r.get('name', 'k' + str(r['k']))} | {r['k']:,} | {r['n']:,} | {r['ir']:,.0f} | "
              f"{r['ir_per_msg']:,.0f} | {r['ir_per_delivery']:,.0f} |")
        unrouted = find(cg["rows"], name="unrouted3")
        for label in ("routing", "scale"):
            r = find(cg["rows"], name=label)
            if r and unrouted:
                w(f"\n{label}: x{r['ir_per_delivery'] / unrouted['ir_per_delivery']:.2f} the "
                  "instructions per delivery of 3 unrouted consumers.")
    else:
        w(cg.get("status", "not run"))
    w("")


def _md_signatures(results, w):
    """Signatures on against off."""
    if results.get("signatures"):
        import bench_signatures
        for line in bench_signatures.markdown(results["signatures"]):
            w(line)


MARKDOWN_SECTIONS = (_md_header, _md_targets, _md_issue41, _md_k1_paired, _md_throughput, _md_latency, _md_routing, _md_scale, _md_metrics, _md_memory, _md_neighbour, _md_curve, _md_modules, _md_spill_pool, _md_callgrind, _md_signatures)


def markdown(results):
    """results.md of a run: each section in turn (a case not run writes
    nothing, or says why)."""
    out = []
    for section in MARKDOWN_SECTIONS:
        section(results, out.append)
    return "\n".join(out)

def charts(results, outdir):
    if not shutil.which("gnuplot"):
        log("gnuplot not found: no charts")
        return
    tp = results.get("throughput", [])
    if tp:
        cases = ["raw"] + [f"K={k}" for k in sorted({r["k"] for r in tp if r["kind"] == "hub"})]
        series = [(pl, size) for pl in results["placements"]
                  for size in sorted({r["size"] for r in tp})]
        data = os.path.join(outdir, "throughput.dat")
        with open(data, "w") as f:
            f.write("case " + " ".join(f'"{pl} {size}B"' for pl, size in series) + "\n")
            for case in cases:
                vals = []
                for pl, size in series:
                    if case == "raw":
                        r = find(tp, kind="raw", size=size, placement=pl)
                        vals.append(r["rate"] / 1e6 if r else 0)
                    else:
                        r = find(tp, kind="hub", k=int(case[2:]), size=size, placement=pl)
                        vals.append(r["deliveries_rate"] / 1e6 if r else 0)
                f.write(f'"{case}" ' + " ".join(f"{v:.4f}" for v in vals) + "\n")
        script = f"""
set terminal pngcairo size 900,500 noenhanced
set output '{outdir}/throughput.png'
set title 'fanhub throughput: deliveries/s (raw: msg/s), median of {results["reps"]}'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel 'million deliveries / s'
set yrange [0:*]
set grid ytics
set key top right
plot '{data}' using 2:xtic(1) title columnheader(2)""" + "".join(
            f", '' using {i + 2} title columnheader({i + 2})" for i in range(1, len(series)))
        _gnuplot(script, outdir, "throughput")
    lat = results.get("latency", [])
    if lat:
        data = os.path.join(outdir, "latency.dat")
        keys = []
        with open(data, "w") as f:
            for pl in results["placements"]:
                for kind, k in [("raw", 0)] + [("hub", k) for k in
                                               sorted({r["k"] for r in lat if r["kind"] == "hub"})]:
                    rows = sorted((r for r in lat if r["kind"] == kind and r["k"] == k
                                   and r["placement"] == pl), key=lambda r: r["rate"])
                    if not rows:
                        continue
                    keys.append(f"{'raw' if kind == 'raw' else f'hub K={k}'} {pl}")
                    f.write(f"# {keys[-1]}\n")
                    for r in rows:
                        f.write(f"{r['rate']} {r['p50_ns']/1e3:.3f} {r['p99_ns']/1e3:.3f} "
                                f"{r['p999_ns']/1e3:.3f}\n")
                    f.write("\n\n")
        plots = []
        for col, name in ((2, "p50"), (3, "p99")):
            parts = [f"'{data}' index {i} using 1:{col} with linespoints title '{key}'"
                     for i, key in enumerate(keys)]
            plots.append(f"set title 'publish -> consume start, {name}'\nplot " + ", ".join(parts))
        script = f"""
set terminal pngcairo size 1100,500 noenhanced
set output '{outdir}/latency.png'
set multiplot layout 1,2
set logscale xy
set xlabel 'rate (msg/s)'
set ylabel 'latency (µs)'
set grid
set key top left
""" + "\n".join(plots) + "\nunset multiplot\n"
        _gnuplot(script, outdir, "latency")


# ---------------------------------------------------------------------------
# Comparing two runs

def load_results(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"bench: --compare: {path}: {e}")


def figures(results):
    """The comparable figures of one run: {(section, case, figure): (value,
    higher_is_better)}."""
    out = {}

    def put(section, case, name, value, higher):
        if isinstance(value, (int, float)):
            out[(section, case, name)] = (float(value), higher)

    for r in results.get("throughput", []) + results.get("fanin", []):
        conns = f", {r.get('connections', 1)} pubs" if r.get("connections", 1) > 1 else ""
        case = (f"{r['placement']} {r['size']} B "
                + ("raw" if r["kind"] == "raw" else f"hub K={r['k']}") + conns)
        if r["kind"] == "raw":
            put("throughput", case, "msg/s", r.get("rate"), True)
            put("throughput", case, "CPU ns/msg", r.get("cpu_per_msg_ns"), False)
        else:
            put("throughput", case, "in/s", r.get("in_rate"), True)
            put("throughput", case, "deliveries/s", r.get("deliveries_rate"), True)
            put("throughput", case, "CPU ns/delivery", r.get("cpu_per_delivery_ns"), False)
        put("throughput", case, "publisher/s", r.get("pub_send_rate"), True)
        put("throughput", case, "ctx sw/msg", r.get("ctx_per_msg"), False)
    for r in results.get("latency", []):
        case = (f"{r['placement']} {r['rate']:,}/s "
                + ("raw" if r["kind"] == "raw" else f"hub K={r['k']}"))
        put("latency", case, "p50 ns", r.get("p50_ns"), False)
        put("latency", case, "p99 ns", r.get("p99_ns"), False)
        put("latency", case, "ctx sw/msg", r.get("ctx_per_msg"), False)
    for r in results.get("routing", []):
        put("routing", r["placement"], "CPU ns/delivery", r.get("cpu_per_delivery_ns"), False)
        put("routing", r["placement"], "x of 3 unrouted", r.get("cost_vs_unrouted"), False)
    for r in results.get("scale", []):
        pl = r["placement"]
        put("scale", pl, "RSS idle", r["broadcast"].get("rss_idle"), False)
        put("scale", pl, "RSS after broadcast", r["broadcast"].get("rss_after"), False)
        put("scale", pl, "broadcast deliveries/s", r["broadcast"].get("deliveries_rate"), True)
        put("scale", pl, "broadcast CPU ns/delivery", r["broadcast"].get("cpu_per_delivery_ns"),
            False)
        put("scale", pl, "routed x of 3 unrouted", r.get("cost_vs_unrouted"), False)
    if results.get("check"):
        put("check", "20k consumers (refused)", "wall s", results["check"].get("wall_s"), False)
        put("check", "20k consumers (refused)", "max RSS", results["check"].get("max_rss"),
            False)
        ok = results["check"].get("accepted", {})
        put("check", "1,024 consumers", "wall s", ok.get("wall_s"), False)
        put("check", "1,024 consumers", "max RSS", ok.get("max_rss"), False)
    for r in results.get("neighbour", {}).get("rows", []):
        put("neighbour", r["placement"], "x of alone", r.get("ratio"), True)
    for r in results.get("curve", {}).get("rows", []):
        for bus in ("plaintext", "curve"):
            case = f"{r['placement']} {r['size']} B {bus}"
            put("curve", case, "in/s", r[bus].get("in_rate"), True)
            put("curve", case, "hub CPU ns/msg", r[bus].get("cpu_per_msg_ns"), False)
            put("curve", case, "publisher/s", r[bus].get("pub_send_rate"), True)
        case = f"{r['placement']} {r['size']} B"
        put("curve", case, "CURVE/plaintext in/s", r.get("in_ratio"), True)
        put("curve", case, "CURVE/plaintext CPU/msg", r.get("cpu_ratio"), False)
    for r in results.get("memory", []):
        put("memory", f"{r['placement']} K={r['k']}", "RSS", r.get("rss"), False)
    import bench_k1
    bench_k1.figures(results, put)
    for r in results.get("callgrind", {}).get("rows", []):
        put("callgrind", r.get("name", f"k{r['k']}"), "Ir/delivery", r.get("ir_per_delivery"),
            False)
    return out


def compare(old, new):
    a, b = figures(old), figures(new)
    lines = [f"# Comparison: {old.get('git', '?')} ({old.get('started', '?')}) → "
             f"{new.get('git', '?')} ({new.get('started', '?')})", ""]
    for label, run in (("old", old), ("new", new)):
        m = run.get("machine", {})
        lines.append(f"- {label}: git {run.get('git_commit') or run.get('git', '?')}, "
                     f"{m.get('nproc', '?')} CPUs, {m.get('cpu', '?')}, Linux "
                     f"{m.get('kernel', '?')}, libzmq {m.get('libzmq', '?')}")
    if old.get("machine") != new.get("machine"):
        lines.append("- **the machines differ**: compare ratios within each run, not these")
    lines += ["", "*new/old* above 1 is more of the figure; *better* says whether that is "
              "good for it.", "", "| Section | Case | Figure | old | new | new/old | better? |",
              "|---|---|---|---|---|---|---|"]
    for key in sorted(set(a) & set(b)):
        (va, higher), (vb, _) = a[key], b[key]
        if va == 0:
            continue
        ratio = vb / va
        better = "=" if abs(ratio - 1) < 0.02 else ("yes" if (ratio > 1) == higher else "no")
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {va:,.4g} | {vb:,.4g} | "
                     f"{ratio:.2f} | {better} |")
    only = sorted(set(a) ^ set(b))
    if only:
        lines += ["", f"{len(only)} figures are in one run only (cases not run in both)."]
    return "\n".join(lines) + "\n"


def _gnuplot(script, outdir, name):
    path = os.path.join(outdir, f"{name}.gp")
    with open(path, "w") as f:
        f.write(script)
    p = subprocess.run(["gnuplot", path], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        log(f"gnuplot {name}: {p.stderr.strip()}")
