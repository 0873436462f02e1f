"""amqp: a real `fanhub run` bridges what an independent pyzmq publisher
sends into a real RabbitMQ (rabbitmq_node.py: a private node from Debian's
rabbitmq-server), and an independent AMQP client (pika, Debian's
python3-pika) reads it back from a durable queue bound to amq.topic.

Checked:
- bridge exactness: 100,000 messages (20,000 under a sanitizer;
  FANHUB_AMQP_MESSAGES sets another count) over
  several topics, none missing, none doubled, order kept per routing key
  (a per-key number in each body), the routing key rewritten by
  topic_prefix, the body byte for byte, content_type application/json
  exactly for JSON bodies, delivery_mode 2, the fanhub_seq header;
- the broker restarted mid-stream, and killed (SIGKILL) mid-stream:
  nothing lost, because only confirms complete a message; duplicates counted, and no more than the messages
  the plugin answered RETRY at the lost connection (at most max_pending);
- a broker that cannot be reached at start: the hub runs, answers RETRY
  (counted), holds the backlog, and delivers everything once the broker
  is up;
- a routing key over 255 bytes: that message fails, the others arrive;
- TLS (amqps) with the broker's certificate verified, and refused when
  signed by another CA;
- refused: a wrong password (exit status 2, the reason, never the
  password), a password file others may read, a password in the YAML, and
  bad options, by `fanhub check` with FILE:LINE:COL.

One broker serves every case (it takes tens of seconds to start on a busy
machine); each case uses queues of its own. Without rabbitmq-server or
python3-pika (scripts/deps installs both) or the amqp plugin (built when
librabbitmq-dev is installed) the cases are skipped; under CI=true they
fail.
"""
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import rabbitmq_node

try:
    import pika
except ImportError:
    pika = None

USER = "fanhub"
PASSWORD = "bridge-secret-4b1d"
VHOST = "/bridge"
FROM = "org.fedoraproject.prod."
TO = "fh."
TOPICS = ["org.fedoraproject.prod.buildsys.build.state.change",
          "org.fedoraproject.prod.git.receive",
          "org.fedoraproject.prod.bodhi.update.comment",
          "io.pagure.prod.pagure.pull-request.new",
          "org.centos.prod.buildsys.tag"]
# 100,000 in the gcc build; a sanitizer build runs the same cases with
# 20,000 (ASan and TSan make the hub several times slower, and the file
# must end within its ctest timeout). FANHUB_AMQP_MESSAGES overrides both.
MESSAGES = int(os.environ.get("FANHUB_AMQP_MESSAGES")
               or (20000 if os.environ.get("FANHUB_SANITIZE") else 100000))

NODE = None  # the one broker, started by main()


def routing_key(topic):
    return TO + topic[len(FROM):] if topic.startswith(FROM) else topic


def body_of(i, n):
    """Message i, the n-th of its topic: JSON mostly, some text, some
    bytes that are not UTF-8, one JSON scalar (not an object or array)."""
    if i % 101 == 0:
        return b"plain text %d %d" % (i, n)
    if i % 997 == 0:
        return b"\xff\xfe bytes %d %d" % (i, n)
    if i % 1009 == 0:
        return b"%d" % n  # JSON, but a scalar: no content_type
    return b'{"i": %d, "n": %d, "msg": {"s": "caf\\u00e9"}}' % (i, n)


def is_json_container(body):
    try:
        value = json.loads(body)
    except ValueError:
        return False
    return isinstance(value, (dict, list))


