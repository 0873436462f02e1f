"""Spooling off the bus thread (issue 12, case 6): a `spill` consumer's
spool writes and their fsyncs run on a writer thread of its own, behind a
bounded hand-off, so a consumer spilling with `spool.fsync: always` does not
hold up the enqueuer, which reads the bus for every consumer. The writer
commits in groups: one fdatasync for everything that arrived while the
last one ran, so the spool's fsyncs (`spool_fsyncs`) stay far below the
messages spilled. The `journal` test plugin writes a line per message done,
so order and completeness are checked message by message."""
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
from test_acknowledgements import consumer, hub_yaml, journal, journal_yaml, publish


def spill_config(pub, wd, hold, capacity=10, write_ahead=False, journal_name="spiller"):
    queue = "{capacity: %d, overflow: spill%s}" % (capacity,
                                                   ", write_ahead: true" if write_ahead else "")
    return (hub_yaml(pub, journal_yaml("neighbour", wd.file("neighbour"),
                                       queue="{capacity: 100000}")
                     + journal_yaml("spiller", wd.file(journal_name),
                                    ", hold_file: %s" % json.dumps(hold), queue=queue),
                     state_dir=wd.file("state"))
            + "spool: {fsync: always}\n")


def test_neighbour_not_held_by_a_spilling_consumer():
    """While the spiller is held and spills everything with fsync: always,
    its neighbour gets and completes every message; the spill is written
    with far fewer fdatasyncs than messages (group commit); released, the
    spiller consumes every message once, in the order published."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n, capacity = 3000, 10
    hold = wd.file("hold")
    hub = fh.Hub(wd, spill_config(pub, wd, hold, capacity))
    try:
        publish(pub, hub, n)
        fh.wait_for(lambda: consumer(hub, "neighbour")["completed"] == n,
                    "the neighbour completed everything", hub=hub)
        # In memory: the queue's capacity and the one held inside consume;
        # the rest went through the writer to the spool.
        fh.wait_for(lambda: consumer(hub, "spiller")["spilled"] >= n - capacity - 1,
                    "the spill written", hub=hub)
        s = consumer(hub, "spiller")
        assert s["completed"] == 0 and s["enqueued"] == n and s["dropped"] == 0, s
        assert s["spilled"] <= n - capacity, s
        assert s["backlog"] + s["in_flight"] == n, s
        # Group commit: each fdatasync carried many messages.
        assert 1 <= s["spool_fsyncs"] <= s["spilled"] // 4, s
        open(hold, "w").close()
        fh.wait_for(lambda: consumer(hub, "spiller")["completed"] == n,
                    "the spiller completed everything", hub=hub)
        s = consumer(hub, "spiller")
        assert s["backlog"] == 0 and s["spool_bytes"] == 0, s
        assert hub.stats()["hub"]["handled"] == n, hub.stats()["hub"]
        done = journal(wd.file("spiller"))
        assert [i for _, i, _ in done] == list(range(n)), done[:20]
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stop_writes_the_hand_off_and_restart_delivers_it():
    """A clean stop while the spiller is held: what it accepted (spool,
    the writer's hand-off, its memory queue) is in the spool for the next
    run, which consumes every message once, in order; a write-ahead
    consumer likewise."""
    for write_ahead in (False, True):
        wd = fh.Workdir()
        pub = fh.Publisher()
        n = 2000
        hold = wd.file("hold")
        hub = fh.Hub(wd, spill_config(pub, wd, hold, write_ahead=write_ahead), name="run1")
        try:
            publish(pub, hub, n)
            fh.wait_for(lambda: consumer(hub, "spiller")["enqueued"] == n, "all accepted",
                        hub=hub)
            # Stop, then let the message inside consume go (the stop
            # waits for it): the rest stays for the next run.
            hub.proc.send_signal(signal.SIGTERM)
            open(hold, "w").close()
            assert hub.wait() == 0, hub.log()
            first = journal(wd.file("spiller"))
            assert len(first) < n, (write_ahead, len(first))
            hub = fh.Hub(wd, spill_config(pub, wd, hold, write_ahead=write_ahead),
                         name="run2")
            hub.wait_ready()
            fh.wait_for(lambda: consumer(hub, "spiller")["backlog"] == 0
                        and consumer(hub, "spiller")["in_flight"] == 0, "drained", hub=hub)
            assert hub.stop() == 0, hub.log()
            done = journal(wd.file("spiller"))  # both runs: the plugin appends
            assert sorted(i for _, i, _ in done) == list(range(n)), (write_ahead, len(done))
            assert [i for _, i, _ in done] == list(range(n)), write_ahead
            wd.cleanup()
        finally:
            hub.kill()
            pub.close()


def test_reload_while_spilling_hands_the_spool_over():
    """A reload replaces the spiller while it is held with a spool, and
    messages keep coming: the old instance finishes only what it holds in
    memory (its queue, its call in progress), its writer finishes before
    the new instance opens the spool, and the new one takes the spool over
    and gets the rest; every message once, in order. The new instance
    takes nothing before its spool is open (the enqueuer waits for it)."""
    for write_ahead in (False, True):
        wd = fh.Workdir()
        pub = fh.Publisher()
        n = 1000
        hold = wd.file("hold")
        hub = fh.Hub(wd, spill_config(pub, wd, hold, write_ahead=write_ahead,
                                      journal_name="old"))
        try:
            publish(pub, hub, n)
            fh.wait_for(lambda: consumer(hub, "spiller")["enqueued"] == n, "all accepted",
                        hub=hub)
            with open(hub.config, "w") as f:
                f.write(spill_config(pub, wd, hold, write_ahead=write_ahead, journal_name="new")
                        + "control: %s\n" % hub.control)
            status, out, err = fh.run(["reload", "-e", hub.control], timeout=60)
            assert status == 0, (status, out, err)
            for i in range(n, 2 * n):
                pub.send("org.ack.%d" % (i % 7), '{"i":%d,"vm":"vm%d","pad":""}' % (i, i % 13))
            open(hold, "w").close()
            fh.wait_for(lambda: len(journal(wd.file("old"))) + len(journal(wd.file("new")))
                        == 2 * n, "every message consumed", hub=hub)
            fh.wait_for(lambda: "the new instance runs" in hub.log(), "the new one ran", hub=hub)
            assert hub.stop() == 0, hub.log()
            old = [i for _, i, _ in journal(wd.file("old"))]
            new = [i for _, i, _ in journal(wd.file("new"))]
            assert old + new == list(range(2 * n)), (write_ahead, len(old), len(new))
            # At most the call in progress and the memory queue (capacity
            # 10), never the spool (with write_ahead it may have read none
            # yet when the reload came).
            assert len(old) <= 11, (write_ahead, len(old))
            wd.cleanup()
        finally:
            hub.kill()
            pub.close()


def test_reload_does_not_wait_for_the_spool_backlog():
    """Issue 28, case 1: a slow spilling consumer with a spool backlog is
    reloaded. The new instance starts as soon as the old one has finished
    its call in progress and its memory queue (capacity 10), with most of
    the backlog still in the spool; on main it started only once the old
    one had consumed the whole spool, the bus held meanwhile. Every message
    once, in order; the figures move over (enqueued counts each once)."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n = 3000

    # Each instance is held (hold_file) until the test lets it go, so
    # what the old one consumed does not depend on how fast this runs.
    def config(name):
        return (hub_yaml(pub, journal_yaml("neighbour", wd.file("neighbour"))
                         + journal_yaml("spiller", wd.file(name), ", us_max: 1000, hold_file: %s"
                                        % json.dumps(wd.file(name + ".go")),
                                        queue="{capacity: 10, overflow: spill}"),
                         state_dir=wd.file("state")))
    hub = fh.Hub(wd, config("old"))
    try:
        publish(pub, hub, n)
        fh.wait_for(lambda: consumer(hub, "spiller")["enqueued"] == n, "all accepted", hub=hub)
        with open(hub.config, "w") as f:
            f.write(config("new") + "control: %s\n" % hub.control)
        status, out, err = fh.run(["reload", "-e", hub.control], timeout=60)
        assert status == 0, (status, out, err)
        open(wd.file("old.go"), "w").close()  # the old one finishes what it holds
        hub.wait_log("the new instance runs")
        c = consumer(hub, "spiller")
        # Its call in progress and its queue (capacity 10) went; the spool
        # was handed over, not drained (on main the new one started at 0).
        assert c["backlog"] + c["in_flight"] >= n - 11, c
        open(wd.file("new.go"), "w").close()
        for i in range(n, n + 100):
            pub.send("org.ack.%d" % (i % 7), '{"i":%d,"vm":"vm%d","pad":""}' % (i, i % 13))
        fh.wait_for(lambda: consumer(hub, "spiller")["completed"] == n + 100, "all consumed",
                    hub=hub)
        c = consumer(hub, "spiller")
        assert c["enqueued"] == n + 100 and c["backlog"] == 0 and c["in_flight"] == 0, c
        assert consumer(hub, "neighbour")["completed"] == n + 100
        assert hub.stats()["hub"]["handled"] == n + 100, hub.stats()["hub"]
        old = [i for _, i, _ in journal(wd.file("old"))]
        new = [i for _, i, _ in journal(wd.file("new"))]
        assert old + new == list(range(n + 100)), (len(old), len(new))
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_neighbour_not_held_by_a_spilling_consumer,
             test_stop_writes_the_hand_off_and_restart_delivers_it,
             test_reload_while_spilling_hands_the_spool_over,
             test_reload_does_not_wait_for_the_spool_backlog])
