"""bench_throughput.py - the benchmark's core cases (bench.py --cases
throughput, fanin, latency): the hub against raw libzmq at full speed for
K null consumers and body sizes, with eight publishers at once, and the
latency percentiles at fixed rates.
"""

b = None  # the bench module (bench.py), set by the case entry


def case_throughput(bench, prof, results):
    out = results.setdefault("throughput", [])
    for placement in bench.placements:
        for size in prof["tp_sizes"]:
            n = b.tp_count(prof, size)
            runs = [b.retry(b.raw_run, bench, n, size, placement)
                    for _ in range(prof["reps"])]
            r = b.rep_median(runs, b.TP_KEYS)
            r.update(kind="raw", k=0, size=size, placement=placement[0], n=n)
            for key in ("buckets",):
                r.pop(key, None)
            out.append(r)
            b.log(f"throughput raw {placement[0]} {size} B: {r['rate']:,.0f} msg/s, "
                f"{r['cpu_per_msg_ns']:.0f} ns CPU/msg; publisher {r['pub_send_rate']:,.0f}/s "
                f"({r['bound_by']}-bound)")
            for k in prof["tp_ks"]:
                runs = [b.retry(b.hub_throughput, bench, k, size, n, placement)
                        for _ in range(prof["reps"])]
                r = b.rep_median(runs, b.TP_KEYS)
                r.update(kind="hub", loss=max(x["loss"] for x in runs),
                         dropped=max(x["dropped"] for x in runs))
                out.append(r)
                b.log(f"throughput hub K={k} {placement[0]} {size} B: in {r['in_rate']:,.0f}/s, "
                    f"deliveries {r['deliveries_rate']:,.0f}/s, "
                    f"{r['cpu_per_delivery_ns']:.0f} ns CPU/delivery, loss {r['loss']}, "
                    f"dropped {r['dropped']}; publisher {r['pub_send_rate']:,.0f}/s "
                    f"({r['bound_by']}-bound)")


def case_latency(bench, prof, results):
    out = results.setdefault("latency", [])
    for placement in bench.placements:
        for rate, seconds in prof["lat_rates"]:
            n = int(rate * seconds)
            runs = [b.retry(b.raw_run, bench, n, 100, placement, rate=rate)
                    for _ in range(prof["reps"])]
            r = b.rep_median(runs, b.LAT_KEYS)
            r = {key: r[key] for key in b.LAT_KEYS + ["runs", "reps"]}
            r.update(kind="raw", k=0, rate=rate, n=n, placement=placement[0])
            out.append(r)
            b.log(f"latency raw {placement[0]} {rate}/s: p50 {r['p50_ns']/1e3:.1f} us, "
                f"p99 {r['p99_ns']/1e3:.1f} us, max {r['max_ns']/1e3:.0f} us")
            for k in prof["lat_ks"]:
                runs = [b.retry(b.hub_latency, bench, k, rate, n, placement)
                        for _ in range(prof["reps"])]
                r = b.rep_median(runs, b.LAT_KEYS)
                r.update(kind="hub", dropped=max(x["dropped"] for x in runs))
                out.append(r)
                b.log(f"latency hub K={k} {placement[0]} {rate}/s: p50 {r['p50_ns']/1e3:.1f} us, "
                    f"p99 {r['p99_ns']/1e3:.1f} us, max {r['max_ns']/1e3:.0f} us")


def case_fanin(bench, prof, results):
    """8 publishers at once: bench_pub with 8 connections (a thread and an
    XPUB socket each) into the raw SUB and into the hub, K=1."""
    out = results.setdefault("fanin", [])
    n = prof["fanin_n"]
    for placement in bench.placements:
        raws = [b.retry(b.raw_run, bench, n, 100, placement, connections=8)
                for _ in range(prof["reps"])]
        raw = b.rep_median(raws, b.TP_KEYS)
        raw.update(kind="raw", k=0, size=100, placement=placement[0], n=n, connections=8)
        raw.pop("buckets", None)
        hubs = [b.retry(b.hub_throughput, bench, 1, 100, n, placement, connections=8)
                for _ in range(prof["reps"])]
        hub = b.rep_median(hubs, b.TP_KEYS)
        hub.update(kind="hub", loss=max(x["loss"] for x in hubs),
                   dropped=max(x["dropped"] for x in hubs))
        out.extend([raw, hub])
        b.log(f"fanin {placement[0]}: raw {raw['rate']:,.0f}/s ({raw['bound_by']}-bound), "
            f"hub K=1 {hub['in_rate']:,.0f}/s ({hub['bound_by']}-bound), "
            f"{hub['cpu_per_delivery_ns']:.0f} ns CPU/delivery")
