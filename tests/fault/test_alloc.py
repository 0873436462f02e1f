#!/usr/bin/python3
"""fault.alloc - an allocation failure on the data path is logged and
counted, never a silent stop (issue 28). The hub runs under the
failalloc shim (LD_PRELOAD, tests/fault/failalloc.c), which fails the
hub's own mallocs of 1 MiB or more: a held consumer's queue (capacity
1,000,000) cannot grow past 65,536 slots, so it counts as full early and
its overflow (drop-newest) applies. hub.alloc_failures counts the failed
growths, the log says so, each message is either enqueued or dropped,
and the hub keeps running, consumes what it took and stops cleanly.
Not under the sanitizers: their runtimes must come first in LD_PRELOAD
and take malloc themselves (ctest registers it only without them)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import fanhublib as fh  # noqa: E402

N = 70000  # past the 65,536 slots the queue gets without a failure
MIN = 1 << 20


def test_queue_growth_failure_is_counted():
    wd = fh.Workdir()
    pub = fh.Publisher()
    release = wd.file("release")
    text = ("bus:\n  connect: [%s]\nconsumers:\n"
            "  - name: held\n    plugin: %s/sleep.so\n"
            "    queue: {capacity: 1000000, overflow: drop-newest}\n"
            "    options: {release_file: %s}\n"
            % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(release)))
    env = {"LD_PRELOAD": os.environ["FH_FAILALLOC_SO"], "FH_FAILALLOC_MIN": str(MIN)}
    hub = fh.Hub(wd, text, env=env)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(N):
            pub.send("org.alloc", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == N, "every message received",
                    hub=hub)
        stats = hub.stats()
        held = hub.consumer(stats, "held")
        assert stats["hub"]["alloc_failures"] >= 1, stats["hub"]
        assert held["dropped"] > 0 and held["enqueued"] + held["dropped"] == N, held
        assert 65536 <= held["enqueued"] <= 65537, held  # the ring, and one in consume
        assert "out of memory: a consumer's queue could not grow" in hub.log(), hub.log()[-2000:]
        assert "hub.alloc_failures" in hub.log()
        # A bounded number of lines: the 1st, 2nd, 4th... failure.
        assert hub.log().count("out of memory:") <= 20, hub.log()[-3000:]
        open(release, "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "held")["completed"] == held["enqueued"],
                    "what was taken consumed", hub=hub)
        assert hub.stop() == 0, hub.log()[-3000:]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_queue_growth_failure_is_counted])