def plan(count):
    """(topic, body, per-topic number) of messages 0..count-1."""
    per_topic = {}
    out = []
    for i in range(count):
        topic = TOPICS[(i * 7 + i // 5) % len(TOPICS)]
        n = per_topic.get(topic, 0)
        per_topic[topic] = n + 1
        out.append((topic, body_of(i, n), n))
    return out


def hub_config(pub, options, extra=""):
    options = dict({"url": NODE.url(USER, VHOST), "password_env": "FANHUB_TEST_AMQP_PASSWORD",
                    "topic_prefix": {"from": FROM, "to": TO}}, **options)
    return ("bus:\n  connect: [%s]\nshutdown_timeout: 60\nconsumers:\n"
            "  - name: bridge\n    plugin: amqp\n    queue: {capacity: 300000}\n%s"
            "    options: %s\n" % (pub.endpoint, extra, json.dumps(options)))


HUB_ENV = {"FANHUB_TEST_AMQP_PASSWORD": PASSWORD}


def channel():
    params = pika.ConnectionParameters("127.0.0.1", NODE.port, VHOST,
                                       pika.PlainCredentials(USER, PASSWORD),
                                       blocked_connection_timeout=60)
    conn = pika.BlockingConnection(params)
    return conn, conn.channel()


QUEUES = ["exact", "restart", "late", "tls"]


def bound_queue(name):
    """Queue `name` empty: a durable queue bound to amq.topic for every
    routing key, made by the node from its definitions at every boot (one
    declared just before a SIGKILL of the broker could be lost with it)."""
    assert name in QUEUES
    conn, ch = channel()
    ch.queue_purge(name)
    conn.close()


def drain(name, expected, settle_s=1.0):
    """Every message in queue `name`, in queue order: (routing key,
    properties, body). Reads until `expected` came and then nothing more
    for settle_s (duplicates may follow), or fails at the deadline."""
    conn, ch = channel()
    got = []
    ch.basic_qos(prefetch_count=2000)

    def on_message(ch_, method, props, body):
        got.append((method.routing_key, props, body))

    ch.basic_consume(name, on_message, auto_ack=True)
    end = time.monotonic() + fh.DEADLINE
    quiet_since = None
    while True:
        before = len(got)
        conn.process_data_events(time_limit=0.2)
        if len(got) >= expected:
            if len(got) != before or quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= settle_s:
                break
        if time.monotonic() > end:
            raise AssertionError("queue %s: %d of %d messages" % (name, len(got), expected))
    conn.close()
    return got


def bridge_stats(hub):
    return hub.consumer(hub.stats(), "bridge")


def fini_line(hub):
    m = re.search(r"published (\d+), confirmed (\d+), nacked (\d+), answered RETRY to (\d+) "
                  r"at lost connections and to (\d+) while not connected", hub.log())
    assert m, hub.log()[-4000:]
    return [int(g) for g in m.groups()]


def check_delivery(got, sent, exact):
    """got (from the queue) against sent (plan): each message there (once
    when exact), byte for byte, with its properties; per routing key in
    order (with duplicates: never older than what came before, except
    messages repeated). Returns the number of duplicates."""
    by_key = {}
    for i, (topic, body, n) in enumerate(sent):
        by_key[(routing_key(topic), n)] = (i, body)
    seen = {}
    last_n = {}
    for key, props, body in got:
        m = re.search(rb'"n": (\d+)', body) or re.search(rb" (\d+)$", body)
        n = int(m.group(1)) if m else int(body)
        assert (key, n) in by_key, (key, n, body)
        i, expected = by_key[(key, n)]
        assert body == expected, (key, n, body, expected)
        assert props.delivery_mode == 2, props
        assert props.headers and props.headers.get("fanhub_seq") == i + 1, (i, props.headers)
        want_type = "application/json" if is_json_container(body) else None
        assert props.content_type == want_type, (body, props.content_type)
        seen[(key, n)] = seen.get((key, n), 0) + 1
        if exact:
            assert n == last_n.get(key, -1) + 1, ("order", key, n, last_n.get(key))
        last_n[key] = n
    missing = set(by_key) - set(seen)
    assert not missing, sorted(missing)[:10]
    doubled = sum(c - 1 for c in seen.values())
    if exact:
        assert doubled == 0, doubled
    return doubled


def needs_broker(fn):
    def run():
        if pika is None:
            raise fh.Skip("python3-pika is missing: scripts/deps installs it (Debian package "
                          "python3-pika)")
        require_plugin()
        if NODE is None:
            start_node()
        fn()
    run.__name__ = fn.__name__
    run.__doc__ = fn.__doc__
    return run


def require_plugin():
    path = os.path.join(fh.SHIPPED_PLUGINS, "amqp.so")
    fh.require_tool(path if os.path.exists(path) else None, "the amqp plugin (amqp.so)",
                    "librabbitmq-dev")


def start_node():
    global NODE
    NODE = rabbitmq_node.RabbitNode(users=[(USER, PASSWORD, VHOST)], tls=True,
                                    queues=[(VHOST, q, "amq.topic", "#") for q in QUEUES])


# ---------------------------------------------------------------------------


@needs_broker
def test_bridge_exactness():
    """MESSAGES messages: every one in the queue once, in order per
    routing key, byte for byte, with its properties."""
    sent = plan(MESSAGES)
    bound_queue("exact")
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {}), env=HUB_ENV)
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("publishing to exchange")
        for topic, body, _ in sent:
            pub.send(topic, body)
        fh.wait_for(lambda: bridge_stats(hub)["completed"] >= len(sent), "all confirmed",
                    hub=hub)
        stats = bridge_stats(hub)
        assert stats["failed"] == 0 and stats["retried"] == 0, stats
        # The plugin's own figures (ABI 1.6), as its fini line says them.
        own = {name: m["value"] for name, m in stats["plugin_metrics"].items()}
        assert own["published"] == own["confirmed"] == len(sent), own
        assert own["nacked"] == own["lost"] == own["returned"] == 0 and own["connects"] == 1, own
        got = drain("exact", len(sent))
        assert hub.stop() == 0, hub.log()
        published, confirmed, nacked, lost, down = fini_line(hub)
        assert (published, confirmed, nacked, lost, down) == (len(sent), len(sent), 0, 0, 0)
        assert len(got) == len(sent), (len(got), len(sent))
        check_delivery(got, sent, exact=True)
        assert PASSWORD not in hub.log()
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


