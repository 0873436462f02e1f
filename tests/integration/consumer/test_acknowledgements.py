"""End-to-end acknowledgements (issue 12) against the real hub: a message
is done only when its plugin finally completed it (at once, or later with
host->complete after answering FANHUB_PENDING) or it was dead-lettered; the
spool's cursor, `handled`, `emit --wait` and the counters move only then,
over the contiguous prefix of done messages. The `journal` test plugin
writes a line the moment a message is done, so a kill -9 leaves the exact
record of what was done."""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def journal_yaml(name, path, options="", queue="", extra=""):
    return ("  - name: %s\n    plugin: %s/journal.so\n%s%s"
            "    options: {path: %s%s}\n"
            % (name, fh.TEST_PLUGINS, "    queue: %s\n" % queue if queue else "", extra,
               json.dumps(path), options))


def hub_yaml(pub, consumers, state_dir=None, shutdown_timeout=60):
    text = "bus:\n  connect: [%s]\nshutdown_timeout: %d\n" % (pub.endpoint, shutdown_timeout)
    if state_dir:
        text += "state_dir: %s\n" % json.dumps(state_dir)
    return text + "consumers:\n" + consumers


def journal(path):
    """The journal's lines as (seq, i, attempt)."""
    out = []
    for line in fh.whole_lines(path):
        seq, i, attempt, _ = line.split()
        out.append((int(seq), int(i) if i != "-" else None, int(attempt)))
    return out


def publish(pub, hub, n, first=0, size=0, topic="org.ack"):
    pub.wait_subscribed(hub=hub)
    pad = "x" * size
    for i in range(first, first + n):
        pub.send("%s.%d" % (topic, i % 7), '{"i":%d,"vm":"vm%d","pad":"%s"}' % (i, i % 13, pad))


def consumer(hub, name):
    return hub.consumer(hub.stats(), name)


