"""Consumers written as their own documentation shows them run unchanged
with the shipped Python runner: fedmsg's FedmsgConsumer subclass, a Moksha
Consumer subclass and fedora-messaging's callable class and function (the
files in tests/integration/workers/), fed the real Fedora messages of
tests/data/fedmsg-sample.jsonl."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl


def sample():
    with open(os.path.join(fh.DATA_DIR, "fedmsg-sample.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_sample(wd, options, expect_completed=None):
    """A hub with one consumer `c` of plugin python with these options,
    fed the whole sample; returns (its stats, the hub's log)."""
    messages = sample()
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: c\n    plugin: python\n"
              "    options: %s\n" % (pub.endpoint, options))
    hub = fh.Hub(wd, config)
    try:
        pub.wait_subscribed(hub=hub)
        for m in messages:
            pub.send(m["topic"], json.dumps(m["body"], sort_keys=True, separators=(",", ":")))
        fh.wait_for(lambda: hub.consumer(hub.stats(), "c")["completed"] == len(messages),
                    "the sample completed", hub=hub)
        c = hub.consumer(hub.stats(), "c")
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    return c, hub.log()


def test_a_fedmsg_consumer_runs_unchanged():
    wd = fh.Workdir()
    rawhide = [m for m in sample()
               if m["topic"] == "org.fedoraproject.prod.compose.rawhide.complete"]
    assert rawhide
    c, log = run_sample(wd, '{callable: "fedmsg_doc:MyConsumer", path: [%s], '
                        'config: {myconsumer.enabled: true}}' % json.dumps(wl.WORKERS_DIR))
    # Its topic filters; what it prints reaches the hub's log (the message
    # as moksha's _consume_json makes it: body first).
    assert c["failed"] == 0 and c["skipped"] == len(sample()) - len(rawhide), c
    printed = [line for line in log.splitlines()
               if "consumer 'c': worker 0: {'body': {" in line and line.endswith(
                   "'topic': 'org.fedoraproject.prod.compose.rawhide.complete'}")]
    assert len(printed) == len(rawhide), log[-3000:]
    # fedmsg leaves a consumer whose config_key is not true disabled: here
    # that is an error at `run`.
    pub = fh.Publisher()
    config = wd.write("off.yaml", "bus:\n  connect: [%s]\nconsumers:\n  - name: c\n"
                      "    plugin: python\n    options: {callable: \"fedmsg_doc:MyConsumer\","
                      " path: [%s], config: {myconsumer.enabled: false}}\n"
                      % (pub.endpoint, json.dumps(wl.WORKERS_DIR)))
    status, out, err = fh.run(["run", "-c", config])
    pub.close()
    assert status != 0 and "config_key 'myconsumer.enabled' is not true in the consumer's " \
        "options.config" in err, err
    wd.cleanup()


def test_a_moksha_consumer_runs_unchanged():
    wd = fh.Workdir()
    builds = [m for m in sample() if m["topic"].endswith(".buildsys.build.state.change")]
    assert builds
    c, log = run_sample(wd, '{callable: "moksha_doc:MyConsumer", path: [%s]}'
                        % json.dumps(wl.WORKERS_DIR))
    assert c["failed"] == 0 and c["skipped"] == len(sample()) - len(builds), c
    # self.log is Python logging (moksha's logger, moksha.hub), which the
    # runner sends to the hub's log.
    for m in builds:
        line = "consumer 'c': worker 0: moksha.hub: %s: build %s" % (
            m["topic"], m["body"]["msg"]["build_id"])
        assert line in log, line
    wd.cleanup()


def test_a_fedora_messaging_consumer_runs_unchanged():
    wd = fh.Workdir()
    messages = sample()
    saved = os.path.join(wd.file("messages"), "messages.txt")  # the class makes the directory
    c, log = run_sample(wd, '{callable: "fm_doc:SaveMessage", path: [%s], config: {path: %s}}'
                        % (json.dumps(wl.WORKERS_DIR), json.dumps(saved)))
    assert c["failed"] == 0 and c["skipped"] == 0, c
    with open(saved) as f:
        text = f.read()
    for m in messages:
        if "msg_id" in m["body"]:
            assert "Message(id=%r, topic=%r" % (m["body"]["msg_id"], m["topic"]) in text, m
    # The quick start's function, printing each message.
    wd2 = fh.Workdir()
    c, log = run_sample(wd2, '{callable: "fm_doc:printer_callback", path: [%s]}'
                        % json.dumps(wl.WORKERS_DIR))
    assert c["failed"] == 0 and log.count("consumer 'c': worker 0: Message(id=") >= 50, log[-2000:]
    wd.cleanup()
    wd2.cleanup()


def test_a_moksha_topic_matches_as_moksha_subscribed():
    """Moksha's zeromq hub subscribed to a class's topic with its '*' taken
    out, as a prefix: a topic that starts with it matches; so does one
    that matches it as a pattern (the documentation's '*' in the middle)."""
    import sys
    sys.path.insert(0, os.path.join(fh.SOURCE_DIR, "consumers", "worker", "python"))
    from fanhub_worker.runner import topic_matcher
    matches = topic_matcher(["org.fedoraproject.prod.buildsys"])
    assert matches("org.fedoraproject.prod.buildsys.build.state.change")
    assert not matches("org.fedoraproject.stg.buildsys.build.state.change")
    matches = topic_matcher(["org.fedoraproject.prod.buildsys.*", "org.x"])
    assert matches("org.fedoraproject.prod.buildsys.tag") and matches("org.x.y")
    matches = topic_matcher(["org.fedoraproject.*.buildsys.build.state.change"])
    assert matches("org.fedoraproject.stg.buildsys.build.state.change")
    assert not matches("org.fedoraproject.stg.buildsys.tag")


if __name__ == "__main__":
    fh.main([test_a_fedmsg_consumer_runs_unchanged, test_a_moksha_consumer_runs_unchanged,
             test_a_fedora_messaging_consumer_runs_unchanged,
             test_a_moksha_topic_matches_as_moksha_subscribed])
