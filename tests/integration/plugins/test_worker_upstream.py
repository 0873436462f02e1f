"""The Python runner meets the contracts of the real moksha, fedmsg and
fedora-messaging packages: their stand-ins in tests/integration/upstream
(each following an upstream file and commit) are on the consumer's
`path:`, so they are what the consumer imports, not the runner's own.

- A Moksha Consumer subclass: its __init__ subscribes through
  hub.subscribe, finds moksha.blocking_mode true, and every message goes
  through the callback it subscribed; True, False and None answer OK, FAIL
  and DROP; stop() (and hub.close()) at the end.
- A FedmsgConsumer subclass with signature checks: a message whose
  signature or topic does not check out is DROP, one that does runs.
- A relay calling self.send_message: PUBLISH frames (worker protocol 2),
  read here by a hub written in the test (the hub's side of PUBLISH lands
  later); on a protocol-1 hub it says why it cannot, and the runner's
  fedmsg.publish builds fedmsg's topic.
- fedora-messaging: the callback gets the stand-in's own Message (a
  schema header picks the class) and consumer_config is options.config,
  the LazyConfig never reading its file; porting.md's SaveMessage runs.
"""
import json
import os
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl

UPSTREAM_DIR = os.path.join(fh.SOURCE_DIR, "tests", "integration", "upstream")
RUNNER = os.path.join(fh.SHIPPED_PLUGINS, "worker-python", "fanhub_worker", "__main__.py")
PATHS = json.dumps([UPSTREAM_DIR, wl.WORKERS_DIR])


def events(path, kind=None):
    found = fh.read_jsonl(path) if os.path.exists(path) else []
    return [e for e in found if kind is None or e["event"] == kind]


def run_hub(wd, options, messages, wait, env=None, events_file="events.jsonl"):
    """A hub with consumer `c` (plugin python, these options), fed
    messages [(topic, body: JSON-encoded unless bytes)] until wait(stats
    of c); returns c's stats, the events file and the hub's log."""
    out = wd.file(events_file)
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: c\n    plugin: python\n"
              "    options: %s\n" % (pub.endpoint, options))
    hub = fh.Hub(wd, config, env=dict(env or {}, UPSTREAM_TEST_OUT=out))
    try:
        pub.wait_subscribed(hub=hub)
        for topic, body in messages:
            pub.send(topic, body if isinstance(body, bytes) else json.dumps(body))
        fh.wait_for(lambda: wait(hub.consumer(hub.stats(), "c")), "the messages answered",
                    hub=hub)
        c = hub.consumer(hub.stats(), "c")
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    return c, out, hub.log()


def test_a_moksha_consumer_runs_as_moksha_runs_it():
    wd = fh.Workdir()
    messages = [("org.test.a", {"i": 1}), ("org.test.bee", {"i": 2}),
                ("org.test.a", {"i": 3, "fail": True}), ("org.test.a", {"i": 4, "invalid": True}),
                ("org.test.other", {"i": 5}), ("org.test.a", b"not json")]
    c, out, log = run_hub(wd, '{callable: "upstream_consumers:Recorder", path: %s}' % PATHS,
                          messages, lambda c: c["completed"] + c["failed"] == 6)
    # OK: 1, 2 and the text body; FAIL: consume raised, validate raised
    # (moksha's _do_work returns False for both); DROP: no subscription.
    assert (c["completed"], c["failed"], c["skipped"]) == (4, 2, 1), c
    assert [e["topic"] for e in events(out, "subscribe")] == ["org.test.a", "org.test.b*"]
    assert [e["value"] for e in events(out, "blocking_mode")] == [True]
    consumed = [(e["topic"], e["body"]) for e in events(out, "consume")]
    assert consumed == [("org.test.a", {"i": 1}), ("org.test.bee", {"i": 2}),
                        ("org.test.a", {"i": 3, "fail": True}), ("org.test.a", "not json")], \
        consumed
    assert [e["event"] for e in events(out)][-2:] == ["stop", "hub.close returned"], events(out)
    assert "RuntimeError: failed on purpose: 3" in log, log  # moksha logged the traceback
    wd.cleanup()


def signed(topic, msg_id, good=True, envelope_topic=None, **msg):
    return (topic, {"topic": envelope_topic or topic, "msg": msg, "msg_id": msg_id,
                    "certificate": "Q0VSVA==",
                    "signature": ("signed:" if good else "forged:") + msg_id})