def test_pending_counts_in_flight_until_completed():
    """An asynchronous plugin: what it holds shows in in_flight, is not
    completed, and max_pending stops consume; completed late it is counted
    once, and a second complete of one ticket is ignored (logged)."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n, max_pending = 50, 10
    hold = wd.file("hold")
    hub = fh.Hub(wd, hub_yaml(pub, journal_yaml(
        "async", wd.file("out"), ", async: true, batch: 4, hold_file: %s, double_complete: true"
        % json.dumps(hold), extra="    max_pending: %d\n" % max_pending)))
    try:
        publish(pub, hub, n)
        fh.wait_for(lambda: consumer(hub, "async")["in_flight"] == max_pending,
                    "max_pending open", hub=hub)
        c = consumer(hub, "async")
        # Held: consume is not called beyond max_pending; nothing is done.
        assert c["completed"] == 0 and c["backlog"] == n - max_pending, c
        assert journal(wd.file("out")) == []
        open(hold, "w").close()
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == n, "all completed", hub=hub)
        c = consumer(hub, "async")
        assert c["in_flight"] == 0 and c["failed"] == 0 and c["backlog"] == 0, c
        assert hub.stats()["hub"]["handled"] == n, hub.stats()["hub"]
        assert sorted(s for s, _, _ in journal(wd.file("out"))) == list(range(1, n + 1))
        assert "is not pending" in hub.log(), hub.log()
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_late_retry_fail_and_stuck():
    """RETRY and FAIL given late work as if consume had answered them:
    backoff and a new attempt, dead letters. (A message held longer than
    consume_timeout: test_tickets.py.)"""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    hub = fh.Hub(wd, hub_yaml(pub, journal_yaml(
        "async", wd.file("out"),
        ", async: true, retry_marker: '\"i\":3,', fail_marker: '\"i\":5,', hold_file: %s"
        % json.dumps(hold),
        extra="    retry: {max_attempts: 3, initial_ms: 1, max_ms: 2}\n"),
        state_dir=wd.file("state")))
    try:
        publish(pub, hub, 10)
        fh.wait_for(lambda: consumer(hub, "async")["in_flight"] == 10, "10 pending", hub=hub)
        open(hold, "w").close()
        fh.wait_for(lambda: consumer(hub, "async")["completed"] + consumer(hub, "async")["failed"]
                    == 10, "all finished", hub=hub)
        c = consumer(hub, "async")
        assert c["completed"] == 9 and c["failed"] == 1 and c["dead_lettered"] == 1, c
        assert c["retried"] == 1 and c["in_flight"] == 0, c
        got = journal(wd.file("out"))
        assert (4, 3, 2) in got, got        # i=3 (seq 4) done on its second attempt
        assert not [g for g in got if g[1] == 5], got
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_pool_spill_keeps_capacity_and_loses_nothing_on_stop():
    """Case 1: a pool with spill holds at most queue.capacity in memory
    (the rest stays on disk until done), and a clean stop with a backlog
    larger than shutdown_timeout can work off keeps what is not done in
    the spool: after the restart every message is done once."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n, capacity, workers, size = 4000, 100, 4, 200
    state = wd.file("state")
    hold = wd.file("hold")

    def config(out):
        return hub_yaml(pub, journal_yaml(
            "pool", out, ", us_max: 2000, hold_file: %s" % json.dumps(hold),
            queue="{capacity: %d, overflow: spill}" % capacity,
            extra="    workers: %d\n    order_by: {json: /vm}\n" % workers),
            state_dir=state, shutdown_timeout=1)

    hub = fh.Hub(wd, config(wd.file("run1")), name="run1")
    try:
        publish(pub, hub, n, size=size)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] >= n, "all received", hub=hub)
        fh.wait_for(lambda: consumer(hub, "pool")["in_flight"] == workers, "workers busy",
                    hub=hub)
        # The spool's writer thread has written all it was handed.
        fh.wait_for(lambda: consumer(hub, "pool")["enqueued"] == n
                    and consumer(hub, "pool")["spool_handoff"] == 0, "the spill written",
                    hub=hub)
        c = consumer(hub, "pool")
        assert c["spilled"] >= n - capacity - workers - 1, c
        # Held: the scheduler took at most `capacity` of the spool; every
        # other spilled record is still on disk (each is over `size` bytes).
        assert c["spool_bytes"] >= (c["spilled"] - capacity - workers) * size, c
        open(hold, "w").close()
        fh.wait_for(lambda: consumer(hub, "pool")["completed"] >= 300, "some done", hub=hub)
        # About a second of work is left for each worker: more than
        # shutdown_timeout, were it all in memory.
        assert hub.stop() == 0, hub.log()
        first = journal(wd.file("run1"))
        assert len(first) < n, "the stop came too late to test anything"
        hub = fh.Hub(wd, config(wd.file("run2")), name="run2")
        fh.wait_for(lambda: len(first) + len(journal(wd.file("run2"))) >= n
                    and consumer(hub, "pool")["backlog"] == 0, "the rest", hub=hub)
        assert hub.stop() == 0, hub.log()
        done = [i for _, i, _ in first + journal(wd.file("run2"))]
        # Everything, and nothing twice (a clean stop repeats nothing).
        assert sorted(done) == list(range(n)), (len(set(done)), len(done), n)
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