@needs_broker
def test_tls():
    """amqps, the broker's certificate checked against its CA and its
    name: 2,000 messages exact. With a CA that did not sign it the
    handshake fails: the hub runs, answers RETRY and delivers nothing."""
    sent = plan(2000)
    bound_queue("tls")
    url = "amqps://%s@localhost:%d/%%2Fbridge" % (USER, NODE.tls_port)
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {"url": url, "tls": {"ca_file": NODE.ca_file}}),
                 env=HUB_ENV)
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("publishing to exchange")
        assert "over TLS" in hub.log(), hub.log()
        for topic, body, _ in sent:
            pub.send(topic, body)
        fh.wait_for(lambda: bridge_stats(hub)["completed"] >= len(sent), "all confirmed",
                    hub=hub)
        got = drain("tls", len(sent))
        assert hub.stop() == 0, hub.log()
        check_delivery(got, sent, exact=True)
    finally:
        hub.kill()
        pub.close()

    other_ca = NODE._make_certificates(prefix="other-")
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {"url": url, "tls": {"ca_file": other_ca}}, RETRY_YAML),
                 name="wrong-ca", env=HUB_ENV)
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("cannot connect to localhost:%d: SSL peer cert verification failed"
                     % NODE.tls_port)
        for topic, body, _ in sent[:10]:
            pub.send(topic, body)
        wait_down_answered(hub, 3)
        stats = bridge_stats(hub)
        assert stats["completed"] == 0 and stats["backlog"] + stats["in_flight"] == 10, stats
        # (A stop would wait shutdown_timeout for the messages it holds.)
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


@needs_broker
def test_long_routing_key_fails():
    """A topic that makes a routing key over 255 bytes cannot be published:
    that message fails (counted, logged), the ones around it arrive."""
    bound_queue("late")
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {}), env=HUB_ENV)
    long_topic = "org.fedoraproject.prod." + "x" * 240  # 243 bytes, 259 without rewriting
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("publishing to exchange")
        pub.send("org.centos.prod.a", b'{"n": 0}')
        pub.send("io.x." + "y" * 251, b'{"n": 1}')
        pub.send(long_topic, b'{"n": 2}')
        fh.wait_for(lambda: bridge_stats(hub)["completed"] + bridge_stats(hub)["failed"] >= 3,
                    "three finished", hub=hub)
        stats = bridge_stats(hub)
        assert (stats["completed"], stats["failed"]) == (2, 1), stats
        got = drain("late", 2)
        assert [(k, b) for k, _, b in got] == [("org.centos.prod.a", b'{"n": 0}'),
                                               ("fh." + "x" * 240, b'{"n": 2}')], got
        assert hub.stop() == 0, hub.log()
        assert ("cannot be published: its routing key (the topic) is longer than 255 bytes"
                in hub.log()), hub.log()
        assert fini_line(hub)[:2] == [2, 2]
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


RETRY_YAML = "    retry: {max_attempts: 1000000, initial_ms: 10, max_ms: 200}\n"


