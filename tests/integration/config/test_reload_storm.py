"""A storm of reloads into a held, non-spilling consumer (issue 28): each
reload changes its settings, so each makes a new instance, and none of
them can start while the running one is held. Instances that never
started fold into the newest, so memory holds at most two instances'
worth (the running one's queue and the newest's), whatever the number of
reloads; the counters stay exact and nothing is lost uncounted. One run
per overflow policy. Deadlines only turn a hang into a failure."""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

CAPACITY = 50
RELOADS = 30
PER_ROUND = 20
BODY = 100  # bytes of each body, about


def config(pub, journal, hold, overflow, k):
    # us_max differs in each file: every reload makes a new instance.
    return ("bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n"
            "  - name: held\n    plugin: %s/journal.so\n"
            "    queue: {capacity: %d, overflow: %s}\n"
            "    options: {path: %s, hold_file: %s, us_max: %d}\n"
            % (pub.endpoint, fh.TEST_PLUGINS, CAPACITY, overflow, journal, hold, k))


def write_config(hub, text):
    with open(hub.config + ".new", "w") as f:
        f.write(text + "control: %s\n" % hub.control)
    os.rename(hub.config + ".new", hub.config)


def storm(overflow):
    wd = fh.Workdir()
    pub = fh.Publisher()
    journal, hold = wd.file("journal"), wd.file("hold")
    hub = fh.Hub(wd, config(pub, journal, hold, overflow, 0))
    sent = 0
    try:
        pub.wait_subscribed(hub=hub)
        for k in range(1, RELOADS + 1):
            for _ in range(PER_ROUND):
                pub.send("org.storm", '{"i":%d,"pad":"%s"}' % (sent, "x" * BODY))
                sent += 1

            def settled():
                stats = hub.stats()
                held = hub.consumer(stats, "held")
                # block: the enqueuer waits once the newest's queue is full.
                newest = held["backlog"] - stats["hub"]["draining_backlog"]
                return (stats["hub"]["received"] == sent
                        or (overflow == "block" and newest >= CAPACITY))
            fh.wait_for(settled, "round %d received" % k, hub=hub)
            write_config(hub, config(pub, journal, hold, overflow, k))
            status, out, err = fh.run(["reload", "-e", hub.control])
            assert status == 0, (k, status, out, err, hub.log()[-3000:])
            stats = hub.stats()
            held = hub.consumer(stats, "held")
            # The running instance and the newest one; none in between.
            assert stats["hub"]["draining"] <= 1, (k, stats["hub"])
            assert held["backlog"] <= 2 * CAPACITY, (k, held)
            assert held["queue_bytes"] <= 2 * CAPACITY * (BODY + 40), (k, held)
        assert hub.log().count("an instance that never started is replaced") >= RELOADS - 2
        open(hold, "w").close()

        def finished():
            held = hub.consumer(hub.stats(), "held")
            return (held["backlog"] == 0 and held["in_flight"] == 0
                    and held["completed"] + held["dropped"] == sent)
        fh.wait_for(finished, "everything consumed or counted dropped", hub=hub)
        stats = hub.stats()
        held = hub.consumer(stats, "held")
        assert stats["hub"]["received"] == sent, stats["hub"]
        # Each message accepted or refused once; evicted ones are both.
        assert held["enqueued"] + held["dropped"] - held["evicted"] == sent, held
        assert held["completed"] == held["enqueued"] - held["evicted"], held
        assert hub.stop() == 0, hub.log()[-3000:]
        done = [int(line.split()[1]) for line in open(journal)]
        assert len(done) == held["completed"], (len(done), held)
        assert done == sorted(set(done)), "out of order or twice"
        if overflow == "block":
            assert done == list(range(sent)), "block lost some"
        assert sent - len(done) - held["dropped"] == 0, "lost uncounted"
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_storm_drop_newest():
    storm("drop-newest")


def test_storm_drop_oldest():
    storm("drop-oldest")


def test_storm_block():
    storm("block")


def test_storm_write_ahead_never_stops_the_bus():
    """Reloads every 100 ms of a consumer that spills with write_ahead and
    falls behind, while a publisher sends all along (issue 39: the bus
    stood still for seconds, received stuck at 9): each successor takes
    its predecessor's spool over and, until it has it open, what is
    offered to it goes onto the end of that spool, so the bus moves all
    along; every message is done once, in order."""
    wd = fh.Workdir()
    journal = wd.file("journal")

    def text(k):
        return ("state_dir: %s\nbus:\n  connect: [%s]\nconsumers:\n"
                "  - name: wa\n    plugin: %s/journal.so\n"
                "    queue: {overflow: spill, write_ahead: true}\n"
                "    options: {path: %s, us_max: %d}\n"
                % (wd.file("state"), pub.endpoint, fh.TEST_PLUGINS, journal, 2000 + k))
    pub = fh.Publisher()
    hub = fh.Hub(wd, text(0))
    still = 3.0 if os.environ.get("FANHUB_SANITIZE") else 1.0  # a sanitizer is slower
    sent = [0]
    stop = threading.Event()

    def send():
        while not stop.is_set():
            pub.send("org.storm", '{"i":%d}' % sent[0])
            sent[0] += 1
            time.sleep(0.001)
    sender = threading.Thread(target=send, daemon=True)
    try:
        pub.wait_subscribed(hub=hub)
        sender.start()
        last_received, last_moved = -1, time.monotonic()
        for k in range(1, 31):
            write_config(hub, text(k))
            status, out, err = fh.run(["reload", "-e", hub.control])
            assert status == 0, (k, status, out, err, hub.log()[-3000:])
            received = hub.stats()["hub"]["received"]
            now = time.monotonic()
            if received != last_received:
                last_received, last_moved = received, now
            assert now - last_moved < still, (
                "the bus stood still %.1f s at %d of %d" % (now - last_moved, received, sent[0]),
                hub.log()[-3000:])
            time.sleep(0.1)
        stop.set()
        sender.join()
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == sent[0], "all received", hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "wa")["completed"] == sent[0],
                    "every message done", hub=hub)
        assert hub.stop() == 0, hub.log()[-3000:]
        done = [int(line.split()[1]) for line in open(journal)]
        assert done == list(range(sent[0])), "lost, repeated or out of order"
        wd.cleanup()
    finally:
        stop.set()
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_storm_drop_newest, test_storm_drop_oldest, test_storm_block,
             test_storm_write_ahead_never_stops_the_bus])
