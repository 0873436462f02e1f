"""Consumers apart: a slow or stuck consumer never holds up a fast one, and
on SIGTERM every queued message is consumed before the hub exits 0.

The slow consumer is the `sleep` test plugin blocked on a release file that
the test creates: its backlog is then a fact of the scenario, not a race."""
import json
import os
import re
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

N = 2000


def config_for(pub, wd, shutdown_timeout=60, slow_capacity=N + 10):
    return ("bus:\n  connect: [%s]\nshutdown_timeout: %s\nconsumers:\n"
            "  - name: slow\n    plugin: %s/sleep.so\n"
            "    queue: {capacity: %d}\n"
            "    options: {ms: 0, release_file: %s}\n"
            "  - name: fast\n    plugin: log\n"
            "    options: {path: %s, flush_ms: 20}\n"
            % (pub.endpoint, shutdown_timeout, fh.TEST_PLUGINS, slow_capacity,
               json.dumps(wd.file("release")), json.dumps(wd.file("fast.jsonl"))))


def publish(pub, n, hub):
    pub.wait_subscribed(hub=hub)
    for i in range(n):
        pub.send("org.fanhub.test.%d" % (i % 7), '{"i":%d}' % i)


def test_slow_consumer_does_not_hold_up_fast_one():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config_for(pub, wd, shutdown_timeout=0))
    try:
        publish(pub, N, hub)
        # The fast consumer gets everything while the slow one is stuck on
        # its first message.
        fh.wait_for(lambda: fh.count_lines(wd.file("fast.jsonl")) >= N, "fast consumer", hub=hub)
        bodies = [l["body"] for l in fh.read_jsonl(wd.file("fast.jsonl"))]
        assert bodies == ['{"i":%d}' % i for i in range(N)]
        # shutdown_timeout 0 with the slow one stuck: the hub gives up at
        # once, exits 1 and says what was left.
        assert hub.stop() == 1, hub.log()
        log = hub.log()
        assert "consumer 'slow': still busy: shutdown_timeout expired" in log, log
        assert re.search(r"consumer 'slow': enqueued %d, completed 0, failed 0, "
                         r"dropped 0 \(queue full\), unconsumed %d" % (N, N - 1), log), log
        assert "consumer 'fast': enqueued %d, completed %d" % (N, N) in log, log
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_sigterm_consumes_everything_queued():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config_for(pub, wd))
    try:
        publish(pub, N, hub)
        fh.wait_for(lambda: fh.count_lines(wd.file("fast.jsonl")) >= N, "fast consumer", hub=hub)
        # Everything is queued for 'slow' (stuck on message 1). Stop first,
        # then unblock it: the queue must be drained before the hub exits.
        hub.send_signal(signal.SIGTERM)
        hub.wait_log("stopping; consumers finish their queues")
        open(wd.file("release"), "w").close()
        assert hub.wait() == 0, hub.log()
        log = hub.log()
        assert "consumer 'slow': enqueued %d, completed %d, failed 0, dropped 0 " \
               "(queue full), unconsumed 0" % (N, N) in log, log
        assert "stopped" in log
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_full_queue_drops_newest_and_counts():
    """Until overflow policies exist, a full queue drops the newest message
    and counts it; the other consumer is not affected."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    capacity = 100
    hub = fh.Hub(wd, config_for(pub, wd, slow_capacity=capacity))
    try:
        publish(pub, N, hub)
        fh.wait_for(lambda: fh.count_lines(wd.file("fast.jsonl")) >= N, "fast consumer", hub=hub)
        hub.send_signal(signal.SIGTERM)
        hub.wait_log("stopping; consumers finish their queues")
        open(wd.file("release"), "w").close()
        assert hub.wait() == 0, hub.log()
        log = hub.log()
        # The queue holds `capacity`; one more may have been taken into the
        # blocked consume before it filled. Whatever the split, every message
        # is either consumed or counted as dropped.
        m = re.search(r"consumer 'slow': enqueued (\d+), completed (\d+), failed 0, "
                      r"dropped (\d+) \(queue full\), unconsumed 0", log)
        assert m, log
        enqueued, completed, dropped = map(int, m.groups())
        assert enqueued in (capacity, capacity + 1), log
        assert completed == enqueued and enqueued + dropped == N, log
        assert "consumer 'fast': enqueued %d, completed %d, failed 0, dropped 0" % (N, N) in log
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_second_signal_exits_at_once():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config_for(pub, wd))
    try:
        publish(pub, 10, hub)
        fh.wait_for(lambda: fh.count_lines(wd.file("fast.jsonl")) >= 10, "fast consumer", hub=hub)
        hub.send_signal(signal.SIGTERM)
        hub.wait_log("stopping; consumers finish their queues")
        assert hub.stop(signal.SIGINT) == 1  # 'slow' is still stuck
        assert "exiting without draining (a second signal)" in hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_failing_consumer_counted():
    """A consumer whose plugin fails some messages: every failure counted and
    logged (rate-limited), the hub and the other consumer carry on."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: flaky\n    plugin: %s/count.so\n"
              "    options: {path: %s, fail_every: 10}\n"
              "  - name: fast\n    plugin: log\n    options: {path: %s, flush_ms: 0}\n"
              % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(wd.file("count")),
                 json.dumps(wd.file("fast.jsonl"))))
    hub = fh.Hub(wd, config)
    try:
        publish(pub, 1000, hub)
        fh.wait_for(lambda: fh.count_lines(wd.file("fast.jsonl")) >= 1000, "fast consumer", hub=hub)
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert "consumer 'flaky': enqueued 1000, completed 900, failed 100, dropped 0" in log, log
        # Logged, but rate-limited: far fewer lines than failures.
        assert 1 <= len(re.findall(r"consumer 'flaky': message \d+ .* failed", log)) < 10, log
        with open(wd.file("count")) as f:
            assert f.read().strip() == "1000"
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_slow_consumer_does_not_hold_up_fast_one,
             test_sigterm_consumes_everything_queued,
             test_full_queue_drops_newest_and_counts,
             test_second_signal_exits_at_once,
             test_failing_consumer_counted])
