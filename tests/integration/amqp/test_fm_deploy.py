"""A fedora-messaging deployment moves in unchanged (issue 42): a
config.toml shaped as fedora-messaging's config.toml.example (two queues,
three bindings, [qos] prefetch_count, [consumer_config], [tls] with a CA
and a client certificate) runs as it is, `consumers: [{name,
fedora_messaging: FILE}]` or `fanhub run --fedora-messaging FILE`,
against a private RabbitMQ node whose TLS listener requires a client
certificate (rabbitmq_node.py, peer_cert=True), fed with pika in the
shape fedora-messaging publishes.

- Every message reaches the callback with its topic, body, id and
  headers; the broker's queues end empty.
- The outcomes leave the broker as fedora-messaging would (docs/porting.md,
  "Moving a fedora-messaging consumer"): Nack back in the queue, Drop gone
  (counted skipped), HaltConsumer halts (the message acked, or requeued
  with requeue=True; the rest stays in the queue), an exception halts
  with everything requeued.
- A halted consumer restarted (`fanhub restart`) consumes again; a
  reload keeps it consuming.
- prefetch_count bounds the broker's unacked count, sampled while a
  callback holds its messages.
- A SIGKILL loses nothing: each id reaches the callback after a restart.
- Two files in one hub (one from a drop-in): each consumer its own
  connection (its client_properties), its own messages and figures.
- `fanhub check` says which keys it refuses or does not honour; a bad
  TOML, a missing file and a missing callback module are named."""
import json
import os
import signal
import subprocess
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import rabbitmq_node

try:
    import pika
except ImportError:  # scripts/deps installs python3-pika
    pika = None

CALLBACK = '''
import json, os, time
from fedora_messaging import config
from fedora_messaging.exceptions import Drop, HaltConsumer, Nack


def callback(message):
    """What the body asks: ok, nack (NACKS times, then ok), drop, halt,
    halt_requeue, raise, hold (until the release file exists)."""
    cfg = config.conf["consumer_config"]
    body = message.body
    record = {"topic": message.topic, "body": body, "id": message.id,
              "headers": dict(message._headers if hasattr(message, "_headers")
                              else message.headers),
              "queue": getattr(message, "queue", None), "key": cfg.get("example_key")}
    with open(cfg["record"], "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\\n")
    action = body.get("action", "ok") if isinstance(body, dict) else "ok"
    if action == "hold":
        while not os.path.exists(cfg["release"]):
            time.sleep(0.01)
    if action == "nack":
        seen = sum(1 for line in open(cfg["record"]) if json.loads(line)["id"] == message.id)
        if seen <= body.get("nacks", 1):
            raise Nack()
    if action == "nack_always":
        raise Nack()
    if action == "drop":
        raise Drop()
    if action == "halt":
        raise HaltConsumer(exit_code=0, reason="asked to halt")
    if action == "halt_requeue":
        raise HaltConsumer(exit_code=1, reason="asked to halt", requeue=True)
    if action == "raise":
        raise RuntimeError("broken on purpose")
'''


def need_pika():
    fh.require_tool(pika, "pika (python3-pika)", "python3-pika")


_shared = []


def shared_node():
    """One TLS node for every case (a node takes seconds to boot); each
    case uses queues of its own."""
    if not _shared:
        _shared.append(rabbitmq_node.RabbitNode(tls=True, peer_cert=True))
    return _shared[0]


