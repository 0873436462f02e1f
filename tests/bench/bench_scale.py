"""bench_scale.py - the benchmark's scale cases (bench.py --cases routing,
scale, check): topic routing to 100 consumers against 3 without topics,
1,000 consumers on few cores (idle RSS, broadcast, routed), and
fanhub check of 20,000 consumers and of the most a hub runs.
"""
import os
import subprocess
import time

b = None  # the bench module (bench.py), set by the case entry


def case_routing(bench, prof, results):
    out = results.setdefault("routing", [])
    n = prof["route_n"]
    consumers, topics, count = b.routing_setup(bench, n + 1024)
    for placement in bench.placements:
        runs = [b.retry(b.hub_throughput, bench, count, 100, n, placement, consumers=consumers,
                      topics_file=topics, expect_deliveries=3 * n)
                for _ in range(prof["reps"])]
        r = b.rep_median(runs, b.TP_KEYS)
        r.update(kind="routing", consumers=count, matches_per_msg=3,
                 loss=max(x["loss"] for x in runs), dropped=max(x["dropped"] for x in runs))
        # The same messages to 3 consumers without topics: the same deliveries,
        # no pattern to try, 3 busy threads instead of 100 mostly idle ones.
        refs = [b.retry(b.hub_throughput, bench, 3, 100, n, placement, topics_file=topics)
                for _ in range(prof["reps"])]
        r["reference_k3"] = b.rep_median(refs, b.TP_KEYS)
        r["cost_vs_unrouted"] = (r["cpu_per_delivery_ns"]
                                 / r["reference_k3"]["cpu_per_delivery_ns"])
        out.append(r)
        b.log(f"routing {placement[0]}: in {r['in_rate']:,.0f}/s, {r['cpu_per_msg_ns']:.0f} ns "
            f"hub CPU/msg ({r['deliveries']} deliveries, loss {r['loss']}); 3 consumers "
            f"without topics: {r['reference_k3']['cpu_per_msg_ns']:.0f} ns/msg")


def case_scale(bench, prof, results):
    """1,000 consumers on few cores: the idle hub's memory and threads,
    every message to every consumer (deliveries/s, CPU and context
    switches per delivery, memory after), and routing with 3 of the 1,000
    matching each message against the same messages to 3 consumers
    without topics (same deliveries, no routing)."""
    out = results.setdefault("scale", [])
    count, n = prof["scale_consumers"], prof["scale_n"]
    route_n = prof["route_n"]
    broadcast, _, _ = b.scale_setup(bench, count, routed=False)
    routed, topics, subscriptions = b.scale_setup(bench, count, routed=True)
    for placement in bench.placements:
        row = dict(placement=placement[0], consumers=count)
        runs = [b.retry(b.hub_throughput, bench, count, 100, n, placement, consumers=broadcast)
                for _ in range(prof["reps"])]
        row["broadcast"] = b.rep_median(runs, b.TP_KEYS + ["rss_idle", "rss_after"])
        runs = [b.retry(b.hub_throughput, bench, count, 100, route_n, placement, consumers=routed,
                      topics_file=topics, expect_deliveries=3 * route_n,
                      wait_subscribers=subscriptions)
                for _ in range(prof["reps"])]
        row["routed"] = b.rep_median(runs, b.TP_KEYS + ["rss_idle", "rss_after"])
        refs = [b.retry(b.hub_throughput, bench, 3, 100, route_n, placement, topics_file=topics)
                for _ in range(prof["reps"])]
        row["reference_k3"] = b.rep_median(refs, b.TP_KEYS)
        row["cost_vs_unrouted"] = (row["routed"]["cpu_per_delivery_ns"]
                                   / row["reference_k3"]["cpu_per_delivery_ns"])
        out.append(row)
        bc = row["broadcast"]
        b.log(f"scale {placement[0]}: {count} consumers idle {bc['rss_idle']/2**20:.0f} MiB "
            f"({bc['threads']} threads), after {n:,} msgs to all {bc['rss_after']/2**20:.0f} MiB; "
            f"{bc['deliveries_rate']:,.0f} deliveries/s, {bc['cpu_per_delivery_ns']:.0f} ns/delivery; "
            f"routed 3 of {count}: {row['routed']['cpu_per_delivery_ns']:.0f} ns/delivery, "
            f"x{row['cost_vs_unrouted']:.2f} of 3 unrouted")


def _check_run(bench, count):
    """fanhub check of a configuration of `count` null consumers: exit
    status, its message, wall time, CPU and peak RSS (the child's rusage)."""
    path = bench.path(f"check-{count}.yaml")
    with open(path, "w") as f:
        f.write("bus: {bind: tcp://127.0.0.1:1}\nconsumers:\n")
        for i in range(count):
            f.write(f"  - {{name: c{i:05d}, plugin: \"null\"}}\n")
    b.wait_quiet()
    t0 = time.monotonic()
    p = subprocess.Popen([bench.fanhub, "check", "-c", path], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace").strip()
    p.stderr.close()
    return dict(consumers=count, rc=os.waitstatus_to_exitcode(status), message=err[-300:],
                wall_s=wall, max_rss=usage.ru_maxrss * 1024,
                cpu_s=usage.ru_utime + usage.ru_stime)


# The most consumers one hub runs (hub/config/config.c, S_CONSUMERS_MAX).
HUB_CONSUMERS_MAX = 1024


def case_check(bench, prof, results):
    """fanhub check of 20,000 null consumers, which a hub refuses (it runs at
    most 1,024, a thread each): the refusal must come fast and small, not
    after loading 20,000 plugin instances. And check of 1,024, the most a
    hub accepts: loaded, initialised and released."""
    big = _check_run(bench, prof["check_consumers"])
    if big["rc"] != 2 or "at most" not in big["message"]:
        raise b.BenchError(f"fanhub check of {big['consumers']} consumers: expected the refusal "
                         f"(exit 2, 'at most'), got {big['rc']}: {big['message']}")
    most = _check_run(bench, HUB_CONSUMERS_MAX)
    if most["rc"] != 0:
        raise b.BenchError(f"fanhub check of {HUB_CONSUMERS_MAX} consumers failed "
                         f"({most['rc']}): {most['message']}")
    results["check"] = dict(big, accepted=most)
    b.log(f"check {big['consumers']:,} consumers: refused (exit 2) in {big['wall_s']:.2f} s, "
        f"max RSS {big['max_rss']/2**20:.0f} MiB; {most['consumers']:,} consumers: checked in "
        f"{most['wall_s']:.2f} s, max RSS {most['max_rss']/2**20:.0f} MiB")
