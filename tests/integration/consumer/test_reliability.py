"""Reliability against the real hub: retries keep order and are counted,
failures are counted, a stuck consume call is reported (and cleared) while
the rest of the hub carries on."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh


def test_retry_keeps_order_and_counts():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: flaky\n    plugin: %s/flaky.so\n"
              "    retry: {max_attempts: 5, initial_ms: 1, max_ms: 4}\n"
              "    options: {retries: 2, path: %s}\n"
              % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(wd.file("calls"))))
    hub = fh.Hub(wd, config)
    n = 200
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send("org.retry", "%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "flaky")["completed"] == n,
                    "every message to complete", hub=hub)
        c = hub.consumer(hub.stats(), "flaky")
        assert c["retried"] == 2 * n and c["failed"] == 0 and c["backlog"] == 0, c
        with open(wd.file("calls")) as f:
            calls = [line.split() for line in f]
        # In execution order: each message's three calls, then the next one.
        expected = []
        for seq in range(1, n + 1):
            expected += [[str(seq), "1", "retry"], [str(seq), "2", "retry"],
                         [str(seq), "3", "ok"]]
        assert calls == expected, calls[:12]
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_attempts_used_up_count_as_failed():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: flaky\n    plugin: %s/flaky.so\n"
              "    retry: {max_attempts: 3, initial_ms: 1, max_ms: 2}\n"
              "    options: {retries: 100}\n"
              % (pub.endpoint, fh.TEST_PLUGINS))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(20):
            pub.send("org.retry", "%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "flaky")["failed"] == 20, "20 failed",
                    hub=hub)
        c = hub.consumer(hub.stats(), "flaky")
        assert c["retried"] == 40 and c["completed"] == 0, c
        assert hub.stop() == 0, hub.log()
        assert "consume answered RETRY 3 times (retry.max_attempts)" in hub.log(), hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_stuck_consumer_reported_and_cleared():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: stuck\n    plugin: %s/sleep.so\n    consume_timeout: 0.2\n"
              "    options: {release_file: %s}\n"
              "  - name: fast\n    plugin: \"null\"\n"
              % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(wd.file("release"))))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(5):
            pub.send("org.stuck", "%d" % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "stuck")["stuck"] == 1,
                    "the stuck gauge", hub=hub)
        stats = hub.stats()
        assert hub.consumer(stats, "fast")["completed"] == 5  # the rest carries on
        status, out, _ = fh.run(["stats", "-e", hub.control, "-f", "prometheus"])
        assert 'fanhub_consumer_stuck{consumer="stuck"} 1' in out, out
        open(wd.file("release"), "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "stuck")["stuck"] == 0,
                    "the stuck gauge to clear", hub=hub)
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert log.count("consumer 'stuck': consume of message 1 has been running") == 1, log
        assert "consumer 'stuck': no longer stuck" in log, log
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_retry_keeps_order_and_counts, test_attempts_used_up_count_as_failed,
             test_stuck_consumer_reported_and_cleared])
