"""bench_callgrind.py - the benchmark's instruction-level cases (bench.py --cases
callgrind, profile): the hub under valgrind --tool=callgrind, Ir per
delivery for K null consumers, routing and scale; and, only when asked
for, a perf cpu-clock profile of the K=1 and K=4 throughput cases.
"""
import os
import re
import shutil
import subprocess

b = None  # the bench module (bench.py), set by its case_function


def callgrind_run(bench, k, n, outdir, consumers=None, topics_file=None, deliveries=None,
                  name=None, subscriptions=1):
    """The hub under callgrind: counters zeroed once it answers, dumped once
    the n messages are delivered. Returns Ir per delivery. By default K
    null consumers, each getting every message."""
    name = name or f"k{k}"
    deliveries = deliveries or n * k
    cgout = bench.path(f"callgrind.out.{name}")
    base = os.path.basename(cgout)
    vg = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={cgout}",
          "--dump-instr=no", "--separate-threads=no", "--max-threads=4000"]
    # 1,000 consumers start 1,000 threads under valgrind: on a busy 2-CPU
    # machine that took more than 120 s.
    hub = b.Hub(bench, consumers or b.null_consumers(k, n + 1024), valgrind=vg,
              ready_timeout=600)
    try:
        subprocess.run(["callgrind_control", "-z", str(hub.pid)], capture_output=True,
                       timeout=60, check=True)
        b.blast(bench, hub.bus, n, size=100, topics_file=topics_file, deadline_s=600,
              subscriptions=subscriptions)

        def done(s):
            return (s["hub"]["received"] >= n
                    and sum(c["completed"] for c in s["consumers"]) >= deliveries)

        # STATS would count too (with 1,000 consumers it costs more than the
        # deliveries): wait for a quiet CPU clock, dump, then check.
        for _ in range(20):
            hub.wait_idle(600)
            subprocess.run(["callgrind_control", "-d", str(hub.pid)], capture_output=True,
                           timeout=120, check=True)
            if done(hub.stats(timeout_ms=60_000)):
                break
        else:
            raise b.BenchError("callgrind: the hub went quiet before delivering everything")
    finally:
        hub.stop(timeout=60)
    # Dumps asked for are base.1, base.2, ... (counters restart at each):
    # the sum of them is the run; the one without a suffix is at exit.
    asked = sorted((f for f in os.listdir(bench.tmp)
                    if f.startswith(base + ".") and f[len(base) + 1:].isdigit()),
                   key=lambda f: int(f[len(base) + 1:]))
    if not asked:
        raise b.BenchError("callgrind: no dump")
    path = os.path.join(bench.tmp, asked[0])
    total = 0
    for dump in asked:
        with open(os.path.join(bench.tmp, dump)) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    total += int(line.split()[1])
                    break
    with open(os.path.join(outdir, f"callgrind-{name}.txt"), "w") as f:
        f.write(callgrind_report(path, total, deliveries))
    shutil.copy(path, os.path.join(outdir, f"callgrind.out.{name}"))
    return dict(k=k, n=n, ir=total, deliveries=deliveries, ir_per_delivery=total / deliveries,
                ir_per_msg=total / n, name=name)


def callgrind_self_costs(path):
    """Self cost (Ir) per (object, function) of a callgrind out file: every
    cost line but those right after a calls= line (those are inclusive
    costs of the call)."""
    names = {"ob": {}, "fn": {}}
    ob = fn = "?"
    costs = {}
    after_call = False
    name_re = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def resolve(kind, value):
        m = name_re.match(value)
        if not m:
            return value
        if m.group(2) is not None:
            names[kind][m.group(1)] = m.group(2)
        return names[kind].get(m.group(1), value)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                if len(parts) >= 2 and not after_call:
                    costs[(ob, fn)] = costs.get((ob, fn), 0) + int(parts[1])
                after_call = False
                continue
            key, _, value = line.partition("=")
            if key == "ob":
                ob = resolve("ob", value)
            elif key == "fn":
                fn = resolve("fn", value)
            elif key == "cob":
                resolve("ob", value)
            elif key == "cfn":
                resolve("fn", value)
            elif key == "calls":
                after_call = True
    return costs


