"""Failure paths of the real binary: bad configuration, plugins that cannot
load or refuse their options, endpoints that cannot be bound, malformed bus
traffic, bad usage. Each must give a clear one-line error and the
documented exit status; malformed traffic must not stop the hub."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

LOCATED = re.compile(r"^fanhub[^\n]*: (\S+\.yaml):(\d+):(\d+): ", re.M)


def consumer_yaml(name, plugin, options=None):
    text = "  - name: %s\n    plugin: %s\n" % (name, plugin)
    if options:
        text += "    options: %s\n" % json.dumps(options)
    return text


def bus_yaml():
    return "bus:\n  connect: [tcp://127.0.0.1:%d]\nconsumers:\n" % fh.free_port()


def expect_config_error(wd, text, *parts):
    """`check` and `run` both refuse, exit 2, with FILE:LINE:COL and parts."""
    path = wd.write("bad.yaml", text)
    for command in (["check", "-c", path], ["run", "-c", path]):
        status, out, err = fh.run(command)
        assert status == 2, (command, status, err)
        for part in parts:
            assert part in err, (command, part, err)
    return err


def test_bad_yaml_and_keys():
    wd = fh.Workdir()
    cases = [
        ("bus: [unclosed\n", "YAML syntax error"),
        ("bus:\n  connect: [tcp://127.0.0.1:1]\n  rcvhm: 5\nconsumers:\n"
         + consumer_yaml("a", "\"null\""), "bus.rcvhm: unknown key"),
        ("bus:\n  connect: [udp://x:1]\nconsumers:\n" + consumer_yaml("a", "\"null\""),
         "udp"),
        ("bus:\n  connect: []\nconsumers:\n" + consumer_yaml("a", "\"null\""), "bus"),
        (bus_yaml() + consumer_yaml("a", "\"null\"") + consumer_yaml("a", "\"null\""), "'a'"),
        (bus_yaml() + "  - name: a\n    plugin: \"null\"\n    queue: {capacity: lots}\n",
         "queue.capacity"),
    ]
    for text, part in cases:
        err = expect_config_error(wd, text, part)
        assert LOCATED.search(err), err
    wd.cleanup()


def test_missing_plugin():
    wd = fh.Workdir()
    err = expect_config_error(wd, bus_yaml() + consumer_yaml("archive", "nosuchplugin"),
                              "consumer 'archive'", "nosuchplugin.so")
    assert LOCATED.search(err), err
    wd.cleanup()


def test_wrong_abi_and_not_a_plugin():
    wd = fh.Workdir()
    expect_config_error(wd, bus_yaml() + consumer_yaml("old", fh.TEST_PLUGINS + "/badabi.so"),
                        "consumer 'old'", "built for plugin ABI 2.0")
    expect_config_error(wd, bus_yaml() + consumer_yaml("x", fh.TEST_PLUGINS + "/nosymbol.so"),
                        "consumer 'x'", "exports no fanhub_consumer_entry")
    wd.cleanup()


def test_init_failure_names_consumer_and_reason():
    wd = fh.Workdir()
    err = expect_config_error(
        wd, bus_yaml() + consumer_yaml("notify", fh.TEST_PLUGINS + "/initfail.so",
                                       {"reason": "no SMTP relay configured"}),
        "consumer 'notify'", "no SMTP relay configured")
    assert LOCATED.search(err), err
    # A shipped plugin refusing a bad option says which and where.
    err = expect_config_error(wd, bus_yaml() + consumer_yaml("log", "log", {"colour": "red"}),
                              "consumer 'log'", "colour")
    wd.cleanup()


def test_missing_config_file():
    status, _, err = fh.run(["check", "-c", "/nonexistent/fanhub.yaml"])
    assert status == 2 and "/nonexistent/fanhub.yaml" in err, err


def test_default_config_checks():
    status, out, err = fh.run(["check"])
    assert status == 0, err
    assert "<default>: OK, 1 consumer" in out, out


def test_bind_failure_exits_1():
    wd = fh.Workdir()
    pub = fh.Publisher()  # holds the port
    path = wd.write("bind.yaml", "bus:\n  bind: [%s]\nconsumers:\n%s"
                    % (pub.endpoint, consumer_yaml("a", "\"null\"")))
    status, _, err = fh.run(["run", "-c", path])
    pub.close()
    assert status == 1, (status, err)
    assert "cannot bind %s" % pub.endpoint in err, err
    wd.cleanup()


def test_malformed_bus_messages_counted():
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\n  max_frames: 4\n  max_message_bytes: 1000\n"
              "consumers:\n  - name: all\n    plugin: log\n"
              "    options: {path: %s, flush_ms: 0}\n"
              % (pub.endpoint, json.dumps(wd.file("all.jsonl"))))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("good.1", "a")
        pub.send("only-a-topic")                      # no body
        pub.send(b"bad\xff\xfe.topic", "b")           # topic not UTF-8
        pub.send("t", "1", "2", "3", "4")             # 5 frames > 4
        pub.send("t", "x" * 2000)                     # 2001 bytes > 1000
        pub.send("good.2", "b", "extra")              # 3 frames: fine
        pub.send("good.3", "x" * 990)                 # 996 bytes: fine
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl")) >= 3, "3 good messages", hub=hub)
        assert hub.proc.poll() is None, "hub died"
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert ("received 7, malformed 4 (no_body 1, too_many_frames 1, too_large 1, "
                "topic_not_utf8 1), unrouted 0") in log, log
        assert "dropped a malformed bus message" in log
        topics = [l["topic"] for l in fh.read_jsonl(wd.file("all.jsonl"))]
        assert topics == ["good.1", "good.2", "good.3"], topics
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_usage_errors_and_help():
    for args in (["nosuchcommand"], ["run", "--nosuchoption"], ["check", "extra-arg"], []):
        status, _, err = fh.run(args)
        assert status == 2, (args, status, err)
    for args in (["--help"], ["run", "--help"], ["check", "--help"],
                 ["pub", "--help"], ["tail", "--help"]):
        status, out, _ = fh.run(args)
        assert status == 0 and "usage: fanhub" in out, (args, out)
    status, out, _ = fh.run(["--version"])
    assert status == 0 and re.match(r"fanhub \d+\.\d+\.\d+ \(plugin ABI 1\.\d+\)", out), out
    # A malformed -e is bad usage, said before anything is tried (collectd
    # used to wait for ever for a hub at "bogus").
    for command in (["stats"], ["reload"], ["collectd"], ["emit", "org.x", "{}"]):
        for endpoint, said in (("bogus", "expected ipc://PATH or tcp://HOST:PORT"),
                               ("tcp://127.0.0.1:", "expected a port from 1 to 65535"),
                               ("inproc://x", "expected ipc://PATH or tcp://HOST:PORT"),
                               ("ipc://@fanhub", "an abstract socket (ipc://@NAME) has no owner")):
            status, out, err = fh.run(command[:1] + ["-e", endpoint] + command[1:], timeout=30)
            assert status == 2 and out == "" and said in err, (command, endpoint, status, err)


def test_hostile_bus_traffic():
    """Random frames, an empty frame, 100 frames, more than 64 MiB, from a
    raw pyzmq client at the default limits: each counted by its reason,
    the hub alive, the good messages around them delivered."""
    import os
    import random
    wd = fh.Workdir()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: all\n    plugin: log\n"
              "    options: {path: %s, flush_ms: 0}\n"
              % (pub.endpoint, json.dumps(wd.file("all.jsonl"))))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        rng = random.Random(3)
        pub.send("good.0", "first")
        pub.send(b"")                                      # one empty frame
        pub.send(*[b"t"] + [b"x"] * 99)                    # 100 frames > 32
        pub.send("big", b"b" * (64 * 1024 * 1024 + 1))     # > 64 MiB
        random_bad = 0
        for _ in range(50):                                # random junk
            frames = [os.urandom(rng.randrange(0, 40)) for _ in range(rng.randrange(1, 5))]
            pub.send(*frames)
        pub.send("good.1", "last")
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 55, "55 received", hub=hub)
        stats = hub.stats()["hub"]
        by = stats["malformed_by_reason"]
        assert by["too_many_frames"] >= 1 and by["too_large"] == 1 and by["no_body"] >= 1, by
        assert stats["malformed"] == sum(by.values()) and stats["malformed"] >= 3, stats
        # Everything that was not malformed was delivered (it all matches).
        fh.wait_for(lambda: fh.count_lines(wd.file("all.jsonl"))
                    == 55 - hub.stats()["hub"]["malformed"], "the rest delivered", hub=hub)
        topics = [l["topic"] for l in fh.read_jsonl(wd.file("all.jsonl"))]
        assert topics[0] == "good.0" and topics[-1] == "good.1", topics[:3]
        assert hub.request("PING") == b"PONG"
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_one_consumer_name_rule():
    """Issue 28, item 9: the hub and `fanhub dead-letter` take the same
    consumer names: "." and ".." (a directory under state_dir) are refused
    by both, with FILE:LINE:COL from the hub; 64 characters pass both, 65
    neither."""
    wd = fh.Workdir()
    expect_config_error(wd, bus_yaml() + consumer_yaml("'..'", '"null"'),
                        "consumers[0].name", "may not start with '.'")
    state = wd.file("state")
    for name, ok in ((".", False), ("..", False), (".hidden", False), ("a" * 64, True),
                     ("a" * 65, False)):
        status, _, err = fh.run(["dead-letter", "list", "--state-dir", state, name])
        if ok:
            assert status != 2 or "not a consumer name" not in err, (name, err)
        else:
            assert status == 2 and "the hub's rule" in err, (name, status, err)
        path = wd.write("n.yaml", bus_yaml() + consumer_yaml(json.dumps(name), '"null"'))
        status, _, err = fh.run(["check", "-c", path])
        assert (status == 0) == ok, (name, status, err)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_bad_yaml_and_keys, test_missing_plugin, test_wrong_abi_and_not_a_plugin,
             test_init_failure_names_consumer_and_reason, test_missing_config_file,
             test_default_config_checks, test_bind_failure_exits_1,
             test_malformed_bus_messages_counted, test_hostile_bus_traffic,
             test_usage_errors_and_help, test_one_consumer_name_rule])
