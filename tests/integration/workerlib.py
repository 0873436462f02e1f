"""Shared by the worker plugin's tests (test_worker*.py): consumers of
each kind (the Python runner on tests/integration/workers/wtest.py, the
Perl example worker), their records, and the checks on them."""
import collections
import json
import os
import re
import shutil

import fanhublib as fh

WORKERS_DIR = os.path.join(fh.SOURCE_DIR, "tests", "integration", "workers")
PERL_WORKER = os.path.join(fh.SOURCE_DIR, "consumers", "worker", "examples", "jsonl-worker.pl")
PYTHON = "/usr/bin/python3"


def perl():
    return fh.require_tool(shutil.which("perl", path="/usr/bin"), "perl", "perl")


def consumer(kind, name, out, topics="[org.test]", extra="", gate=None):
    """A consumer entry of kind "python" or "perl" that records every
    message it finishes in out (JSON lines)."""
    if kind == "python":
        options = '{callable: "wtest:record", path: [%s]}' % json.dumps(WORKERS_DIR)
        plugin = "python"
    else:
        config = {"path": out, "die_on": "segv", "hang_on": "hang"}
        if gate:
            config["gate"] = gate
        options = "{command: [%s, %s], config: %s}" % (perl(), json.dumps(PERL_WORKER),
                                                       json.dumps(config))
        plugin = "worker"
    return ("  - name: %s\n    plugin: %s\n    topics: %s\n%s    options: %s\n"
            % (name, plugin, topics, extra, options))


def hub_env(out):
    """The environment of a hub whose Python consumers record to out."""
    return {"WORKER_TEST_OUT": out}


def records(path):
    return fh.read_jsonl(path)


def check_each_once(recs, seqs):
    """Every seq of seqs finished at least once and nothing else; returns
    the number of duplicates (finished more than once)."""
    count = collections.Counter(r["seq"] for r in recs)
    missing = set(seqs) - set(count)
    extra = set(count) - set(seqs)
    assert not missing, "never finished: %s" % sorted(missing)[:20]
    assert not extra, "finished but never sent: %s" % sorted(extra)[:20]
    return sum(c - 1 for c in count.values())


def check_key_order(recs, key="key"):
    """Per key, in the order the workers ran them (start times of one
    system-wide clock): i grows and no call starts before the key's
    previous one ended (never two of a key in flight)."""
    by_key = collections.defaultdict(list)
    for r in recs:
        by_key[r["body"][key]].append(r)
    for k, runs in by_key.items():
        runs.sort(key=lambda r: r["start"])
        for prev, cur in zip(runs, runs[1:]):
            assert cur["start"] >= prev["end"], ("two of key %s in flight at once" % k, prev, cur)
            assert cur["body"]["i"] > prev["body"]["i"], ("key %s out of order" % k, prev, cur)
    return len(by_key)


def worker_pids(hub):
    """{index: pid} of the workers the hub said were ready, the latest each."""
    pids = {}
    for m in re.finditer(r"worker (\d+) \(pid (\d+)\) ready", hub.log()):
        pids[int(m.group(1))] = int(m.group(2))
    return pids


def ordering(kind, n, keys=50, workers=4, seed=7):
    """n messages over `keys` keys through `workers` worker processes with
    order_by: each finished once, per-key order kept, never two of a key
    in flight at once."""
    import random
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    extra = ("    workers: %d\n    order_by: {json: /key}\n    max_pending: 200\n"
             "    queue: {capacity: %d}\n" % (workers, n + 10))
    config = "bus:\n  connect: [%s]\nconsumers:\n%s" % (
        pub.endpoint, consumer(kind, "ordered", out, extra=extra))
    hub = fh.Hub(wd, config, env=hub_env(out))
    rng = random.Random(seed)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send("org.test.order", '{"key":"k%d","i":%d}' % (rng.randrange(keys), i))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "ordered")["completed"] == n,
                    "%d messages completed" % n, hub=hub)
        c = hub.consumer(hub.stats(), "ordered")
        assert c["failed"] == 0 and c["retried"] == 0 and c["restarts"] == 0, c
        assert c["state"] == 0 and c["in_flight"] == 0, c
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    recs = records(out)
    assert check_each_once(recs, range(1, n + 1)) == 0, "duplicates without a crash"
    assert check_key_order(recs) == keys
    assert len({r["pid"] for r in recs}) == workers, "not every worker process took messages"
    wd.cleanup()


def segfault(kind, n=100, poison=50):
    """A message that kills its worker (SIGSEGV) is dead-lettered after
    max_crashes (3) with the signal in the reason; every other message is
    finished; another consumer of the hub completes messages while the
    crash loop runs (held open by a gate file at the third attempt)."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    gate = wd.file("gate")
    pub = fh.Publisher()
    extra = "    retry: {max_attempts: 10, initial_ms: 1, max_ms: 20}\n"
    config = ("state_dir: %s\nbus:\n  connect: [%s]\nconsumers:\n%s"
              "  - name: other\n    plugin: \"null\"\n    topics: [org.other]\n"
              % (wd.file("state"), pub.endpoint,
                 consumer(kind, "crashy", out, topics="[org.test]", extra=extra, gate=gate)))
    hub = fh.Hub(wd, config, env=hub_env(out))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            if i == poison:
                pub.send("org.test.crash", '{"i":%d,"segv":true,"gate":%s}' % (i, json.dumps(gate)))
            else:
                pub.send("org.test.crash", '{"i":%d}' % i)
        # Two crashes, then the third attempt waits at the gate.
        fh.wait_for(lambda: hub.consumer(hub.stats(), "crashy")["restarts"] >= 2,
                    "two restarts", hub=hub)
        for i in range(20):
            pub.send("org.other", "x%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "other")["completed"] == 20,
                    "the other consumer completing during the crash loop", hub=hub)
        c = hub.consumer(hub.stats(), "crashy")
        assert c["dead_lettered"] == 0 and c["in_flight"] >= 1, c
        with open(gate, "w"):
            pass
        fh.wait_for(lambda: hub.consumer(hub.stats(), "crashy")["dead_lettered"] == 1,
                    "the poison message dead-lettered", hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "crashy")["completed"] == n - 1,
                    "every other message completed", hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "crashy")["restarts"] == 3,
                    "the third restart", hub=hub)
        c = hub.consumer(hub.stats(), "crashy")
        assert c["failed"] == 1 and c["dead_lettered"] == 1, c
        hub.wait_log("worker 0 (pid ")
        assert "killed by signal 11 (SIGSEGV)" in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    status, text, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", "crashy"])
    assert status == 0, text + err
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert len(entries) == 1, entries
    assert entries[0]["reason"] == ("completed with FAIL: worker killed by signal 11 (SIGSEGV) "
                                    "3 times on this message"), entries
    poison_seq = poison + 1
    assert entries[0]["seq"] == poison_seq, entries
    recs = records(out)
    seqs = [s for s in range(1, n + 1) if s != poison_seq]
    check_each_once(recs, seqs)
    wd.cleanup()