class SmallDisk:
    """A 2 MB tmpfs at `path`, in a mount namespace of its own (a user
    namespace too, so no privilege is needed), kept by a holder process so
    that it outlives the hubs; `bin()` runs fanhub inside it."""

    def __init__(self, wd, path, size="2m"):
        os.makedirs(path, exist_ok=True)
        ready = wd.file("smalldisk.ready")
        self.proc = subprocess.Popen(
            ["unshare", "-rm", "--propagation", "private", "sh", "-c",
             'mount -t tmpfs -o size=%s tmpfs "$0" && : > "$1" && exec sleep 3600' % size,
             path, ready])
        fh.wait_for(lambda: os.path.exists(ready) or self.proc.poll() is not None,
                    "the small disk")
        assert self.proc.poll() is None, "unshare/mount failed"
        self.wrapper = wd.write("in-small-disk.sh", "#!/bin/sh\nexec nsenter -t %d -U -m "
                                "--preserve-credentials %s \"$@\"\n" % (self.proc.pid, fh.BIN))
        os.chmod(self.wrapper, 0o755)
        self.path = path

    def hub(self, *args, **kwargs):
        real, fh.BIN = fh.BIN, self.wrapper
        try:
            return fh.Hub(*args, **kwargs)
        finally:
            fh.BIN = real

    def used_bytes(self):
        out = subprocess.run(["nsenter", "-t", str(self.proc.pid), "-U", "-m",
                              "--preserve-credentials", "du", "-sb", self.path],
                             capture_output=True, check=True).stdout
        return int(out.split()[0])

    def close(self):
        self.proc.kill()
        self.proc.wait()


