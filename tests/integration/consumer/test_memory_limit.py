"""A byte limit on memory (issue 28, item 4), against the real hub: 1 MiB
messages into a consumer that is held keep what the hub holds in memory
under queue.max_bytes (default 64 MiB) under every overflow policy: past
it spill goes to disk, block blocks, drop-newest and drop-oldest drop
(counted). On main the queue took up to capacity (100,000) messages, so
400 MiB here. queue_bytes is checked in every build; the process's RSS
only without a sanitizer (ASan keeps freed memory in quarantine).
scripts/memory-soak runs the same for 5 minutes per policy."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
from test_acknowledgements import consumer, hub_yaml, journal, journal_yaml

MIB = 1024 * 1024
N = 400
MAX_BYTES = 64 * MIB


def rss(hub):
    with open("/proc/%d/status" % hub.proc.pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def run_policy(policy):
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    state = wd.file("state") if policy == "spill" else None
    text = hub_yaml(pub, journal_yaml("slow", wd.file("out"),
                                      ", hold_file: %s" % json.dumps(hold),
                                      queue="{overflow: %s}" % policy),
                    state_dir=state)
    text = text.replace("bus:\n  connect: [%s]\n" % pub.endpoint,
                        "bus:\n  connect: [%s]\n%s" % (pub.endpoint,
                                                       "  rcvhwm: 8\n" if policy == "block" else ""))
    hub = fh.Hub(wd, text)
    try:
        hub.wait_ready()
        base = rss(hub)
        pub.wait_subscribed(hub=hub)
        body = '{"i":%d,"pad":"' + "x" * MIB + '"}'
        peak = 0
        for i in range(N):
            pub.send("org.ack.%d" % (i % 7), body % i)
        c = None

        def settled():
            nonlocal c, peak
            c = consumer(hub, "slow")
            peak = max(peak, rss(hub))
            assert c["queue_bytes"] <= MAX_BYTES + 2 * MIB, (policy, c["queue_bytes"])
            if policy == "block":  # the bus waits: the queue is at its byte limit
                return c["queue_bytes"] > MAX_BYTES - 2 * MIB
            if policy == "spill":
                return c["enqueued"] == N and c["spool_handoff"] == 0
            return c["enqueued"] + c["dropped"] - c["evicted"] == N
        fh.wait_for(settled, "%s: the flood taken" % policy, hub=hub)
        if policy == "drop-oldest":
            assert c["evicted"] > 0, c
        elif policy != "spill":
            assert c["enqueued"] < N, (policy, c)
        if policy != "spill":
            assert c["backlog"] * MIB <= MAX_BYTES + 2 * MIB, (policy, c)
        open(hold, "w").close()
        want = N if policy in ("spill", "block") else None

        def finished():
            nonlocal c, peak
            c = consumer(hub, "slow")
            peak = max(peak, rss(hub))
            if want is not None:
                return c["completed"] == want
            return c["completed"] == c["enqueued"] - c["evicted"] and c["backlog"] == 0
        fh.wait_for(finished, "%s: consumed" % policy, hub=hub)
        if want is None:
            assert c["completed"] + c["dropped"] == N, (policy, c)
        assert c["queue_bytes"] == 0, c
        if not os.environ.get("FANHUB_SANITIZE"):
            # The queue's 64 MiB, for spill the writer's hand-off (64 MiB)
            # and what it writes from, and 64 MiB for malloc's arenas and
            # the bus buffers (docs/configuration.md, memory.max_bytes).
            limit = MAX_BYTES + (128 * MIB if policy == "spill" else 0) + 64 * MIB
            assert peak - base < limit, (policy, (peak - base) // MIB, limit // MIB)
        got = [i for _, i, _ in journal(wd.file("out"))]
        assert got == sorted(got) and len(set(got)) == len(got), policy
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_drop_newest():
    run_policy("drop-newest")


def test_drop_oldest():
    run_policy("drop-oldest")


def test_spill():
    run_policy("spill")


def test_block():
    run_policy("block")


def soak(policy, seconds):
    """scripts/memory-soak: 1 MiB messages, 100 a second, into a consumer
    that takes about 20 ms each (half the rate), for `seconds`; RSS sampled every 0.1 s
    must stay under the same limit. Prints the peak."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    state = wd.file("state") if policy == "spill" else None
    text = hub_yaml(pub, journal_yaml("slow", wd.file("out"), ", us_max: 40000",
                                      queue="{overflow: %s}" % policy), state_dir=state)
    if policy == "block":
        text = text.replace("bus:\n", "bus:\n  rcvhwm: 8\n", 1)
    hub = fh.Hub(wd, text)
    try:
        hub.wait_ready()
        base = peak = rss(hub)
        pub.wait_subscribed(hub=hub)
        body = '{"i":%d,"pad":"' + "x" * MIB + '"}'
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < seconds:
            for _ in range(10):
                pub.send("org.ack.%d" % (i % 7), body % i)
                i += 1
            time.sleep(0.1)  # pacing the publisher, not deciding anything
            peak = max(peak, rss(hub))
        limit = MAX_BYTES + (128 * MIB if policy == "spill" else 0) + 64 * MIB
        c = consumer(hub, "slow")
        print("%s: %d sent, %d completed, %d dropped; RSS peak %d MiB over a base of %d MiB "
              "(limit %d MiB over it)" % (policy, i, c["completed"], c["dropped"],
                                          peak // MIB, base // MIB, limit // MIB))
        assert peak - base < limit, (policy, peak // MIB)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--soak":
        soak(sys.argv[2], float(sys.argv[3]))
    else:
        fh.main([test_drop_newest, test_drop_oldest, test_spill, test_block])
