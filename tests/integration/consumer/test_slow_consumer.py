"""A Python consumer at realistic speeds (50 ms and 2 s a message) with
the defaults: each worker process holds a small window (prefetch), the
rest waits in the consumer's queue as backlog, and a message's
consume_timeout runs from when its worker starts it. So nothing expires
or repeats while the consumer falls behind, and a reload of the slow
consumer never stops the bus for the fast one beside it (issue 37)."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl

# Every message sent more than this long ago is done by the fast consumer
# at every sample: the bus never stood still (a sanitizer build is slower).
KEEPS_UP_S = 2.0 if os.environ.get("FANHUB_SANITIZE") else 1.0


def slow_hub(wd, pub, out, options_extra=""):
    config = ("state_dir: %s\nbus:\n  connect: [%s]\nconsumers:\n"
              "  - name: fast\n    plugin: log\n    topics: [org.test]\n"
              "    options: {path: %s}\n"
              "  - name: slow\n    plugin: python\n    topics: [org.test]\n"
              "    consume_timeout: 5\n"
              "    options: {callable: \"wtest:record\", path: [%s]%s}\n"
              % (wd.file("state"), pub.endpoint, wd.file("fast.jsonl"), wl.WORKERS_DIR,
                 options_extra))
    return fh.Hub(wd, config, env=wl.hub_env(out))


class Sender(threading.Thread):
    """Publishes n messages at rate a second, noting when each went; with
    pause_at, it stops after that many until go is set (so that what the
    test checks meanwhile has the second part's whole time, however long
    the pause took on a slow machine)."""

    def __init__(self, pub, n, rate, body, pause_at=None):
        super().__init__(daemon=True)
        self.pub, self.n, self.rate, self.body = pub, n, rate, body
        self.pause_at, self.go = pause_at, threading.Event()
        self.sent_at = []

    def run(self):
        start = time.monotonic()
        for i in range(self.n):
            if i == self.pause_at:
                self.go.wait()
                start = time.monotonic() - i / self.rate
            delay = start + i / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            self.pub.send("org.test", self.body % i)
            self.sent_at.append(time.monotonic())

    def sent_before(self, when):
        return sum(1 for t in list(self.sent_at) if t < when)


def test_fifty_ms_a_message_falls_behind_and_catches_up_through_a_reload():
    """600 messages at 60/s to a consumer that does 20/s: every message is
    done once, none expires or is completed late, the backlog rises in
    `fanhub stats` (table and JSON) while it falls behind, and two
    reloads in a row that change its options while it is behind leave
    the fast consumer beside it receiving all along; every message is
    accounted for."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    n = 600
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(slow_hub(wd, pub, out))
        pub.wait_subscribed(hub=hub)
        sender = Sender(pub, n, 60, '{"i":%d,"sleep":0.05}', pause_at=n // 2)
        sender.start()
        backlogs = []
        fh.wait_for(lambda: backlogs.append(hub.consumer(hub.stats(), "slow")["backlog"])
                    or len(sender.sent_at) >= n // 2, "half sent", hub=hub)
        assert max(backlogs) > 50 and backlogs[-1] > backlogs[0], backlogs
        status, table, err = fh.run(["stats", "--format", "table", "-e", hub.control])
        assert status == 0, err
        lines = table.splitlines()
        header = next(line.split() for line in lines if "BACKLOG" in line.split())
        row = next(line.split() for line in lines if line.split()[:1] == ["slow"])
        assert int(row[header.index("BACKLOG")]) > 0, table
        # Reload while it is behind: a new instance with other options.
        with open(hub.config) as f:
            config = f.read()
        # Twice: the second instance waits for the first to drain, and
        # the third, offered everything meanwhile, goes through to the
        # spool of the one that runs.
        for k in (1, 2):
            with open(hub.config, "w") as f:
                f.write(config.replace('path: [', 'config: {reloaded: %d}, path: [' % k))
            status, said, err = fh.run(["reload", "-e", hub.control])
            assert status == 0, (status, said, err)
        # While the old instance drains, the fast consumer keeps up: the
        # second half goes now, 5 s at 60/s, sampled every 0.1 s.
        sender.go.set()
        samples = 0
        while sender.is_alive():
            now = time.monotonic()
            fast = hub.consumer(hub.stats(), "fast")["completed"]
            due = sender.sent_before(now - KEEPS_UP_S)
            assert fast >= due, ("the bus stood still: %d sent over %.0f s ago, the fast "
                                 "consumer has %d" % (due, KEEPS_UP_S, fast), hub.log()[-4000:])
            samples += 1
            time.sleep(0.1)
        assert samples >= 3, samples  # the check above ran, not vacuous
        sender.join()
        fh.wait_for(lambda: len(wl.records(out)) >= n, "every message done by the slow consumer",
                    deadline=180, hub=hub)
        stats = hub.stats()
        slow = hub.consumer(stats, "slow")
        assert stats["hub"]["received"] == n, stats["hub"]
        assert hub.consumer(stats, "fast")["completed"] == n, hub.consumer(stats, "fast")
        assert slow["tickets_expired"] == 0 and slow["completions_late"] == 0, slow
        assert slow["failed"] == 0 and slow["dropped"] == 0, slow
        assert "the bus has waited" not in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
    assert wl.check_each_once(wl.records(out), range(1, n + 1)) == 0
    wd.cleanup()


def test_two_seconds_a_message_never_expires_while_queued():
    """Six messages of 2 s each with consume_timeout 5: all six sit in the
    process's window at once, the last starts 10 s after it was handed
    over (twice consume_timeout), and none expires or repeats."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    n = 6
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(slow_hub(wd, pub, out))
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send("org.test", '{"i":%d,"sleep":2}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "slow")["in_flight"] == n,
                    "all six handed to the worker", hub=hub)
        fh.wait_for(lambda: len(wl.records(out)) == n, "every message done", deadline=60,
                    hub=hub)
        slow = hub.consumer(hub.stats(), "slow")
        assert slow["completed"] == n and slow["retried"] == 0, slow
        assert slow["tickets_expired"] == 0 and slow["completions_late"] == 0, slow
        assert slow["restarts"] == 0, slow
        assert hub.stop() == 0, hub.log()
    assert wl.check_each_once(wl.records(out), range(1, n + 1)) == 0
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_fifty_ms_a_message_falls_behind_and_catches_up_through_a_reload,
             test_two_seconds_a_message_never_expires_while_queued])