def callgrind_report(path, total, deliveries):
    costs = callgrind_self_costs(path)
    by_ob = {}
    for (ob, fn), c in costs.items():
        by_ob[os.path.basename(ob)] = by_ob.get(os.path.basename(ob), 0) + c
    lines = [f"callgrind: {path}", f"total Ir {total:,}, deliveries {deliveries:,}, "
             f"Ir/delivery {total / deliveries:,.0f}", "", "Self cost by object:"]
    for ob, c in sorted(by_ob.items(), key=lambda x: -x[1]):
        if c * 1000 >= total:
            lines.append(f"  {c * 100 / total:5.1f} %  {c / deliveries:8.0f} Ir/delivery  {ob}")
    lines += ["", "Top functions by self cost:"]
    for (ob, fn), c in sorted(costs.items(), key=lambda x: -x[1])[:40]:
        lines.append(f"  {c * 100 / total:5.1f} %  {c / deliveries:8.0f} Ir/delivery  {fn}  "
                     f"[{os.path.basename(ob)}]")
    return "\n".join(lines) + "\n"


def case_callgrind(bench, prof, results, outdir):
    if not shutil.which("valgrind") or not shutil.which("callgrind_control"):
        results["callgrind"] = {"status": "not measured: valgrind is not installed"}
        return
    rows = []
    n = prof["cg_n"]
    routed, topics, count = b.routing_setup(bench, n + 1024)
    scale, scale_topics, scale_subs = b.scale_setup(bench, prof["scale_consumers"], routed=True)
    # (label, k, extra arguments): K null consumers; the routing case and
    # its unrouted reference; 3 of 1,000 matching.
    variants = [(f"k{k}", k, {}) for k in prof["cg_ks"]] + [
        ("routing", count, dict(consumers=routed, topics_file=topics, deliveries=3 * n)),
        ("unrouted3", 3, dict(topics_file=topics)),
        ("scale", prof["scale_consumers"], dict(consumers=scale, topics_file=scale_topics,
                                                deliveries=3 * n, subscriptions=scale_subs)),
    ]
    for name, k, extra in variants:
        runs = [b.retry(callgrind_run, bench, k, n, outdir, name=name, **extra)
                for _ in range(prof["cg_reps"])]
        r = b.rep_median(runs, ["ir", "ir_per_delivery", "ir_per_msg"])
        rows.append(r)
        b.log(f"callgrind {name}: {r['ir_per_delivery']:,.0f} Ir per delivery "
            f"({r['ir_per_msg']:,.0f} per message; runs "
            + ", ".join(f"{x['ir_per_delivery']:,.0f}" for x in runs) + ")")
    results["callgrind"] = {"status": "measured", "rows": rows}


def case_profile(bench, prof, results, outdir):
    """Not in the default run: wall-clock profile (perf, cpu-clock sampling:
    kernel time included) of the hub in the K=1 and K=4 throughput cases,
    pinned. The instruction-level profile is the callgrind case."""
    if not shutil.which("perf"):
        results["profile"] = {"status": "not measured: perf is not installed"}
        return
    placement = bench.placements[0]
    rows = []
    for k in (1, 4):
        data = os.path.join(bench.tmp, f"perf.k{k}")
        r = b.hub_throughput(bench, k, 100, prof["tp_n"], placement, perf_data=data)
        report = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                 "--sort", "dso,sym", "-g", "none", "--percent-limit", "0.3"],
                                capture_output=True, text=True, timeout=300).stdout
        by_dso = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio",
                                 "--sort", "dso", "-g", "none"],
                                capture_output=True, text=True, timeout=300).stdout
        with open(os.path.join(outdir, f"perf-k{k}.txt"), "w") as f:
            f.write(f"# hub K={k}, {placement[0]}, {prof['tp_n']:,} x 100 B: "
                    f"{r['deliveries_rate']:,.0f} deliveries/s, "
                    f"{r['cpu_per_delivery_ns']:.0f} ns CPU/delivery\n")
            f.write(by_dso + "\n" + report)
        rows.append(dict(k=k, deliveries_rate=r["deliveries_rate"],
                         cpu_per_delivery_ns=r["cpu_per_delivery_ns"]))
        b.log(f"profile K={k}: {outdir}/perf-k{k}.txt")
    results["profile"] = {"status": "measured", "rows": rows}