def test_full_disk_gives_space_back_and_repeats_nothing():
    """Case 2: a spill consumer fills its disk, then drains while the disk
    is still full. The cursor is still written, consumed segments go as it
    moves (the space comes back), a clean stop exits 0, and the next run
    finds nothing to deliver again."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n, size = 2500, 1000
    state = wd.file("state")
    disk = SmallDisk(wd, state)
    hold = wd.file("hold")

    def config(out):
        return (hub_yaml(pub, journal_yaml("spill", out, ", hold_file: %s" % json.dumps(hold),
                                           queue="{capacity: 10, overflow: spill}"),
                         state_dir=state)
                + "spool: {segment_bytes: 65536}\n")

    hub = disk.hub(wd, config(wd.file("run1")), name="run1")
    try:
        publish(pub, hub, n, size=size)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] >= n, "all received", hub=hub)
        # The spool's writer thread has written (or refused) all it was handed.
        fh.wait_for(lambda: consumer(hub, "spill")["enqueued"] == n
                    and consumer(hub, "spill")["spool_handoff"] == 0, "the spill written",
                    hub=hub)
        c = consumer(hub, "spill")
        assert c["dropped"] > 0 and c["spilled"] > 500, c   # the disk is full
        assert disk.used_bytes() > 1500 * 1024
        open(hold, "w").close()
        fh.wait_for(lambda: consumer(hub, "spill")["backlog"] == 0, "drained", hub=hub)
        c = consumer(hub, "spill")
        # Every message accepted and not lost to the full disk (evicted:
        # handed to the spool's writer, refused by the spool) completed.
        assert c["completed"] == c["enqueued"] - c["evicted"] and c["spool_bytes"] == 0, c
        # The consumed segments are gone: at most the one being written
        # (64 KiB) and the small files are left.
        fh.wait_for(lambda: disk.used_bytes() < 100 * 1024, "the space given back", hub=hub)
        assert hub.stop() == 0, hub.log()
        done = journal(wd.file("run1"))
        assert len(done) == c["completed"], (len(done), c)
        hub = disk.hub(wd, config(wd.file("run2")), name="run2")
        hub.wait_ready()
        c = consumer(hub, "spill")
        assert c["enqueued"] == 0 and c["backlog"] == 0, c   # nothing comes again
        assert hub.stop() == 0, hub.log()
        assert journal(wd.file("run2")) == []
        wd.cleanup()
    finally:
        hub.kill()
        disk.close()
        pub.close()


def test_store_kill_9_during_a_batch_loses_no_spooled_row():
    """Case 4: the store answers PENDING and completes each row only after
    its batch's COMMIT. A kill -9 while a batch cannot be committed (the
    database held by another writer) loses no row: with queue.write_ahead
    every message is in the spool before the store sees it, and after the
    restart every message is stored (a row written twice is skipped by its
    msg_id)."""
    import sqlite3
    wd = fh.Workdir()
    pub = fh.Publisher()
    state, db_path = wd.file("state"), wd.file("archive.db")
    first, n, capacity = 100, 1500, 10
    config = hub_yaml(pub, (
        "  - name: archive\n    plugin: store\n"
        "    queue: {capacity: %d, overflow: spill, write_ahead: true}\n"
        "    max_pending: 100000\n"
        "    retry: {max_attempts: 1000, initial_ms: 10, max_ms: 100}\n"
        "    options: {sqlite: %s, batch: 100000, batch_ms: 3600000}\n"
        % (capacity, json.dumps(db_path))), state_dir=state)

    def send(lo, hi):
        for i in range(lo, hi):
            pub.send("org.store.%d" % (i % 3), '{"msg_id":"m%d","i":%d}' % (i, i))

    def stored():
        db = sqlite3.connect(db_path, timeout=30)
        try:
            return set(r[0] for r in db.execute("SELECT msg_id FROM messages"))
        finally:
            db.close()

    hub = fh.Hub(wd, config, name="run1")
    holder = None
    try:
        pub.wait_subscribed(hub=hub)
        send(0, first)
        fh.wait_for(lambda: consumer(hub, "archive")["completed"] == first, "the first batch",
                    hub=hub)
        assert len(stored()) == first
        # Another writer holds the database: the next batch cannot commit.
        holder = sqlite3.connect(db_path, timeout=30, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        send(first, n)
        # Write-ahead: every message is in the spool once counted spilled.
        fh.wait_for(lambda: consumer(hub, "archive")["spilled"] == n, "all spooled", hub=hub)
        hub.wait_log("answering RETRY until the database is back")
        c = consumer(hub, "archive")
        assert c["completed"] == first, c   # nothing uncommitted counts as done
        hub.proc.send_signal(signal.SIGKILL)
        hub.wait()
        holder.execute("ROLLBACK")
        holder.close()
        holder = None
        hub = fh.Hub(wd, config, name="run2")
        want = set("m%d" % i for i in range(n))
        fh.wait_for(lambda: consumer(hub, "archive")["backlog"] == 0
                    and consumer(hub, "archive")["in_flight"] == 0, "the spool stored",
                    hub=hub)
        missing = want - stored()
        assert not missing, sorted(missing)[:20]
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        if holder is not None:
            holder.close()
        hub.kill()
        pub.close()


def test_spilled_is_not_done_until_consumed():
    """Case 5: a spilled message is handled (and answers emit --wait) when
    its spooled copy has been consumed, not when it was written."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    hub = fh.Hub(wd, hub_yaml(pub, journal_yaml(
        "slow", wd.file("out"), ", hold_file: %s" % json.dumps(hold),
        queue="{capacity: 2, overflow: spill}"), state_dir=wd.file("state")))
    try:
        publish(pub, hub, 10)
        fh.wait_for(lambda: consumer(hub, "slow")["spilled"] >= 7, "spilling", hub=hub)
        # Written to disk, consumed by nobody yet: not handled.
        assert hub.stats()["hub"]["handled"] == 0, hub.stats()["hub"]
        status, out, err = fh.run(["emit", "--wait", "--timeout", "0.5", "-e", hub.control,
                                   "org.ack.emit", '{"i":99}'])
        assert status == 124 and "slow: pending" in out, (status, out, err)
        open(hold, "w").close()
        status, out, err = fh.run(["emit", "--wait", "-e", hub.control, "org.ack.emit",
                                   '{"i":100}'])
        assert status == 0 and out == "slow: completed\n", (status, out, err)
        fh.wait_for(lambda: hub.stats()["hub"]["handled"] == 12, "all handled", hub=hub)
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_pending_counts_in_flight_until_completed,
             test_late_retry_fail_and_stuck,
             test_pool_spill_keeps_capacity_and_loses_nothing_on_stop,
             test_full_disk_gives_space_back_and_repeats_nothing,
             test_store_kill_9_during_a_batch_loses_no_spooled_row,
             test_spilled_is_not_done_until_consumed])
