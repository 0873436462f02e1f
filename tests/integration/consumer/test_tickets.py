"""Unfinished PENDING tickets are bounded (issue 28, item 2), against the
real hub: consume_timeout ends a ticket's attempt as a RETRY (a late
complete is counted and ignored); a reload or a stop waits for open
tickets at most shutdown_timeout, then abandons them (counted, logged,
delivered again from the spool); a ticket that is never completed does
not pin the spool's cursor, so a restart repeats nothing done after it.
The `journal` test plugin answers PENDING (async) and can hold every
ticket (hold_file) or forget some (never_marker)."""
import collections
import json
import os
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
from test_acknowledgements import consumer, hub_yaml, journal, journal_yaml, publish


def test_pending_past_consume_timeout_fails_the_attempt():
    """A ticket held past consume_timeout: the attempt fails and retries;
    the last one is dead-lettered; completes of the void tickets are
    counted in completions_late and change nothing."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    hub = fh.Hub(wd, hub_yaml(pub, journal_yaml(
        "async", wd.file("out"), ", async: true, hold_file: %s" % json.dumps(hold),
        extra="    consume_timeout: 1\n    retry: {max_attempts: 2, initial_ms: 1, max_ms: 2}\n"),
        state_dir=wd.file("state")))
    try:
        publish(pub, hub, 3)
        fh.wait_for(lambda: consumer(hub, "async")["failed"] == 3, "3 failed", hub=hub)
        c = consumer(hub, "async")
        assert c["tickets_expired"] == 6 and c["retried"] == 3, c
        assert c["dead_lettered"] == 3 and c["in_flight"] == 0 and c["completed"] == 0, c
        assert "pending for more than consume_timeout" in hub.log(), hub.log()
        status, out, _ = fh.run(["dead-letter", "list", "-c", hub.config, "async"])
        assert status == 0 and out.count("pending past consume_timeout") == 3, out
        open(hold, "w").close()  # the plugin completes its six void tickets now
        fh.wait_for(lambda: consumer(hub, "async")["completions_late"] == 6, "late completes",
                    hub=hub)
        c = consumer(hub, "async")
        assert c["completed"] == 0 and c["failed"] == 3, c
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_pending_without_a_ticket_is_held_until_consume_timeout():
    """A plugin that answers PENDING without asking for the message's
    ticket (msg_ticket) cannot complete it: the hub keeps the message open
    all the same, and consume_timeout ends its attempt as a RETRY, then the
    retries' last one is dead-lettered; the messages around it go on."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_yaml(pub, journal_yaml(
        "async", wd.file("out"), ", async: true, untaken_marker: '\"i\":1,'",
        extra="    consume_timeout: 1\n    retry: {max_attempts: 2, initial_ms: 1, max_ms: 2}\n"),
        state_dir=wd.file("state")))
    try:
        publish(pub, hub, 3)
        fh.wait_for(lambda: consumer(hub, "async")["failed"] == 1, "1 failed", hub=hub)
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == 2, "2 completed", hub=hub)
        c = consumer(hub, "async")
        assert c["tickets_expired"] == 2 and c["retried"] == 1, c
        assert c["dead_lettered"] == 1 and c["in_flight"] == 0, c
        assert c["completions_late"] == 0, c
        assert "pending for more than consume_timeout" in hub.log(), hub.log()
        assert sorted(i for _, i, _ in journal(wd.file("out"))) == [0, 2], wd.file("out")
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_reload_abandons_tickets_after_shutdown_timeout():
    """A reload of a consumer whose plugin never completes: the old
    instance waits shutdown_timeout for its tickets, abandons them, and
    the new instance starts, takes them again from the spool and runs."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    queue = "{overflow: spill, write_ahead: true}"

    def config(hold_file):
        return hub_yaml(pub, journal_yaml(
            "async", wd.file("out"), ", async: true, hold_file: %s" % json.dumps(hold_file),
            queue=queue, extra="    consume_timeout: 0\n"),
            state_dir=wd.file("state"), shutdown_timeout=2)
    hub = fh.Hub(wd, config(hold))
    try:
        publish(pub, hub, 20)
        fh.wait_for(lambda: consumer(hub, "async")["in_flight"] == 20, "20 pending", hub=hub)
        open(wd.file("go"), "w").close()
        wd.write("hub.yaml", config(wd.file("go")) + "control: %s\n" % hub.control)
        status, _, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, err
        for i in range(20, 220):  # subscribed already
            pub.send("org.ack.%d" % (i % 7), '{"i":%d,"vm":"vm0","pad":""}' % i)
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == 220, "all 220 completed",
                    hub=hub)
        c = consumer(hub, "async")
        assert c["tickets_abandoned"] == 20 and c["in_flight"] == 0, c
        assert "abandoned, counted in tickets_abandoned" in hub.log(), hub.log()
        done = [i for _, i, _ in journal(wd.file("out"))]
        assert sorted(done) == list(range(220)), done
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stop_abandons_tickets_and_restart_delivers_them():
    """SIGTERM with tickets that never complete: the hub gives them up
    within shutdown_timeout and exits 0; the next run delivers them."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hold = wd.file("hold")
    queue = "{overflow: spill, write_ahead: true}"
    text = hub_yaml(pub, journal_yaml(
        "async", wd.file("out"), ", async: true, hold_file: %s" % json.dumps(hold),
        queue=queue, extra="    consume_timeout: 0\n"),
        state_dir=wd.file("state"), shutdown_timeout=4)
    hub = fh.Hub(wd, text)
    try:
        publish(pub, hub, 30)
        fh.wait_for(lambda: consumer(hub, "async")["in_flight"] == 30, "30 pending", hub=hub)
        assert hub.stop() == 0, hub.log()
        assert "abandoned, counted in tickets_abandoned" in hub.log(), hub.log()
        open(hold, "w").close()
        hub = fh.Hub(wd, text, name="again")
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == 30, "30 redelivered",
                    hub=hub)
        assert sorted(s for s, _, _ in journal(wd.file("out"))) == list(range(1, 31))
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_never_completed_ticket_does_not_pin_the_cursor():
    """One message whose ticket is forgotten among 3,000: it expires and is
    dead-lettered, the cursor moves past it, and after a stop the next run
    repeats none of the 2,999 done after it (on main it repeated them all)."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    n = 3000
    queue = "{overflow: spill, write_ahead: true}"

    def config(pub):
        return hub_yaml(pub, journal_yaml(
            "async", wd.file("out"), ", async: true, batch: 50, never_marker: '\"i\":7,'",
            queue=queue,
            extra="    consume_timeout: 1\n    retry: {max_attempts: 2, initial_ms: 1, max_ms: 2}\n"),
            state_dir=wd.file("state"))
    hub = fh.Hub(wd, config(pub))
    try:
        publish(pub, hub, n)
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == n - 1
                    and consumer(hub, "async")["failed"] == 1, "all finished", hub=hub)
        c = consumer(hub, "async")
        assert c["tickets_expired"] == 2 and c["dead_lettered"] == 1, c
        assert hub.stop() == 0, hub.log()
        pub.close()
        pub = fh.Publisher()
        hub = fh.Hub(wd, config(pub), name="again")
        publish(pub, hub, 1, first=n + 1)  # one new message: the restart has read its spool
        fh.wait_for(lambda: consumer(hub, "async")["completed"] == 1, "the new one", hub=hub)
        repeated = [k for k, v in collections.Counter(
            i for _, i, _ in journal(wd.file("out"))).items() if v > 1]
        assert repeated == [], "%d repeated: %s" % (len(repeated), repeated[:20])
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_complete_after_fini_is_counted_not_a_crash():
    """Issue 39, item 6: a plugin completes a ticket from a thread of its
    own after a reload abandoned the ticket and the old instance's fini
    returned. The hub neither crashes nor touches freed memory (the ASan
    build says so): the complete is logged with the consumer's and the
    plugin's names and counted in completions_late; a complete of the new
    instance's ticket still counts as completed."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    done = wd.file("done")

    def config(delay_ms):
        return hub_yaml(pub, "  - name: late\n    plugin: %s/late.so\n    consume_timeout: 0\n"
                        "    options: {delay_ms: %d, done_file: %s}\n"
                        % (fh.TEST_PLUGINS, delay_ms, json.dumps(done)), shutdown_timeout=1)
    hub = fh.Hub(wd, config(5000))
    try:
        publish(pub, hub, 1)
        fh.wait_for(lambda: consumer(hub, "late")["in_flight"] == 1, "1 pending", hub=hub)
        wd.write("hub.yaml", config(0) + "control: %s\n" % hub.control)
        status, _, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, err
        hub.wait_log("abandoned, counted in tickets_abandoned")
        fh.wait_for(lambda: "the old instance is done" in hub.log(), "the old one gone",
                    hub=hub)
        fh.wait_for(lambda: len(fh.whole_lines(done)) == 1, "the late complete", hub=hub)
        fh.wait_for(lambda: consumer(hub, "late")["completions_late"] == 1, "counted", hub=hub)
        log = hub.log()
        assert ("complete: consumer 'late', plugin %s/late.so: ticket " % fh.TEST_PLUGINS) in log
        assert "completed after the instance was torn down (its fini had returned)" in log, log
        c = consumer(hub, "late")
        assert c["tickets_abandoned"] == 1 and c["in_flight"] == 0, c
        pub.send("org.ack.1", '{"i":1}')  # subscribed already; the new instance: at once
        fh.wait_for(lambda: consumer(hub, "late")["completed"] == 1, "completed", hub=hub)
        assert consumer(hub, "late")["completions_late"] == 1
        assert hub.request("PING") == b"PONG"
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_pending_past_consume_timeout_fails_the_attempt,
             test_pending_without_a_ticket_is_held_until_consume_timeout,
             test_reload_abandons_tickets_after_shutdown_timeout,
             test_stop_abandons_tickets_and_restart_delivers_them,
             test_never_completed_ticket_does_not_pin_the_cursor,
             test_complete_after_fini_is_counted_not_a_crash])