def wait_down_answered(hub, at_least):
    """Waits until the hub has answered RETRY at least this many times."""
    fh.wait_for(lambda: bridge_stats(hub)["retried"] >= at_least, "RETRY answers", hub=hub)


def restart_mid_stream(count, crash):
    """The broker stops (cleanly: it closes the connection with 320
    CONNECTION_FORCED; or killed with SIGKILL) while messages stream (some
    published and not confirmed), more arrive while it is down, and it
    starts again: every message is in the queue; duplicates are counted and
    are no more than the messages answered RETRY at the lost connection
    (at most max_pending, 1000 here)."""
    sent = plan(count)
    first = sent[:count // 2]
    bound_queue("restart")
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {"reconnect_max_ms": 500}, RETRY_YAML), env=HUB_ENV)
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("publishing to exchange")
        for topic, body, _ in first:
            pub.send(topic, body)
        # Down while the first half streams (how many are confirmed by
        # then does not matter: nothing may be lost either way).
        fh.wait_for(lambda: bridge_stats(hub)["completed"] >= len(first) // 10, "a tenth",
                    hub=hub)
        NODE.down(crash=crash)
        hub.wait_log("answered RETRY, and every message until it is back")
        for topic, body, _ in sent[count // 2:]:
            pub.send(topic, body)
        wait_down_answered(hub, 1)
        NODE.start()
        fh.wait_for(lambda: bridge_stats(hub)["completed"] >= count, "all confirmed", hub=hub)
        stats = bridge_stats(hub)
        assert stats["failed"] == 0 and stats["completed"] == count, stats
        got = drain("restart", count)
        assert hub.stop() == 0, hub.log()
        published, confirmed, nacked, lost, down = fini_line(hub)
        assert confirmed == count and down > 0, hub.log()[-3000:]
        assert "connected again after" in hub.log()
        doubled = check_delivery(got, sent, exact=False)
        assert len(got) == count + doubled
        assert doubled <= lost <= 1000, (doubled, lost)
        print("restart (%s): %d messages, %d answered RETRY at the lost connection, %d while "
              "down, %d duplicates in the queue" % ("crash" if crash else "clean", count, lost,
                                                  down, doubled))
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()
        if not NODE.running():
            NODE.start()


@needs_broker
def test_broker_restarted_mid_stream():
    restart_mid_stream(max(MESSAGES // 10, 2000), crash=False)


@needs_broker
def test_broker_killed_mid_stream():
    restart_mid_stream(max(MESSAGES // 10, 2000), crash=True)


@needs_broker
def test_unreachable_at_start():
    """No broker when the hub starts: it runs, answers RETRY (counted),
    keeps the backlog and answers STATS; once the broker is up every
    message arrives, once, in order."""
    count = 500
    sent = plan(count)
    bound_queue("late")
    NODE.down()
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, hub_config(pub, {"reconnect_max_ms": 500}, RETRY_YAML), env=HUB_ENV)
    try:
        pub.wait_subscribed(hub=hub)
        hub.wait_log("cannot connect to 127.0.0.1:%d" % NODE.port)
        for topic, body, _ in sent:
            pub.send(topic, body)
        wait_down_answered(hub, 3)
        stats = bridge_stats(hub)
        assert stats["completed"] == 0 and stats["failed"] == 0, stats
        fh.wait_for(lambda: bridge_stats(hub)["enqueued"] == count, "all enqueued", hub=hub)
        stats = bridge_stats(hub)
        assert stats["backlog"] + stats["in_flight"] == count, stats
        NODE.start()
        fh.wait_for(lambda: bridge_stats(hub)["completed"] >= count, "all confirmed", hub=hub)
        got = drain("late", count)
        assert hub.stop() == 0, hub.log()
        published, confirmed, nacked, lost, down = fini_line(hub)
        assert (published, confirmed, lost) == (count, count, 0) and down >= 3, hub.log()
        check_delivery(got, sent, exact=True)
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()
        if not NODE.running():
            NODE.start()


@needs_broker
def test_refused_at_start():
    """A wrong password, an unknown vhost and a missing exchange stop the
    hub at start (status 2) with the broker's reason and the options'
    place; the password never shows."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    cases = [({}, {"FANHUB_TEST_AMQP_PASSWORD": "wrong-" + PASSWORD},
              "403 ACCESS_REFUSED"),
             ({"url": NODE.url(USER, "/nowhere")}, HUB_ENV, "530 NOT_ALLOWED"),
             ({"exchange": "no.such.exchange"}, HUB_ENV, "404 NOT_FOUND")]
    for options, env, reason in cases:
        cfg = wd.write("refused.yaml", hub_config(pub, options))
        proc = fh.subprocess.run([fh.BIN, "run", "-c", cfg], capture_output=True,
                                 env=dict(os.environ, **env), timeout=fh.DEADLINE)
        err = proc.stderr.decode(errors="replace")
        fh.check_sanitizers(err, "fanhub run")
        assert proc.returncode == 2 and reason in err, (proc.returncode, err)
        assert "(%s:8:" % cfg in err, err
        assert PASSWORD not in err + proc.stdout.decode(errors="replace")
    pub.close()
    wd.cleanup()


def test_password_file_refused():
    """A password file that others may read is refused by check and run,
    without the password; at mode 0600 check accepts it."""
    require_plugin()
    wd = fh.Workdir()
    secret = wd.write("amqp-password", PASSWORD + "\n")
    os.chmod(secret, 0o644)
    cfg = wd.write("hub.yaml", (
        "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n  - name: bridge\n"
        "    plugin: amqp\n    options: {url: \"amqp://fanhub@127.0.0.1:9/\", "
        "password_file: %s}\n" % json.dumps(secret)))
    for command in ("check", "run"):
        status, out, err = fh.run([command, "-c", cfg])
        assert status == 2, (command, status, err)
        assert ("options.password_file: %s: other users may read or change it; refusing it "
                "(chmod 600 %s) (%s:6:" % (secret, secret, cfg)) in err, err
        assert PASSWORD not in out + err
    os.chmod(secret, 0o600)
    status, out, err = fh.run(["check", "-c", cfg])
    assert status == 0, err
    wd.cleanup()


def test_option_table():
    """The options are a table (plugin ABI 1.2): `fanhub plugins --options
    amqp` prints it, and the hub refuses a value of the wrong type or out of
    its range with the FILE:LINE:COL of that value."""
    require_plugin()
    status, out, err = fh.run(["plugins", "--plugin-dir", fh.SHIPPED_PLUGINS, "--options", "amqp"])
    assert status == 0, out + err
    rows = {
        "url": r"string +- +- +amqp://",
        "port": r"integer +- +1\.\.65535 +the broker's port",
        "exchange": r"string +amq\.topic +0\.\.255 +the exchange",
        r"password_file\|_env": r"secret +- +- +the password, from a file \(mode 0600\)",
        "tls": r"map +- +- +\{ca_file",
        r"tls\.verify_peer": r"bool +true +- +check the broker's certificate",
        "confirm_timeout_ms": r"duration +30000 +100\.\.3600000 ",
        "heartbeat_s": r"integer +30 +0\.\.3600 ",
    }
    for name, row in rows.items():
        assert re.search(r"^%s +%s" % (name, row), out, re.M), (name, out)
    wd = fh.Workdir()
    # (options, the text the error points at, the message)
    cases = [
        ("port: 0", "0", 'options.port: expected an integer from 1 to 65535, got "0"'),
        ("connect_timeout_ms: 99", "99",
         'options.connect_timeout_ms: expected a duration such as 250ms, 2s or 1m from 100 to '
         '3600000 ms, got "99"'),
        ("heartbeat_s: {s: 1}", "{s", "options.heartbeat_s: expected an integer from 0 to 3600, "
                                      "got a map"),
        ("host: [a, b]", "[a", "options.host: expected a string, got a list"),
        ("user: ''", "''", 'options.user: expected 1 to 255 characters, got ""'),
        ("password_file: ''", "''", "options.password_file: must not be empty"),
    ]
    for options, at, expected in cases:
        cfg = wd.write("bad.yaml", "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n"
                       "  - name: bridge\n    plugin: amqp\n    options: {%s}\n" % options)
        status, out, err = fh.run(["check", "-c", cfg])
        assert status == 2, (options, out, err)
        # Line 6 is "    options: {...}": the first key starts in column 15.
        want = "%s (%s:6:%d)" % (expected, cfg, 15 + options.index(at))
        assert want in err, (options, want, err)
    wd.cleanup()


def test_bad_options():
    """`fanhub check` refuses bad options with the key and FILE:LINE:COL;
    no secret is printed."""
    require_plugin()
    wd = fh.Workdir()
    key = wd.write("client.key", "not a key\n")
    os.chmod(key, 0o644)
    ca = wd.write("ca.pem", "not a certificate\n")
    cases = [
        ("colour: red", r"options\.colour: unknown option; amqp takes url, host, port"),
        ("password: hunter2", r"options\.password: a password is never taken from the YAML"),
        ("url: 'amqp://u:hunter2@h/'", r"options\.url: holds a password"),
        ("url: 'http://h/'", r"options\.url: expected amqp://"),
        ("url: 'amqp://h/', host: h", r"options\.host: give url or host, port, vhost and "
                                      r"user, not both"),
        ("port: 70000", r"options\.port: expected an integer from 1 to 65535, got \"70000\""),
        ("confirm_timeout_ms: soon", r"options\.confirm_timeout_ms: expected a duration"),
        ("heartbeat_s: [1]", r"options\.heartbeat_s: expected an integer from 0 to 3600, "
                             r"got a list"),
        ("exchange: '%s'" % ("x" * 256), r"options\.exchange: expected 0 to 255 characters"),
        ("topic_prefix: {from: a.}", r"options\.topic_prefix\.to: missing"),
        ("topic_prefix: a.", r"options\.topic_prefix: expected a map \{from, to\}"),
        ("password_env: FANHUB_TEST_UNSET_VARIABLE",
         r"options\.password_env: the environment variable FANHUB_TEST_UNSET_VARIABLE is not "
         r"set"),
        ("password_env: HOME, password_file: /x", r"options\.password_file: give password_file "
                                               r"or password_env, not both"),
        ("tls: {verify_peer: true}", r"options\.tls: TLS with verify_peer \(the default\) "
                                     r"needs tls\.ca_file"),
        ("url: 'amqps://h/'", r"options\.tls: TLS with verify_peer"),
        ("tls: {verify_peer: maybe}", r"options\.tls\.verify_peer: expected true or false"),
        ("tls: {ca_file: /nonexistent/ca.pem}",
         r"options\.tls\.ca_file: /nonexistent/ca\.pem: No such file or directory"),
        ("tls: {ca_file: %s, cert_file: %s}" % (ca, ca),
         r"options\.tls: give cert_file and key_file together"),
        ("tls: {ca_file: %s, cert_file: %s, key_file: %s}" % (ca, ca, key),
         r"options\.tls\.key_file: the key .*client\.key: mode 0644 lets other users read or "
         r"change it"),
        ("tls: {ca_file: %s, colour: red}" % ca, r"options\.tls\.colour: unknown key"),
    ]
    for options, expected in cases:
        cfg = wd.write("bad.yaml", "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n"
                       "  - name: bridge\n    plugin: amqp\n    options: {%s}\n" % options)
        status, out, err = fh.run(["check", "-c", cfg])
        assert status != 0, (options, err)
        assert re.search(expected + r".*\(%s:6:\d+\)" % re.escape(cfg), err), (options, err)
        assert "hunter2" not in out + err, (options, err)
    # Good options pass, with TLS files that exist (check reads no
    # certificate and connects nowhere).
    os.chmod(key, 0o600)
    for options in ("url: 'amqp://fanhub@127.0.0.1:9/%2Fbridge', password_env: HOME",
                    "host: rabbit.example.org, port: 5671, vhost: /, user: u, "
                    "tls: {ca_file: %s, cert_file: %s, key_file: %s}" % (ca, ca, key),
                    "exchange: '', topic_prefix: {from: '', to: 'x.'}"):
        cfg = wd.write("good.yaml", "bus:\n  connect: tcp://127.0.0.1:9\nconsumers:\n"
                       "  - name: bridge\n    plugin: amqp\n    options: {%s}\n" % options)
        status, out, err = fh.run(["check", "-c", cfg])
        assert status == 0, (options, err)
    wd.cleanup()


if __name__ == "__main__":
    try:
        fh.main([test_option_table, test_bad_options, test_password_file_refused,
                 test_refused_at_start, test_tls, test_long_routing_key_fails,
                 test_bridge_exactness, test_unreachable_at_start,
                 test_broker_restarted_mid_stream, test_broker_killed_mid_stream])
    finally:
        if NODE is not None:
            NODE.cleanup()