def config_toml(wd, node, case, prefetch=25, extra=""):
    """A config.toml as fedora-messaging's config.toml.example has it,
    with two queues and three bindings; queues named after the case."""
    text = '''amqp_url = "amqps://guest:guest@localhost:%(port)d/%%2F"
callback = "fmcb_%(case)s:callback"
passive_declares = false
publish_exchange = "amq.topic"
topic_prefix = ""
%(extra)s
[tls]
ca_cert = "%(ca)s"
keyfile = "%(key)s"
certfile = "%(cert)s"

[client_properties]
app = "fanhub test %(case)s"

[exchanges."amq.topic"]
type = "topic"
durable = true
auto_delete = false
arguments = {}

[queues.%(case)s_a]
durable = true
auto_delete = false
exclusive = false
arguments = {}

[queues.%(case)s_b]
durable = true
auto_delete = false
exclusive = false
arguments = {"x-max-priority" = 10}

[[bindings]]
queue = "%(case)s_a"
exchange = "amq.topic"
routing_keys = ["org.fedoraproject.%(case)s.a.#"]

[[bindings]]
queue = "%(case)s_b"
exchange = "amq.topic"
routing_keys = ["org.fedoraproject.%(case)s.b.#"]

[[bindings]]
queue = ["%(case)s_a", "%(case)s_b"]
exchange = "amq.topic"
routing_keys = ["org.fedoraproject.%(case)s.both.#"]

[consumer_config]
example_key = "for my consumer"
record = "%(record)s"
release = "%(release)s"

[qos]
prefetch_size = 0
prefetch_count = %(prefetch)d

[log_config]
version = 1
disable_existing_loggers = true

[log_config.formatters.simple]
format = "[%%(levelname)s %%(name)s] %%(message)s"

[log_config.handlers.console]
class = "logging.StreamHandler"
formatter = "simple"
stream = "ext://sys.stdout"

[log_config.root]
level = "ERROR"
handlers = ["console"]
''' % {"port": node.tls_port, "case": case, "ca": node.ca_file, "key": node.client_key,
       "cert": node.client_cert, "prefetch": prefetch, "extra": extra,
       "record": wd.file("record.jsonl"), "release": wd.file("release")}
    with open(wd.file("fmcb_%s.py" % case), "w") as f:
        f.write(CALLBACK)
    return wd.write("%s.toml" % case, text)


def start_hub(wd, toml, case, retry="{max_attempts: 2, initial_ms: 10, max_ms: 10}"):
    # A state_dir: such a consumer still keeps neither spool nor dead
    # letters (its failures go back to the broker).
    yaml = ("bus: {}\nshutdown_timeout: 30\nstate_dir: %s\nconsumers:\n  - name: %s\n"
            "    fedora_messaging: %s\n    retry: %s\n"
            % (json.dumps(wd.file("state")), case, json.dumps(toml), retry))
    hub = fh.Hub(wd, yaml, env={"PYTHONPATH": wd.path})
    fh.wait_for(lambda: "consumer '%s': consuming from" % case in hub.log(),
                "the consumer's source consuming", hub=hub)
    return hub


class Producer:
    """pika over TLS with the client certificate, publishing as
    fedora-messaging's api.publish does (confirms on)."""

    def __init__(self, node):
        import ssl
        context = ssl.create_default_context(cafile=node.ca_file)
        context.load_cert_chain(node.client_cert, node.client_key)
        params = pika.ConnectionParameters(
            "localhost", node.tls_port, ssl_options=pika.SSLOptions(context, "localhost"))
        self.conn = pika.BlockingConnection(params)
        self.ch = self.conn.channel()
        self.ch.confirm_delivery()

    def send(self, topic, body, msg_id=None):
        msg_id = msg_id or str(uuid.uuid4())
        headers = {"fedora_messaging_schema": "base.message", "fedora_messaging_severity": 20,
                   "sent-at": "2026-12-07T16:00:00+00:00", "priority": 0,
                   "fedora_messaging_user_alice": True}
        properties = pika.BasicProperties(content_type="application/json",
                                          content_encoding="utf-8", delivery_mode=2,
                                          headers=headers, message_id=msg_id, priority=0)
        self.ch.basic_publish("amq.topic", topic, json.dumps(body).encode(), properties)
        return msg_id

    def close(self):
        self.conn.close()