def test_a_fedmsg_consumer_checks_signatures():
    wd = fh.Workdir()
    messages = [signed("org.test.signed", "m1"), signed("org.test.signed", "m2", good=False),
                signed("org.test.signed", "m3", envelope_topic="org.test.elsewhere"),
                signed("org.test.signed", "m4", fail=True), signed("org.test.signed", "m5")]
    options = ('{callable: "upstream_consumers:Signed", path: %s, config: {signed.enabled: true,'
               ' validate_signatures: true}}' % PATHS)
    c, out, log = run_hub(wd, options, messages, lambda c: c["completed"] + c["failed"] == 5)
    assert (c["completed"], c["failed"], c["skipped"]) == (4, 1, 2), c
    assert [e["msg_id"] for e in events(out, "consume")] == ["m1", "m4", "m5"]
    checked = {e["msg_id"]: e["ok"] for e in events(out, "crypto.validate")}
    assert checked == {"m1": True, "m2": False, "m4": True, "m5": True}, checked
    assert "Received invalid message Failed to authn message." in log, log
    wd.cleanup()


class RawHub:
    """The hub's side of docs/worker-protocol.md, for one shipped runner
    on a socketpair: HELLO of the given protocol, then frames."""

    def __init__(self, wd, options, protocol=2):
        self.sock, worker = socket.socketpair()
        self.sock.settimeout(fh.DEADLINE)
        env = dict(os.environ, FANHUB_WORKER_FD=str(worker.fileno()), FANHUB_CONSUMER="c",
                   UPSTREAM_TEST_OUT=wd.file("events.jsonl"))
        self.proc = subprocess.Popen([wl.PYTHON, RUNNER], pass_fds=[worker.fileno()], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        worker.close()
        self.data = b""
        self.send(b"H", json.dumps({"protocol": protocol, "consumer": "c", "options": options,
                                    "max_pending": 10, "prefetch": 10, "worker": 0}).encode())
        kind, payload = self.frame()
        while kind == b"L":  # the consumer's logs while it starts
            kind, payload = self.frame()
        assert kind == b"R", (kind, payload)
        self.ready = json.loads(payload)

    def send(self, kind, payload):
        self.sock.sendall(struct.pack(">I", len(payload) + 1) + kind + payload)

    def message(self, ticket, topic, body):
        payload = struct.pack(">QQIqH", ticket, ticket, 1, 0, 0) + struct.pack(">I", 2)
        for part in (topic.encode(), json.dumps(body).encode()):
            payload += struct.pack(">I", len(part)) + part
        self.send(b"M", payload)

    def frame(self):
        while len(self.data) < 4 or len(self.data) < 4 + struct.unpack_from(">I", self.data)[0]:
            chunk = self.sock.recv(1 << 16)
            assert chunk, "the runner closed the socket"
            self.data += chunk
        (length,) = struct.unpack_from(">I", self.data)
        kind, payload = self.data[4:5], self.data[5:4 + length]
        self.data = self.data[4 + length:]
        return kind, payload

    def until_answers(self, count):
        """The frames up to the count-th ANSWER: [(type, decoded)]."""
        out, answers = [], 0
        while answers < count:
            kind, payload = self.frame()
            if kind == b"A":
                answers += 1
                ticket, verdict, n = struct.unpack_from(">QBH", payload)
                out.append(("A", (ticket, verdict, payload[11:11 + n].decode())))
            elif kind == b"P":
                (n,) = struct.unpack_from(">H", payload)
                out.append(("P", (payload[2:2 + n].decode(), payload[2 + n:])))
            elif kind == b"L":
                out.append(("L", payload[1:].decode()))
            else:
                out.append((kind.decode(), payload))
        return out

    def quit(self, eof=False):
        """QUIT, or the end of the socket (eof): the runner exits 0."""
        if eof:
            self.sock.shutdown(socket.SHUT_WR)
        else:
            self.send(b"Q", b"")
        assert self.proc.wait(fh.DEADLINE) == 0
        self.proc.stderr.close()
        self.sock.close()


def test_a_relay_publishes_what_it_consumes():
    wd = fh.Workdir()
    options = {"callable": "upstream_consumers:Relay", "path": json.loads(PATHS),
               "config": {"relay.enabled": True}}
    hub = RawHub(wd, options)
    assert hub.ready["protocol"] == 2, hub.ready
    body = {"topic": "org.test.x", "msg": {"n": "\u00e9"}, "msg_id": "r1"}
    hub.message(1, "org.test.x", body)
    hub.message(2, "org.test.y", {"topic": "org.test.y", "msg": {"thread": True}})
    frames = [f for f in hub.until_answers(2) if f[0] != "L"]
    # moksha's send_message JSON-encodes the body; the PUBLISH comes before
    # the answer of the message it was published for.
    assert frames[:2] == [("P", ("relayed.org.test.x", json.dumps(body).encode())),
                          ("A", (1, 0, ""))], frames
    assert ("P", ("from.thread", b"\xffraw")) in frames[2:], frames
    assert frames[-1] == ("A", (2, 0, "")), frames
    hub.quit()
    # A hub of protocol 1: READY says 1, and send_message says why it cannot.
    hub = RawHub(wd, options, protocol=1)
    assert hub.ready["protocol"] == 1, hub.ready
    hub.message(1, "org.test.x", body)
    frames = hub.until_answers(1)
    assert frames[-1] == ("A", (1, 0, "")), frames
    assert any(kind == "L" and "Cannot send message: the hub speaks worker protocol 1, which "
               "has no PUBLISH" in text for kind, text in frames), frames
    hub.quit(eof=True)  # the hub gone: the consumer is stopped all the same
    assert [e["event"] for e in events(wd.file("events.jsonl"))].count("hub.close returned") == 2
    # The runner's own fedmsg.publish: fedmsg's topic, the msg's JSON.
    options = {"callable": "fedmsg_publish:publisher", "path": [wl.WORKERS_DIR],
               "config": {"environment": "stg"}}
    hub = RawHub(wd, options)
    hub.message(1, "org.test.z", {"a": 1})
    frames = hub.until_answers(1)
    assert frames == [("P", ("org.fedoraproject.stg.fedmsg_publish.done", b'{"seen": {"a": 1}}')),
                      ("P", ("org.fedoraproject.stg.mod.named", b'"text"')),
                      ("P", ("org.test.raw", b'{"k": 1}')), ("A", (1, 0, ""))], frames
    hub.quit()
    wd.cleanup()


def test_fedora_messaging_gets_its_own_message_and_config():
    wd = fh.Workdir()
    # A configuration file the LazyConfig would read, were it loaded.
    conf = wd.write("fm.json", json.dumps({"consumer_config": {"from": "the file"}}))
    build = {"topic": "org.test.build", "msg": {"build_id": 7, "owner": "ann"}, "msg_id": "b7",
             "timestamp": 1700000000, "headers": {"fedora_messaging_schema": "upstream.build",
                                                  "fedora_messaging_severity": 30}}
    messages = [("org.test.build", build), ("org.test.plain", {"msg": {}, "msg_id": "p1"}),
                ("org.test.plain", {"msg": {"drop": True}}), ("org.test.plain", b"not json")]
    options = ('{callable: "upstream_consumers:fm_record", path: %s, config: {answer: 42}}'
               % PATHS)
    c, out, log = run_hub(wd, options, messages, lambda c: c["completed"] + c["failed"] == 4,
                          env={"FEDORA_MESSAGING_CONF": conf})
    assert (c["completed"], c["failed"], c["skipped"]) == (4, 0, 2), c
    seen = events(out, "fm")
    assert [e["cls"] for e in seen] == ["fedora_messaging.message.BuildMessage",
                                        "fedora_messaging.message.Message",
                                        "fedora_messaging.message.Message"], seen
    assert (seen[0]["summary"], seen[0]["severity"], seen[0]["id"]) == ("build 7 of ann", 30, "b7")
    assert seen[0]["text"].startswith("Id: b7\nTopic: org.test.build\nHeaders: "), seen[0]
    assert '"sent-at": "2023-11-14T22:13:20+00:00"' in seen[0]["text"], seen[0]
    assert seen[1]["summary"] == "org.test.plain" and seen[1]["severity"] == 20, seen[1]
    assert all(e["consumer_config"] == {"answer": 42} and e["queue"] == "c" for e in seen), seen
    # FEDORA_MESSAGING_CONF was set, so the runner loaded it; options.config still won.
    assert [e["path"] for e in events(out, "config.load_config")] == [conf]
    # porting.md's SaveMessage, with a LazyConfig that would read /etc.
    saved = os.path.join(wd.file("saver"), "messages.txt")
    options = ('{callable: "fm_doc:SaveMessage", path: %s, config: {path: %s}}'
               % (PATHS, json.dumps(saved)))
    c, out, log = run_hub(wd, options, messages[:2], lambda c: c["completed"] + c["failed"] == 2,
                          events_file="saver.jsonl")
    assert c["failed"] == 0, log
    with open(saved) as f:
        text = f.read()
    assert "Id: b7\nTopic: org.test.build\n" in text and "Id: p1\n" in text, text
    assert events(out, "config.load_config") == [], events(out)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_a_moksha_consumer_runs_as_moksha_runs_it, test_a_fedmsg_consumer_checks_signatures,
             test_a_relay_publishes_what_it_consumes,
             test_fedora_messaging_gets_its_own_message_and_config])
