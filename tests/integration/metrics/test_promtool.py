"""`fanhub stats` output checked by outside tools: the Prometheus text by
Prometheus' own `promtool check metrics` (which parses it and lints it:
families grouped, HELP and TYPE once, counter names ending in _total, base
units), the collectd lines by a regular expression of collectd's PUTVAL
syntax and identifier rules.

Saved snapshots are formatted with `fanhub stats --input FILE`; one case
asks a real `fanhub run` over its control socket. promtool comes with
Debian's `prometheus` package, which scripts/deps installs; without it the
promtool cases are skipped (they fail under CI=true).
"""
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

# ---- promtool -----------------------------------------------------------------

def promtool():
    """The path of promtool; Skip when it is not installed."""
    return fh.require_tool(shutil.which("promtool"), "promtool", "prometheus")


def promtool_check(text, what):
    """promtool check metrics must accept text without a single remark."""
    proc = subprocess.run([promtool(), "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
    remarks = (proc.stdout + proc.stderr).decode(errors="replace").strip()
    assert proc.returncode == 0 and not remarks, \
        "%s: promtool check metrics exited %d:\n%s\n--- text ---\n%s" % (
            what, proc.returncode, remarks, text)


# ---- Snapshots ------------------------------------------------------------------

# The upper bounds of the histograms' buckets: 2^8 to 2^35 ns, as the le
# label writes them (and the JSON "buckets" keys).
BOUNDS = ["%.9g" % (2 ** k * 1e-9) for k in range(8, 36)]


def figures(count, base):
    if count == 0:
        return {k: 0 for k in ("count", "sum", "mean", "p50", "p90", "p99", "p999", "max")}
    # Cumulative counts at a few bounds: below base, around it, above.
    under = [b for b in BOUNDS if float(b) < base]
    over = [b for b in BOUNDS if float(b) >= base]
    buckets = {under[-1]: count // 4, over[0]: count // 2, over[2]: count - 1}
    return {"count": count, "sum": base * count * 1.3, "mean": base * 1.3, "p50": base,
            "p90": base * 2, "p99": base * 4, "p999": base * 5.1, "max": base * 5.2,
            "buckets": buckets}


def cumulative(h):
    """{le: count} of every bound and +Inf, as a histogram's samples should be."""
    given, seen, out = h.get("buckets", {}), 0, {}
    for b in BOUNDS:
        seen = min(max(seen, given.get(b, 0)), h["count"])
        out[b] = seen
    out["+Inf"] = h["count"]
    return out


def consumer(name, scale=1, wait_interval=100, proc_interval=0):
    enqueued, completed, failed = 992 * scale, 985 * scale, 4 * scale
    qw = figures(990 * scale, 0.0009)
    qw["interval"] = figures(wait_interval, 0.0008)
    pr = figures(989 * scale, 0.003)
    pr["interval"] = figures(proc_interval, 0.0125)
    return {"name": name, "plugin": "log", "capacity": 100000,
            "enqueued": enqueued, "dequeued": max(enqueued - 2, 0), "completed": completed,
            "failed": failed, "retried": 7, "dropped": 3, "spilled": 0, "dead_lettered": 1,
            "coalesced": 0, "backlog": 2, "in_flight": 1, "backlog_max": 120, "stuck": 0,
            "queue_wait": qw, "processing": pr, "evicted": 2, "spool_bytes": 4096 * scale,
            "spool_corrupt": 1, "keys_active": 3, "key_backlog_max": 5, "key_fallback": 6,
            "spool_cursor_errors": 4, "spool_fsyncs": 7, "spool_handoff": 3, "spool_lost": 5,
            "tickets_expired": 2, "completions_late": 1, "tickets_abandoned": 1,
            "queue_bytes": 1024}


def snapshot(name="buildsys", consumers=None, endpoints=None):
    return {
        "hub": {
            "name": name, "version": "0.1.0", "pid": 1234, "uptime": 12.5, "interval": 10.0,
            "received": 1000, "malformed": 3,
            "malformed_by_reason": {"no_body": 1, "too_many_frames": 0, "too_large": 2,
                                    "topic_not_utf8": 0},
            "unrouted": 5,
            "endpoints": endpoints if endpoints is not None else [
                {"endpoint": "tcp://127.0.0.1:9940", "kind": "connect", "connected": True,
                 "peers": 1},
                {"endpoint": "tcp://*:9941", "kind": "bind", "connected": False, "peers": 0}],
        },
        "consumers": consumers if consumers is not None else [consumer("archive")],
    }


def with_process(snap):
    snap["process"] = {"start_time": 1700000000.25, "cpu_seconds": 1.5,
                       "resident_memory_bytes": 10485760, "virtual_memory_bytes": 104857600,
                       "open_fds": 12, "max_fds": 1024}
    return snap


def with_completion(snap, count=990, upstream=True):
    """The snapshot with hub.handled and end_to_end (and hub.upstream)."""
    snap["hub"]["handled"] = count
    snap["hub"]["end_to_end"] = figures(count, 0.002)
    if upstream:
        snap["hub"]["upstream"] = {"lost": 3, "restarts": 4, "untracked": 1, "producers": 2}
    return snap


SNAPSHOTS = {
    "one consumer": snapshot(),
    "completion and upstream": with_completion(snapshot()),
    "process figures": with_process(with_completion(snapshot())),
    "nothing handled yet": with_completion(snapshot(name=None), count=0, upstream=False),
    "three consumers, odd names": snapshot(
        name='build "sys"\\x', consumers=[
            consumer("archive", wait_interval=0, proc_interval=5),
            consumer('no"ti\\fy\nnew line', scale=1000),
            consumer("caf\u00e9 /with spaces/", scale=0, wait_interval=0)]),
    "no name, no endpoints, no consumers": snapshot(name=None, consumers=[], endpoints=[]),
    "zero everywhere": snapshot(name=None, consumers=[consumer("idle", scale=0, wait_interval=0)]),
}


def stats(wd, snap, fmt, *extra):
    """`fanhub stats --format FMT --input FILE`; returns stdout."""
    path = wd.write("snapshot.json", json.dumps(snap))
    status, out, err = fh.run(["stats", "--format", fmt, "--input", path] + list(extra))
    assert status == 0, "fanhub stats --format %s --input: exit %d: %s" % (fmt, status, err)
    assert err == "", "fanhub stats: stderr %r" % err
    return out


# ---- Prometheus -----------------------------------------------------------------

SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)')


def unescape(value):
    return re.sub(r'\\(.)', lambda m: {"n": "\n"}.get(m.group(1), m.group(1)), value)


def parse_prometheus(text):
    """{(name, frozenset(labels)): value} of every sample; checks the syntax."""
    samples = {}
    assert text.endswith("\n"), "no final newline"
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) (fanhub|process)_[a-z_]+ \S", line), line
            continue
        m = SAMPLE_RE.match(line)
        assert m, "not a sample line: %r" % line
        labels = {}
        rest = m.group(2) or ""
        while rest:
            lm = LABEL_RE.match(rest)
            assert lm, "bad labels in %r" % line
            labels[lm.group(1)] = unescape(lm.group(2))
            rest = rest[lm.end():]
        key = (m.group(1), frozenset(labels.items()))
        assert key not in samples, "sample twice: %r" % line
        samples[key] = float(m.group(3))
    return samples


def consumer_figures():
    """(counters, gauges): the consumers[] rows of docs/metrics.md that are
    one number under fanhub_consumer_KEY (a counter's with _total), so
    that a new figure needs no line here."""
    counters, gauges = [], []
    row = re.compile(r"^\| `consumers\[\]\.(\w+)` \| `fanhub_consumer_(\w+)` \| [^|]* \| "
                     r"(counter|gauge) \|")
    with open(os.path.join(fh.SOURCE_DIR, "docs", "metrics.md")) as f:
        for line in f:
            m = row.match(line)
            if m and m.group(3) == "counter" and m.group(2) == m.group(1) + "_total":
                counters.append(m.group(1))
            elif m and m.group(3) == "gauge" and m.group(2) == m.group(1):
                gauges.append(m.group(1))
    return tuple(counters), tuple(gauges)


COUNTERS, GAUGES = consumer_figures()


def same(a, b):
    return (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= 1e-8 * abs(b)


def check_prometheus_values(samples, snap):
    """Every figure of the snapshot is in the text, under its name."""
    hub = snap["hub"]

    def get(metric, **labels):
        key = (metric, frozenset(labels.items()))
        assert key in samples, "no sample %s%r" % (metric, labels)
        return samples[key]

    assert get("fanhub_info", version=hub["version"], name=hub["name"] or "") == 1
    assert get("fanhub_uptime_seconds") == hub["uptime"]
    assert get("fanhub_received_total") == hub["received"]
    for reason, count in hub["malformed_by_reason"].items():
        assert get("fanhub_malformed_total", reason=reason) == count
    assert get("fanhub_unrouted_total") == hub["unrouted"]
    if "handled" in hub:
        assert get("fanhub_handled_total") == hub["handled"]
        e2e = hub["end_to_end"]
        for le, want in cumulative(e2e).items():
            assert get("fanhub_end_to_end_seconds_bucket", le=le) == want, le
        assert same(get("fanhub_end_to_end_seconds_sum"), e2e["sum"])
        assert get("fanhub_end_to_end_seconds_count") == e2e["count"]
        assert same(get("fanhub_end_to_end_max_seconds"), e2e["max"])
    if "upstream" in hub:
        for field in ("lost", "restarts", "untracked"):
            assert get("fanhub_upstream_%s_total" % field) == hub["upstream"][field], field
        assert get("fanhub_upstream_producers") == hub["upstream"]["producers"]
    for ep in hub["endpoints"]:
        assert get("fanhub_endpoint_connected", endpoint=ep["endpoint"],
                   kind=ep["kind"]) == (1 if ep["connected"] else 0)
    for c in snap["consumers"]:
        name = c["name"]
        # A snapshot saved before a figure existed reads it as 0 (restarts,
        # skipped, state: ABI 1.3).
        for field in COUNTERS:
            assert get("fanhub_consumer_%s_total" % field, consumer=name) == c.get(field, 0), (name, field)
        for field in GAUGES:
            assert get("fanhub_consumer_%s" % field, consumer=name) == c.get(field, 0), (name, field)
        for hist in ("queue_wait", "processing"):
            h = c[hist]
            family = "fanhub_consumer_%s_seconds" % hist
            for le, want in cumulative(h).items():
                assert get(family + "_bucket", consumer=name, le=le) == want, (name, hist, le)
            assert same(get(family + "_sum", consumer=name), h["sum"]), (name, hist)
            assert get(family + "_count", consumer=name) == h["count"], (name, hist)
            assert same(get("fanhub_consumer_%s_max_seconds" % hist, consumer=name), h["max"])
        assert get("fanhub_consumer_info", consumer=name, plugin=c["plugin"],
                   version=c.get("plugin_version", "")) == 1
    consumer_samples = [k for k in samples if k[0].startswith("fanhub_consumer_")]
    per_histogram = len(BOUNDS) + 1 + 2  # the buckets, +Inf, _sum and _count
    assert len(consumer_samples) == len(snap["consumers"]) * (
        len(COUNTERS) + len(GAUGES) + 2 * per_histogram + 3)
    process = snap.get("process")
    process_samples = {k[0]: v for k, v in samples.items() if k[0].startswith("process_")}
    if process:
        assert process_samples == {
            "process_start_time_seconds": process["start_time"],
            "process_cpu_seconds_total": process["cpu_seconds"],
            "process_resident_memory_bytes": process["resident_memory_bytes"],
            "process_virtual_memory_bytes": process["virtual_memory_bytes"],
            "process_open_fds": process["open_fds"],
            "process_max_fds": process["max_fds"]}, process_samples
    else:
        assert process_samples == {}, process_samples


def test_saved_snapshots_pass_promtool():
    wd = fh.Workdir()
    for what, snap in SNAPSHOTS.items():
        text = stats(wd, snap, "prometheus")
        promtool_check(text, what)
        check_prometheus_values(parse_prometheus(text), snap)
    wd.cleanup()


def test_promtool_catches_a_broken_text():
    """The check is worth something: promtool refuses the text a formatter
    that wrote each consumer's block on its own would give (a family's
    HELP and TYPE lines twice)."""
    wd = fh.Workdir()
    text = stats(wd, SNAPSHOTS["three consumers, odd names"], "prometheus")
    family = [line for line in text.splitlines(keepends=True)
              if re.match(r"(# (HELP|TYPE) )?fanhub_consumer_backlog[ {]", line)]
    assert len(family) == 2 + 3, family
    broken = text + "".join(family[:2] + family[3:4])
    proc = subprocess.run([promtool(), "check", "metrics"], input=broken.encode(),
                          capture_output=True, timeout=60)
    assert proc.returncode != 0, "promtool accepted a family named twice"
    wd.cleanup()


# ---- collectd -------------------------------------------------------------------

NAME = r'[^/"\\\s]+'  # a host or instance: no '/', '"', backslash or space
PUTVAL_RE = re.compile(
    r'^PUTVAL "(?P<host>%s)/fanhub-(?P<instance>%s)/'
    r'(?P<type>[a-z_]+)(?:-(?P<type_instance>%s))?"'
    r'(?: interval=(?P<interval>\d+(?:\.\d+)?(?:e[+-]?\d+)?))?'
    r' (?P<time>N|\d+(?:\.\d+)?):(?P<value>-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)$' % (NAME, NAME, NAME))
TYPES_DB = "/usr/share/collectd/types.db"


def collectd_types():
    """{type: data source type} of collectd's types.db, for the types of
    one data source (the only ones the hub writes)."""
    types = {}
    with open(TYPES_DB) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and not line.startswith("#"):
                types[parts[0]] = parts[1].split(":")[1]
    return types


def sanitised(name):
    return re.sub(r'[/"\\\x00-\x20\x7f]', "_", name)


def parse_collectd(text, host):
    """{(instance, type-type_instance): value}; checks every line: its
    type is one of types.db, and a derive is an integer."""
    values = {}
    types = collectd_types()
    assert text.endswith("\n"), "no final newline"
    for line in text.splitlines():
        m = PUTVAL_RE.match(line)
        assert m, "not a PUTVAL line: %r" % line
        assert m.group("host") == host, line
        assert m.group("type") in types, "not a type of types.db: %r" % line
        assert m.group("interval") == "10", line
        assert m.group("time") == "N", line
        if types[m.group("type")] == "DERIVE":
            assert re.match(r"^-?\d+$", m.group("value")), "derive not an integer: %r" % line
        ident = m.group("type") + ("-" + m.group("type_instance") if m.group("type_instance") else "")
        key = (m.group("instance"), ident)
        assert key not in values, "value twice: %r" % line
        values[key] = float(m.group("value"))
    return values


def doc_collectd_rows():
    """(JSON path, [collectd names]) of every row of docs/metrics.md that
    has a collectd name."""
    rows = []
    with open(os.path.join(fh.SOURCE_DIR, "docs", "metrics.md")) as f:
        for line in f:
            if line.startswith("| `"):
                cells = [c.strip() for c in line.split("|")[1:6]]
                if cells[2] != "\u2014":
                    rows.append((cells[0].strip("`"),
                                 [n.strip().strip("`") for n in cells[2].split(",")]))
    return rows


def number(value):
    if isinstance(value, bool):
        return int(value)
    return value if isinstance(value, (int, float)) else 0


def check_collectd_values(values, snap):
    """The values are exactly docs/metrics.md's collectd names, for each
    part the snapshot has, with the snapshot's figures."""
    hub = snap["hub"]
    hub_instance = sanitised(hub["name"]) if hub["name"] else "hub"
    prefix = hub_instance + "." if hub["name"] else ""
    scopes = {"hub.": [(hub_instance, hub)],
              "hub.upstream.": [(hub_instance, hub["upstream"])] if "upstream" in hub else [],
              "hub.amqp.": [(hub_instance, hub["amqp"])] if "amqp" in hub else [],
              "hub.signatures.": [(hub_instance, hub["signatures"])] if "signatures" in hub else [],
              "process.": [(hub_instance, snap["process"])] if "process" in snap else [],
              "hub.endpoints[].": [(prefix + "endpoint_" + re.sub(r"[^A-Za-z0-9.]+", "_",
                                                                  ep["endpoint"]), ep)
                                   for ep in hub["endpoints"]],
              "consumers[].": [(prefix + sanitised(c["name"]), c) for c in snap["consumers"]]}
    want = {}
    for path, names in doc_collectd_rows():
        scope = max((p for p in scopes if path.startswith(p)), key=len)
        field = path[len(scope):]
        for instance, obj in scopes[scope]:
            if field.split(".")[0] not in obj and field in ("handled", "end_to_end",
                                                            "end_to_end.max"):
                continue  # completion figures come only with completion
            if len(names) == 2:  # a latency: the interval's p99 and mean
                iv = obj[field].get("interval", {"count": 0})
                want[(instance, names[0])] = iv["p99"] if iv["count"] else 0
                want[(instance, names[1])] = iv["mean"] if iv["count"] else 0
            elif field.endswith(".max"):
                want[(instance, names[0])] = obj[field.split(".")[0]]["max"]
            elif field == "cpu_seconds":
                want[(instance, names[0])] = round(obj[field] * 1000)
            else:
                value = number(obj.get(field))
                real = names[0] in ("uptime", "gauge-start_time")
                want[(instance, names[0])] = value if real or value == int(value) else int(value)
    assert set(values) == set(want), "identifiers differ: got %r, want %r" % (
        sorted(set(values) - set(want)), sorted(set(want) - set(values)))
    for key, value in want.items():
        assert same(values[key], value), (key, values[key], value)


def test_saved_snapshots_collectd_lines():
    wd = fh.Workdir()
    for what, snap in SNAPSHOTS.items():
        text = stats(wd, snap, "collectd", "--host", "test-host.example")
        try:
            check_collectd_values(parse_collectd(text, "test-host.example"), snap)
        except AssertionError as e:
            raise AssertionError("%s: %s\n--- text ---\n%s" % (what, e, text))
    wd.cleanup()


# ---- A real hub -----------------------------------------------------------------

def test_live_hub_snapshot():
    """What a running hub answers passes the same checks."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    control = "ipc://" + wd.file("control.sock")
    config = ("name: promtest\nbus:\n  connect: [%s]\ncontrol: %s\nconsumers:\n"
              "  - name: sink\n    plugin: \"null\"\n"
              "  - name: audit.log\n    plugin: \"null\"\n    topics: [org.]\n") % (pub.endpoint, control)
    hub = fh.Hub(wd, config)
    try:
        def subscribed():
            assert hub.proc.poll() is None, "hub exited:\n" + hub.log()
            return pub.sock.poll(100)

        fh.wait_for(subscribed, "the hub to subscribe")
        pub.sock.recv()
        # The bus may be subscribed before the control socket is bound.
        fh.wait_for(lambda: os.path.exists(wd.file("control.sock")), "the control socket",
                    hub=hub)
        for i in range(200):
            pub.send("org.example.topic" if i % 2 else "com.example.topic", b'{"i":%d}' % i)
        pub.send("org.example.bad")  # no body: malformed

        def snap():
            status, out, err = fh.run(["stats", "-e", control, "--format", "json"])
            assert status == 0, "fanhub stats -e: exit %d: %s" % (status, err)
            return json.loads(out)

        def settled():
            s = snap()
            done = {c["name"]: c["completed"] for c in s["consumers"]}
            return s if s["hub"]["received"] == 201 and done == {"sink": 200, "audit.log": 100} else None

        fh.wait_for(settled, "the hub to handle 201 messages")
        status, text, err = fh.run(["stats", "-e", control, "--format", "prometheus"])
        assert status == 0, err
        promtool_check(text, "live hub")
        samples = parse_prometheus(text)
        assert samples[("fanhub_received_total", frozenset())] == 201
        assert samples[("fanhub_consumer_completed_total",
                        frozenset({("consumer", "audit.log")}))] == 100
        assert samples[("fanhub_info", frozenset({("version", snap()["hub"]["version"]),
                                                  ("name", "promtest")}))] == 1
        # Latency histograms from the hub's own buckets: every consume call
        # of "sink" below +Inf, counts never going down.
        family = "fanhub_consumer_processing_seconds"
        sink = frozenset({("consumer", "sink")})
        assert samples[(family + "_count", sink)] == 200
        counts = [samples[(family + "_bucket", sink | {("le", le)})] for le in BOUNDS + ["+Inf"]]
        assert counts == sorted(counts) and counts[-1] == 200, counts
        # The process figures of the hub itself.
        assert samples[("process_open_fds", frozenset())] > 2
        assert samples[("process_resident_memory_bytes", frozenset())] > 1 << 20
        assert samples[("process_cpu_seconds_total", frozenset())] > 0
        started = samples[("process_start_time_seconds", frozenset())]
        assert time.time() - 600 < started <= time.time(), started
        status, text, err = fh.run(["stats", "-e", control, "--format", "collectd",
                                    "--host", "h1"])
        assert status == 0, err
        for line in text.splitlines():
            m = PUTVAL_RE.match(line)
            assert m and m.group("host") == "h1", "not a PUTVAL line: %r" % line
        assert 'PUTVAL "h1/fanhub-promtest.audit.log/derive-completed" ' in text, text
        assert re.search(r'^PUTVAL "h1/fanhub-promtest/derive-received" (interval=\S+ )?N:201$',
                         text, re.M), text
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_saved_snapshots_pass_promtool, test_promtool_catches_a_broken_text,
             test_saved_snapshots_collectd_lines, test_live_hub_snapshot])