def records(wd):
    path = wd.file("record.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith("\n")]


def depths(node, case):
    all_depths = node.queue_depths()
    return all_depths.get(case + "_a"), all_depths.get(case + "_b")


def consumer(hub, name):
    return hub.consumer(hub.stats(), name)


def test_messages_reach_the_callback():
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "deliver"
    hub = start_hub(wd, config_toml(wd, node, case), case)
    try:
        producer = Producer(node)
        sent = {}
        for i in range(10):
            where = ("a", "b", "both")[i % 3]
            topic = "org.fedoraproject.%s.%s.n%d" % (case, where, i)
            sent[producer.send(topic, {"n": i, "text": "caf\u00e9"})] = (topic, i)
        producer.close()
        # "both" reaches both queues: four such messages, twice each.
        want = sum(2 if "both" in t else 1 for t, _ in sent.values())
        fh.wait_for(lambda: len(records(wd)) >= want, "every delivery at the callback", hub=hub)
        fh.wait_for(lambda: depths(node, case) == ((0, 0), (0, 0)),
                    "the broker's queues empty (acked)")
        for r in records(wd):
            topic, n = sent[r["id"]]
            assert r["topic"] == topic and r["body"] == {"n": n, "text": "caf\u00e9"}, r
            assert r["headers"]["fedora_messaging_schema"] == "base.message", r
            assert r["headers"]["sent-at"] == "2026-12-07T16:00:00+00:00", r
            assert r["headers"]["fedora_messaging_user_alice"] is True, r
            assert r["key"] == "for my consumer", r
        c = consumer(hub, case)
        assert c["completed"] == want and c["state"] == 0, c
        assert hub.stop() == 0
    finally:
        hub.kill()


def test_nack_drop_requeue_as_upstream():
    """Nack: fanhub's retry (max_attempts 2 here) and then back to the
    broker's queue, again and again as fedora-messaging does; a Nack that
    passes is acked. Drop: acked (gone, skipped)."""
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "outcome"
    hub = start_hub(wd, config_toml(wd, node, case), case)
    try:
        producer = Producer(node)
        once = producer.send("org.fedoraproject.%s.a.x" % case, {"action": "nack", "nacks": 3})
        dropped = producer.send("org.fedoraproject.%s.a.x" % case, {"action": "drop"})
        always = producer.send("org.fedoraproject.%s.b.x" % case, {"action": "nack_always"})
        producer.close()
        seen = lambda i: sum(1 for r in records(wd) if r["id"] == i)  # noqa: E731
        fh.wait_for(lambda: seen(once) >= 4, "the nacked message delivered again", hub=hub)
        fh.wait_for(lambda: seen(always) >= 6, "the always-nacked one back on the broker",
                    hub=hub)
        assert seen(dropped) == 1
        fh.wait_for(lambda: depths(node, case)[0] == (0, 0), "queue a empty: ok and drop acked")
        # The always-nacked message stays on its queue (ready or held).
        for _ in range(20):
            ready, unacked = depths(node, case)[1]
            assert ready + unacked == 1, depths(node, case)
        c = consumer(hub, case)
        assert c["skipped"] == 1 and c["retried"] >= 2, c
        assert c["dead_lettered"] == 0, c
        assert not os.path.exists(wd.file("state/%s/dead-letter" % case))
        assert hub.stop() == 0
        assert depths(node, case)[1] == (1, 0), depths(node, case)
    finally:
        hub.kill()


def halted_case(case, action, expect_b):
    """A message of `action` on queue a, then five on queue b: the
    consumer halts; queue b keeps its messages; queue a as expect_a."""
    node = shared_node()
    wd = fh.Workdir()
    hub = start_hub(wd, config_toml(wd, node, case, prefetch=1), case)
    try:
        producer = Producer(node)
        halting = producer.send("org.fedoraproject.%s.a.x" % case, {"action": action})
        fh.wait_for(lambda: consumer(hub, case)["state"] == 2, "the consumer halted", hub=hub)
        for i in range(5):
            producer.send("org.fedoraproject.%s.b.x" % case, {"n": i})
        producer.close()
        c = consumer(hub, case)
        assert "halt" in c["last_error"], c
        fh.wait_for(lambda: depths(node, case)[1] == (5, 0),
                    "queue b's messages left on the broker, none taken")
        fh.wait_for(lambda: depths(node, case)[0] == expect_b,
                    "queue a as fedora-messaging leaves it")
        assert [r["id"] for r in records(wd)] == [halting], records(wd)
        assert hub.stop() == 0
        return hub
    finally:
        hub.kill()


def test_halt_acks_its_message():
    need_pika()
    hub = halted_case("halt", "halt", (0, 0))
    assert "asked to halt" in hub.log(), hub.log()[-3000:]


def test_halt_requeue_and_exception_requeue():
    need_pika()
    halted_case("haltrq", "halt_requeue", (1, 0))
    hub = halted_case("raised", "raise", (1, 0))
    assert "broken on purpose" in hub.log(), hub.log()[-3000:]


def test_restart_and_reload_after_a_halt():
    """`fanhub restart NAME` (a control client reading the same file)
    starts a halted consumer again: its source connects again and takes
    what waited on the broker; a reload (SIGHUP) keeps it consuming."""
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "restarted"
    hub = start_hub(wd, config_toml(wd, node, case), case)
    try:
        producer = Producer(node)
        producer.send("org.fedoraproject.%s.a.x" % case, {"action": "halt"})
        fh.wait_for(lambda: consumer(hub, case)["state"] == 2, "the consumer halted", hub=hub)
        waiting = producer.send("org.fedoraproject.%s.a.x" % case, {"n": 1})
        fh.wait_for(lambda: depths(node, case)[0] == (1, 0), "the message left on the broker")
        status, out, err = fh.run(["restart", "-c", hub.config, case])
        assert status == 0 and "restarted consumer" in out and not err.strip(), (out, err)
        fh.wait_for(lambda: waiting in [r["id"] for r in records(wd)], "it after the restart",
                    hub=hub)
        hub.send_signal(signal.SIGHUP)
        fh.wait_for(lambda: hub.log().count("reload") >= 1, "the reload", hub=hub)
        later = producer.send("org.fedoraproject.%s.b.x" % case, {"n": 2})
        producer.close()
        fh.wait_for(lambda: later in [r["id"] for r in records(wd)], "one after the reload",
                    hub=hub)
        fh.wait_for(lambda: depths(node, case) == ((0, 0), (0, 0)), "the queues empty")
        assert consumer(hub, case)["state"] == 0
        assert hub.stop() == 0
    finally:
        hub.kill()


def test_prefetch_never_exceeded():
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "prefetch"
    prefetch = 3
    hub = start_hub(wd, config_toml(wd, node, case, prefetch=prefetch), case)
    try:
        producer = Producer(node)
        for i in range(20):
            producer.send("org.fedoraproject.%s.a.x" % case, {"action": "hold", "n": i})
        producer.close()
        samples = []

        def full():
            samples.append(depths(node, case)[0])
            return samples[-1][1] == prefetch
        fh.wait_for(full, "the broker holding prefetch_count unacked", hub=hub)
        for _ in range(10):  # while the callback holds them
            samples.append(depths(node, case)[0])
        assert all(s[1] <= prefetch for s in samples), samples
        with open(wd.file("release"), "w"):
            pass
        while depths(node, case)[0] != (0, 0):
            samples.append(depths(node, case)[0])
            assert hub.proc.poll() is None, hub.log()[-3000:]
        assert all(s[1] <= prefetch for s in samples), samples
        assert hub.stop() == 0
    finally:
        hub.kill()


def test_sigkill_loses_nothing():
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "killed"
    toml = config_toml(wd, node, case, prefetch=5)
    hub = start_hub(wd, toml, case)
    producer = Producer(node)
    ids = [producer.send("org.fedoraproject.%s.a.x" % case, {"action": "hold", "n": i})
           for i in range(30)]
    producer.close()
    try:
        fh.wait_for(lambda: len(records(wd)) >= 1, "a message in the callback", hub=hub)
    finally:
        hub.kill()  # SIGKILL
    assert depths(node, case)[0][0] + depths(node, case)[0][1] == 30
    with open(wd.file("release"), "w"):
        pass
    hub = start_hub(wd, toml, case)
    try:
        fh.wait_for(lambda: set(ids) <= {r["id"] for r in records(wd)},
                    "every id at the callback after the restart", hub=hub)
        fh.wait_for(lambda: depths(node, case)[0] == (0, 0), "the queue empty")
        assert hub.stop() == 0
    finally:
        hub.kill()


def test_run_fedora_messaging_flag():
    """`fanhub run --fedora-messaging FILE`: one consumer, named after the
    file, without a YAML file."""
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "flag"
    toml = config_toml(wd, node, case)
    env = dict(os.environ, PYTHONPATH=wd.path, RUNTIME_DIRECTORY=wd.path)
    err = open(wd.file("flag.stderr"), "wb")
    proc = subprocess.Popen([fh.BIN, "run", "--fedora-messaging", toml], stdout=subprocess.DEVNULL,
                            stderr=err, env=env)
    log = lambda: open(wd.file("flag.stderr"), errors="replace").read()  # noqa: E731
    try:
        fh.wait_for(lambda: "consumer 'flag': consuming from" in log() or proc.poll() is not None,
                    "the source consuming")
        assert proc.poll() is None, log()
        producer = Producer(node)
        msg_id = producer.send("org.fedoraproject.%s.b.x" % case, {"n": 1})
        producer.close()
        fh.wait_for(lambda: [r["id"] for r in records(wd)] == [msg_id], "the message")
        proc.terminate()
        assert proc.wait(timeout=fh.DEADLINE) == 0, log()
        fh.check_sanitizers(log(), "fanhub run --fedora-messaging")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()


def test_many_files_one_hub():
    """Two config.toml files in one hub, the second from a drop-in: each
    consumer its own connection, queues, figures; a message reaches the
    consumer whose file's queues it is on, only."""
    need_pika()
    node = shared_node()
    first, second = fh.Workdir(), fh.Workdir()
    toml_one = config_toml(first, node, "many1")
    toml_two = config_toml(second, node, "many2")
    os.makedirs(first.file("conf.d"))
    first.write("conf.d/two.yaml", "consumers:\n  - name: many2\n"
                "    fedora_messaging: %s\n" % json.dumps(toml_two))
    yaml = ("bus: {}\ninclude: [%s]\nconsumers:\n  - name: many1\n"
            "    fedora_messaging: %s\n" % (json.dumps(first.file("conf.d/*.yaml")),
                                             json.dumps(toml_one)))
    hub = fh.Hub(first, yaml, env={"PYTHONPATH": "%s:%s" % (first.path, second.path)})
    try:
        for name in ("many1", "many2"):
            fh.wait_for(lambda: "consumer '%s': consuming from" % name in hub.log(),
                        name + " consuming", hub=hub)
        producer = Producer(node)
        one = producer.send("org.fedoraproject.many1.a.x", {"n": 1})
        two = [producer.send("org.fedoraproject.many2.both.x", {"n": i}) for i in range(2)]
        producer.close()
        fh.wait_for(lambda: len(records(second)) == 4 and len(records(first)) == 1,
                    "each message at its consumer", hub=hub)
        assert [r["id"] for r in records(first)] == [one]
        assert sorted({r["id"] for r in records(second)}) == sorted(two)
        stats = hub.stats()
        assert hub.consumer(stats, "many1")["completed"] == 1
        assert hub.consumer(stats, "many2")["completed"] == 4
        conns = node.ctl(["list_connections", "client_properties"]).stdout.decode()
        assert "fanhub test many1" in conns and "fanhub test many2" in conns, conns
        assert hub.stop() == 0
    finally:
        hub.kill()


def check(wd, toml_text, name="c"):
    toml = wd.write(name + ".toml", toml_text)
    yaml = wd.write(name + ".yaml", "bus: {}\nconsumers:\n  - name: %s\n    fedora_messaging: %s\n"
                    % (name, json.dumps(toml)))
    return fh.run(["check", "-c", yaml])


def test_check_verdicts():
    node_less = {"port": 5671}
    wd = fh.Workdir()
    example = ('amqp_url = "amqps://localhost:%(port)d"\ncallback = "m:cb"\n'
               'publish_exchange = "amq.topic"\ntopic_prefix = "org.example"\n'
               '[tls]\nca_cert = "/ca.pem"\nkeyfile = "/k.pem"\ncertfile = "/c.pem"\n'
               '[queues.q]\ndurable = true\n[[bindings]]\nqueue = "q"\nexchange = "amq.topic"\n'
               'routing_keys = ["#"]\n[qos]\nprefetch_count = 25\n' % node_less)
    status, out, err = check(wd, example)
    assert status == 0, err
    assert "warning" in err and "publish_exchange: not honoured" in err, err
    assert "topic_prefix: not honoured" in err, err
    status, out, err = check(wd, example + "bogus_key = 1\n[monitoring]\naddress = \"\"\n"
                             "[qos2]\n", "unknown")
    assert status == 2, err
    assert "bogus_key: unknown key" in err and "qos2: unknown key" in err, err
    status, out, err = check(wd, example.replace("routing_keys", "routing_key"), "binding")
    assert status == 2 and "bindings[0].routing_key: unknown key" in err, err
    status, out, err = check(wd, example.replace('queue = "q"', 'queue = "nope"'), "noqueue")
    assert status == 2 and "bindings[0].queue: 'nope' is not declared" in err, err
    status, out, err = check(wd, 'amqp_url = \n', "bad")
    assert status == 2 and "not TOML" in err, err
    status, out, err = check(wd, 'amqp_url = "amqp://"\n', "nocallback")
    assert status == 2 and "callback: required" in err, err
    yaml = wd.write("missing.yaml", "bus: {}\nconsumers:\n  - name: m\n"
                    "    fedora_messaging: %s\n" % wd.file("nowhere.toml"))
    status, out, err = fh.run(["check", "-c", yaml])
    assert status == 2 and "nowhere.toml: cannot read it: No such file" in err, err
    yaml = wd.write("both.yaml", "bus: {}\nconsumers:\n  - name: m\n    plugin: log\n"
                    "    fedora_messaging: %s\n" % wd.file("c.toml"))
    status, out, err = fh.run(["check", "-c", yaml])
    assert status == 2 and "runs in the python plugin, not 'log'" in err, err
    yaml = wd.write("spill.yaml", "bus: {}\nstate_dir: /tmp\nconsumers:\n  - name: m\n"
                    "    fedora_messaging: %s\n    queue: {overflow: spill}\n"
                    % wd.file("c.toml"))
    status, out, err = fh.run(["check", "-c", yaml])
    assert status == 2 and "backlog stays on the broker: no spill" in err, err
    yaml = wd.write("none.yaml", "bus: {}\nconsumers:\n  - name: m\n    plugin: log\n")
    status, out, err = fh.run(["check", "-c", yaml])
    assert status == 2 and "expected at least one endpoint" in err, err


def test_missing_callback_module():
    """The file's callback cannot be imported: the hub refuses to start
    (exit 2) naming the module, as `fedora-messaging consume` exits on
    it; what the queues hold stays on the broker."""
    need_pika()
    node = shared_node()
    wd = fh.Workdir()
    case = "nomodule"
    toml = config_toml(wd, node, case)
    os.remove(wd.file("fmcb_%s.py" % case))
    yaml = ("bus: {}\nconsumers:\n  - name: %s\n    fedora_messaging: %s\n"
            % (case, json.dumps(toml)))
    hub = fh.Hub(wd, yaml, env={"PYTHONPATH": wd.path})
    try:
        assert hub.wait() == 2, hub.log()[-3000:]
        assert "No module named 'fmcb_nomodule'" in hub.log(), hub.log()[-3000:]
        assert "consuming from" not in hub.log()
    finally:
        hub.kill()


if __name__ == "__main__":
    try:
        fh.main([test_check_verdicts, test_messages_reach_the_callback,
                 test_nack_drop_requeue_as_upstream, test_halt_acks_its_message,
                 test_halt_requeue_and_exception_requeue, test_restart_and_reload_after_a_halt,
                 test_prefetch_never_exceeded,
                 test_sigkill_loses_nothing, test_run_fedora_messaging_flag,
                 test_many_files_one_hub,
                 test_missing_callback_module])
    finally:
        rabbitmq_node._stop_all()
