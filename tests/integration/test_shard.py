"""Broker-less shards (`consumers[].shard`): several hubs on one ZeroMQ bus,
each taking its share of the keys, with nothing between them.

Two real `fanhub run` hubs subscribe to the same publisher, one `log`
consumer each with shard 0 and 1 of 2 (by a JSON member of the body): what
they wrote is disjoint, their union is every message published, each key
lives in one hub only, and per key the order is the publish order. The
same with two consumers of one hub (by topic, the default key). Then:
every hub computes the same shard as the documented hash (FNV-1a 64 of the
key, modulo N), `unrouted` counts what a hub leaves to the others, a
reload that moves a consumer to another shard takes effect, and `fanhub
check` refuses a bad shard."""
import json
import os

import zmq

import fanhublib as fh

N = 20_000
KEYS = 97


def fnv1a_64(data):
    h = 14695981039346656037
    for b in data:
        h ^= b
        h = (h * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_of(key, count):
    return fnv1a_64(key.encode()) % count


def consumer_yaml(name, path, shard, count, order_by=None, topics=None):
    text = "  - name: %s\n    plugin: log\n" % name
    if topics:
        text += "    topics: %s\n" % fh.yaml_list(topics)
    if order_by:
        text += "    order_by: %s\n" % order_by
    text += "    shard: {index: %d, count: %d}\n" % (shard, count)
    text += "    queue: {capacity: %d}\n" % (N + 10)
    text += "    options: {path: %s, flush_ms: 20}\n" % json.dumps(path)
    return text


def bodies(lines):
    return [json.loads(line["body"]) for line in lines]


def test_two_hubs_split_the_keys():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hubs, paths = [], []
    try:
        for i in range(2):
            path = wd.file("shard%d.jsonl" % i)
            paths.append(path)
            config = ("bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n" % pub.endpoint
                      + consumer_yaml("work", path, i, 2, order_by="{json: /user}"))
            hubs.append(fh.Hub(wd, config, name="hub%d" % i))
        # Verbose: XPUB reports the second hub's identical subscription too.
        pub.sock.setsockopt(zmq.XPUB_VERBOSE, 1)
        for hub in hubs:
            pub.wait_subscribed(hub=hub)
        for i in range(N):
            user = "user%d" % (i % KEYS)
            pub.send("org.test.work", json.dumps({"user": user, "n": i}))
        fh.wait_for(lambda: sum(fh.count_lines(p) for p in paths) >= N, "both shards logged their share", hub=hubs[0])
        for hub in hubs:
            assert hub.stop() == 0, hub.log()
        got = [bodies(fh.read_jsonl(p)) for p in paths]
        seen = [b["n"] for part in got for b in part]
        assert sorted(seen) == list(range(N)), "not every message exactly once"
        for index, part in enumerate(got):
            users = {b["user"] for b in part}
            for user in users:
                assert shard_of(user, 2) == index, (user, index)
            # Per key, publish order.
            last = {}
            for b in part:
                assert last.get(b["user"], -1) < b["n"], b
                last[b["user"]] = b["n"]
        assert got[0] and got[1], "one shard took nothing"
    finally:
        for hub in hubs:
            hub.kill()
        pub.close()
    wd.cleanup()



def test_two_consumers_of_one_hub_by_topic():
    wd = fh.Workdir()
    pub = fh.Publisher()
    paths = [wd.file("c%d.jsonl" % i) for i in range(3)]
    config = "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n" % pub.endpoint
    for i in range(3):
        config += consumer_yaml("c%d" % i, paths[i], i, 3)
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        topics = ["org.test.k%d" % k for k in range(KEYS)]
        for i in range(N):
            pub.send(topics[i % KEYS], json.dumps({"n": i}))
        fh.wait_for(lambda: sum(fh.count_lines(p) for p in paths) >= N, "3 shards logged",
                    hub=hub)
        stats = hub.stats()
        assert hub.stop() == 0, hub.log()
        seen = []
        for index, path in enumerate(paths):
            for line in fh.read_jsonl(path):
                assert shard_of(line["topic"], 3) == index, (line["topic"], index)
                seen.append(json.loads(line["body"])["n"])
        assert sorted(seen) == list(range(N))
        # Every message matched some consumer: nothing unrouted.
        assert stats["hub"]["unrouted"] == 0, stats["hub"]
        assert sum(hub.consumer(stats, "c%d" % i)["enqueued"] for i in range(3)) == N
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_what_a_hub_leaves_is_unrouted_and_reload_moves_the_shard():
    wd = fh.Workdir()
    pub = fh.Publisher()
    path = wd.file("mine.jsonl")
    head = "bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n" % pub.endpoint
    hub = fh.Hub(wd, head + consumer_yaml("mine", path, 0, 2))
    try:
        pub.wait_subscribed(hub=hub)
        topics = ["org.test.k%d" % k for k in range(KEYS)]
        mine = [t for t in topics if shard_of(t, 2) == 0]
        for t in topics:
            pub.send(t, "{}")
        fh.wait_for(lambda: fh.count_lines(path) >= len(mine), "shard 0 logged", hub=hub)
        fh.wait_for(lambda: hub.stats()["hub"]["unrouted"] == len(topics) - len(mine),
                    "the other shard's messages counted as unrouted", hub=hub)
        assert sorted(l["topic"] for l in fh.read_jsonl(path)) == sorted(mine)
        # A reload to shard 1 makes a new instance that takes the others.
        other = wd.file("other.jsonl")
        with open(hub.config, "w") as f:
            f.write(head + consumer_yaml("mine", other, 1, 2)
                    + "control: %s\n" % hub.control)
        reply = hub.request("RELOAD")
        assert reply.startswith(b"OK"), reply
        for t in topics:
            pub.send(t, "{}")
        fh.wait_for(lambda: fh.count_lines(other) >= len(topics) - len(mine),
                    "shard 1 logged after the reload", hub=hub)
        assert hub.stop() == 0, hub.log()
        assert sorted(l["topic"] for l in fh.read_jsonl(other)) == sorted(set(topics) - set(mine))
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_check_refuses_a_bad_shard():
    wd = fh.Workdir()
    cases = [
        ("{index: 2, count: 2}", "consumers[0].shard: expected {index: I, count: N}"),
        ("{index: 0}", "consumers[0].shard: expected {index: I, count: N}"),
        ("3", "consumers[0].shard: expected {index: I, count: N}"),
    ]
    for shard, error in cases:
        path = wd.write("bad.yaml", "bus:\n  connect: [tcp://127.0.0.1:1]\nconsumers:\n"
                        "  - name: c\n    plugin: log\n    shard: %s\n"
                        "    options: {path: %s}\n" % (shard, json.dumps(wd.file("x"))))
        status, out, err = fh.run(["check", "-c", path])
        assert status != 0, (shard, out, err)
        assert error in err, (shard, err)
        assert not os.path.exists(wd.file("x"))
    wd.cleanup()


if __name__ == "__main__":
    fh.main([
        test_two_hubs_split_the_keys,
        test_two_consumers_of_one_hub_by_topic,
        test_what_a_hub_leaves_is_unrouted_and_reload_moves_the_shard,
        test_check_refuses_a_bad_shard,
    ])
