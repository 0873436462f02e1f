"""Issue 39: a reload gives up on a plugin init that hangs. The reload
waits for a new instance's init at most shutdown_timeout; past it the
reload is refused (`fanhub reload` exits 4 and names the consumer and
the plugin), the old instance keeps receiving, and the stop is not held
longer than shutdown_timeout. Deadlines only turn a hang into a
failure: the inits here sleep far longer than the reload waits."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
from test_control_plane import crash_consumer, head, reload, rewrite, stop_within
from test_control_plane_hangs import hang_consumer

# What a sanitizer build may add to shutdown_timeout before an answer.
MARGIN_S = 10.0
EXIT_INIT_HUNG = 4


def completed(hub, name):
    return hub.consumer(hub.stats(), name)["completed"]


def publish(pub, hub, first, n):
    for i in range(first, first + n):
        pub.send("org.test.keep", '{"i":%d}' % i)


def swap_in_a_hanging_init(pub, hub, shutdown_timeout, init):
    """The running 'keep' gets 100 messages; the reload changes it to a
    plugin whose init sleeps `init`; returns the reload's outcome."""
    hub.wait_ready()
    pub.wait_subscribed(hub=hub)
    publish(pub, hub, 0, 100)
    fh.wait_for(lambda: completed(hub, "keep") == 100, "100 consumed before", hub=hub)
    rewrite(hub, head(pub, shutdown_timeout=shutdown_timeout)
            + hang_consumer("keep", init=init))
    return reload(hub, timeout=shutdown_timeout + MARGIN_S + 30)


def test_reload_gives_up_on_an_init_that_never_returns():
    """init never returns: the reload answers after shutdown_timeout with
    exit 4 and the reason; the old instance gets every message published
    after it; SIGTERM stops the hub within shutdown_timeout and a little,
    exit 1 naming the init (still inside its plugin)."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = head(pub, shutdown_timeout=2) + crash_consumer("keep")
    hub = fh.Hub(wd, config)
    try:
        status, out, err, took = swap_in_a_hanging_init(pub, hub, 2, "forever")
        assert status == EXIT_INIT_HUNG, (status, out, err, hub.log()[-3000:])
        assert took < 2 + MARGIN_S, took
        assert "consumer 'keep', plugin " in err and "hang.so: init did not return within 2 s" \
            in err and "running on the previous configuration" in err, err
        # The old instance goes on: 200 more, each one consumed by it.
        publish(pub, hub, 100, 200)
        fh.wait_for(lambda: completed(hub, "keep") == 300, "300 consumed after", hub=hub)
        c = hub.consumer(hub.stats(), "keep")
        assert c["dropped"] == 0 and c["backlog"] == 0, c
        assert "reload refused: init abandoned: consumer 'keep'" in hub.log(), hub.log()
        # A reload of a good file is applied meanwhile.
        rewrite(hub, config)
        status, out, err, _ = reload(hub)
        assert status == 0, (status, out, err)
        status = stop_within(hub, 2 + MARGIN_S)
        assert status == 1, hub.log()[-3000:]
        assert "the stop still waits for consumer 'keep', plugin " in hub.log() \
            and "hang.so (its init has not returned), abandoned by a reload" in hub.log(), \
            hub.log()[-3000:]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_an_abandoned_init_that_returns_later_is_discarded():
    """init returns 6 s after the reload gave up on it at 1 s: what it made
    is discarded (fini runs, logged) and the hub goes on with the old
    instance; the stop is then clean."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, head(pub, shutdown_timeout=1) + crash_consumer("keep"))
    try:
        start = time.monotonic()
        status, out, err, took = swap_in_a_hanging_init(pub, hub, 1, "7000")
        assert status == EXIT_INIT_HUNG, (status, out, err, hub.log()[-3000:])
        assert "init did not return within 1 s" in err, err
        hub.wait_log("the init a reload gave up on returned")
        assert time.monotonic() - start >= 7, "the init slept less than 7 s"
        assert "the instance it made is discarded" in hub.log(), hub.log()
        publish(pub, hub, 100, 50)
        fh.wait_for(lambda: completed(hub, "keep") == 150, "150 consumed", hub=hub)
        assert [c["name"] for c in hub.stats()["consumers"]] == ["keep"]
        assert stop_within(hub, 1 + MARGIN_S) == 0, hub.log()[-3000:]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_a_stop_during_a_hanging_init_is_prompt():
    """SIGTERM while the reload waits for an init that never returns: the
    reload gives up at once, the hub stops within shutdown_timeout and a
    little (exit 1, the init named), not shutdown_timeout twice."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = head(pub, shutdown_timeout=3) + crash_consumer("keep")
    hub = fh.Hub(wd, config)
    try:
        hub.wait_ready()
        rewrite(hub, head(pub, shutdown_timeout=30) + hang_consumer("keep", init="forever"))
        hub.send_signal(signal.SIGHUP)
        hub.wait_log("reloading")
        assert stop_within(hub, 3 + MARGIN_S) == 1, hub.log()[-3000:]
        assert "init had not returned when a stop came" in hub.log(), hub.log()[-3000:]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_reload_gives_up_on_an_init_that_never_returns,
             test_an_abandoned_init_that_returns_later_is_discarded,
             test_a_stop_during_a_hanging_init_is_prompt])
