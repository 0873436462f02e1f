"""Publisher gap detection: producers number their messages (fedmsg's `i`);
numbers a producer skipped are counted as lost upstream, a counter that
goes back as a restart, bodies without a counter as untracked."""
import json

import fanhublib as fh


def run(producer_spec, sends):
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\n  gap_detection: {counter: i, producer: \"%s\"}\n"
              "consumers:\n  - name: all\n    plugin: \"null\"\n" % (pub.endpoint, producer_spec))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for topic, body in sends:
            pub.send(topic, body)
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == len(sends), "all received",
                    hub=hub)
        upstream = hub.stats()["hub"]["upstream"]
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
        return upstream
    finally:
        hub.kill()
        pub.close()


def test_gaps_by_topic_prefix():
    sends = []
    # Producer A (org.a.prod.*): 1..10 with 4 and 7 missing -> 2 lost.
    for i in [1, 2, 3, 5, 6, 8, 9, 10]:
        sends.append(("org.a.prod.x%d" % (i % 2), json.dumps({"i": i, "msg": {}})))
    # Producer B: 1..5, then a restart at 1, then 2..3 -> 0 lost, 1 restart.
    for i in [1, 2, 3, 4, 5, 1, 2, 3]:
        sends.append(("org.b.prod.y", json.dumps({"i": i})))
    # Producer C: 100 then 150 -> 49 lost.
    sends += [("org.c.prod.z", '{"i":100}'), ("org.c.prod.z", '{"i":150}')]
    # Untracked: not JSON, no counter, a counter that is not an integer.
    sends += [("org.a.prod.q", "not json"), ("org.a.prod.q", '{"x":1}'),
              ("org.a.prod.q", '{"i":"7"}')]
    upstream = run("topic_prefix:3", sends)
    assert upstream == {"lost": 2 + 49, "restarts": 1, "untracked": 3, "producers": 3}, upstream


def test_gaps_by_json_pointer():
    sends = [("t", json.dumps({"i": i, "meta": {"host": h}}))
             for h, numbers in (("h1", [1, 2, 5]), ("h2", [7, 8, 9]))
             for i in numbers]
    sends.append(("t", json.dumps({"i": 3})))  # no producer in the body
    upstream = run("json:/meta/host", sends)
    assert upstream == {"lost": 2, "restarts": 0, "untracked": 1, "producers": 2}, upstream


def test_lost_never_negative_at_the_ends_of_int64():
    """Issue 28, item 9: counters at the ends of a signed 64-bit integer
    made upstream.lost overflow (-9.2e18). The difference is taken without
    overflow: never negative. Issue 39, item 8: such a leap is no loss a
    bus could have had; it counts as a restart, lost stays 0."""
    top, bottom = 2 ** 63 - 1, -2 ** 63
    sends = [("org.a.prod.x", json.dumps({"i": i})) for i in (bottom, top)]
    sends += [("org.b.prod.y", json.dumps({"i": i})) for i in (1, top)]
    upstream = run("topic_prefix:3", sends)
    assert upstream["lost"] == 0 and upstream["restarts"] == 2, upstream


def test_one_bogus_counter_does_not_pin_lost():
    """Issue 39, item 8: one fedmsg body with i = 2^63 - 1 among a
    producer's 1..10 used to pin upstream.lost at 2^63 - 1 for good. Now
    it costs two restarts (the leap, and the way back), and a true gap
    after it is still counted; a leap of exactly 2^20 is still a loss."""
    numbers = [1, 2, 3, 4, 5, 2 ** 63 - 1, 6, 7, 8, 10, 11]
    sends = [("org.a.prod.x", json.dumps({"i": i})) for i in numbers]
    sends += [("org.b.prod.y", json.dumps({"i": i})) for i in (1, 1 + 2 ** 20, 2 + 2 ** 20)]
    upstream = run("topic_prefix:3", sends)
    assert upstream == {"lost": 1 + (2 ** 20 - 1), "restarts": 2, "untracked": 0,
                        "producers": 2}, upstream


def test_bad_gap_config_refused():
    wd = fh.Workdir()
    path = wd.write("c.yaml", "bus:\n  connect: [tcp://127.0.0.1:1]\n"
                    "  gap_detection: {counter: i, producer: \"host\"}\n"
                    "consumers:\n  - name: a\n    plugin: \"null\"\n")
    status, _, err = fh.run(["check", "-c", path])
    assert status == 2 and "bus.gap_detection.producer" in err, err
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_gaps_by_topic_prefix, test_lost_never_negative_at_the_ends_of_int64,
             test_one_bogus_counter_does_not_pin_lost, test_gaps_by_json_pointer,
             test_bad_gap_config_refused])
