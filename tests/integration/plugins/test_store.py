"""store: a real `fanhub run` archiving what an independent pyzmq publisher
sends, into SQLite (read back with python3's sqlite3 module) and into a real
PostgreSQL server that the test starts in a temp dir (read back with psql).

Checked: exactly one row per message, with its seq, topic, receive time,
body in the right column and byte-exact (JSON in PostgreSQL as a value:
jsonb keeps no spelling), msg_id; duplicates of a msg_id skipped; a hub that
starts again appends; bad options refused with FILE:LINE:COL; and a
PostgreSQL server killed mid-stream and started again: with the consumer's
retry: settings every message is stored exactly once.

PostgreSQL comes from Debian's postgresql package, which scripts/deps
installs; without it the PostgreSQL cases, and only they, are skipped (they
fail under CI=true).
"""
import base64
import glob
import json
import os
import pwd
import re
import signal
import sqlite3
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

TOPICS = [
    "org.fedoraproject.prod.buildsys.build.state.change",
    "org.fedoraproject.prod.git.receive",
    "io.pagure.prod.pagure.pull-request.new",
    "org.centos.prod.buildsys.tag",
    "org.release-monitoring.prod.anitya.project.version.update",
]
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def topic_of(i):
    return TOPICS[i % len(TOPICS)]


def body_of(i):
    """Every kind of body: JSON with and without msg_id, other text, bytes."""
    if i % 997 == 0:
        return b"\xff\xfe not UTF-8 %d" % i
    if i % 101 == 0:
        return ("plain text %d, caf\u00e9 \u2713\nline 2" % i).encode()
    if i % 7 == 0:
        return b'{"i": %d, "no_id": true}' % i
    return b'{"msg_id": "id-%d", "i": %d, "msg": {"name": "pkg-%d", "s": "q\\"\\u00e9"}}' % (i, i, i % 50)


def kind_of(body):
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes"
    try:
        json.loads(text)
        return "json"
    except ValueError:
        return "text"


def msg_id_of(i):
    value = json.loads(body_of(i)) if kind_of(body_of(i)) == "json" else None
    return value.get("msg_id") if isinstance(value, dict) else None


def config(pub, options, capacity=100000, retry=None):
    text = ("bus:\n  connect: [%s]\nshutdown_timeout: 120\nconsumers:\n"
            "  - name: archive\n    plugin: store\n"
            "    queue: {capacity: %d}\n" % (pub.endpoint, capacity))
    if retry:
        text += "    retry: %s\n" % retry
    text += "    options: %s\n" % json.dumps(options)
    return text


def check_row(i, seq, topic, received_at, msg_id, body_json, body_text, body_bytes):
    """One row against message i (sent as hub message seq)."""
    body = body_of(i)
    assert topic == topic_of(i), (i, topic)
    assert TIME_RE.match(received_at), (i, received_at)
    assert msg_id == msg_id_of(i), (i, msg_id)
    kind = kind_of(body)
    filled = [k for k, v in (("json", body_json), ("text", body_text), ("bytes", body_bytes))
              if v is not None]
    assert filled == [kind], (i, filled, kind)
    return kind


# ---------------------------------------------------------------------------
# SQLite


def sqlite_rows(path):
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT run, seq, topic, received_at, msg_id, body_json,"
                          " body_text, body_bytes FROM messages ORDER BY id").fetchall()
    finally:
        db.close()


def sqlite_count(path):
    if not os.path.exists(path):
        return 0
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute("SELECT count(*) FROM messages").fetchone()[0]
    except sqlite3.OperationalError:  # not made yet
        return 0
    finally:
        db.close()


def test_sqlite_archive():
    """20,000 messages of every kind, then a copy of each 500th message
    that has a msg_id: exactly 20,000 rows, byte-exact, in seq order."""
    n = 20000
    wd = fh.Workdir()
    pub = fh.Publisher()
    path = wd.file("archive.sqlite")
    hub = fh.Hub(wd, config(pub, {"sqlite": path, "batch": 500, "batch_ms": 200}))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send(topic_of(i), body_of(i))
        again = [i for i in range(0, n, 500) if msg_id_of(i)]
        for i in again:
            pub.send(topic_of(i), body_of(i))
        fh.wait_for(lambda: sqlite_count(path) >= n, "%d rows" % n, hub=hub)
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert ("stored %d messages, %d already stored, 0 refused, 0 lost" % (n, len(again))
                in log), log

        rows = sqlite_rows(path)
        assert len(rows) == n, len(rows)
        assert len({r[0] for r in rows}) == 1 and rows[0][0] > 0
        kinds = {"json": 0, "text": 0, "bytes": 0}
        last_at = ""
        for i, (run, seq, topic, at, msg_id, bj, bt, bb) in enumerate(rows):
            assert seq == i + 1, (i, seq)
            kinds[check_row(i, seq, topic, at, msg_id, bj, bt, bb)] += 1
            stored = bj.encode() if bj is not None else bt.encode() if bt is not None else bb
            assert stored == body_of(i), (i, stored, body_of(i))  # byte-exact
            assert at >= last_at, (i, at, last_at)  # never backwards in a run
            last_at = at
        assert all(kinds.values()), kinds
        wd.cleanup()
    finally:
        hub.kill()
        pub.close()


def test_sqlite_restart_appends():
    """A second hub on the same file appends as a new run; msg_ids that
    the first run stored are skipped."""
    wd = fh.Workdir()
    path = wd.file("archive.sqlite")
    runs = []
    for round_ in range(2):
        pub = fh.Publisher()
        hub = fh.Hub(wd, config(pub, {"sqlite": path}), name="hub%d" % round_)
        try:
            pub.wait_subscribed(hub=hub)
            for i in range(10):
                pub.send("t.%d" % round_, '{"msg_id": "m-%d", "round": %d}' % (i + 5 * round_, round_))
            fh.wait_for(lambda: sqlite_count(path) >= 10 + 5 * round_, "rows", hub=hub)
            assert hub.stop() == 0, hub.log()
            runs.append(hub.log())
        finally:
            hub.kill()
            pub.close()
    assert "stored 10 messages, 0 already stored" in runs[0], runs[0]
    assert "stored 5 messages, 5 already stored" in runs[1], runs[1]
    rows = sqlite_rows(path)
    assert [(r[1], r[2], r[4]) for r in rows] == (
        [(i + 1, "t.0", "m-%d" % i) for i in range(10)]
        + [(i + 1, "t.1", "m-%d" % (i + 5)) for i in range(5, 10)]), rows
    assert len({r[0] for r in rows}) == 2
    wd.cleanup()


def test_bad_options():
    """`fanhub check` refuses bad options with the file, line and column."""
    wd = fh.Workdir()
    cases = [
        ("colour: red", r"options\.colour: unknown option; store takes sqlite, postgres, password_file, password_env, "
                        r"table, batch and batch_ms \(%s:8:\d+\)"),
        ("sqlite: a.db, postgres: 'dbname=x'",
         r"options\.postgres: give sqlite or postgres, not both \(%s:8:\d+\)"),
        ("table: archive", r"options: store needs a database: set sqlite \(a file\) or postgres "
                           r"\(a conninfo\) \(%s:8:\d+\)"),
        ("sqlite: a.db, batch: lots",
         r"options\.batch: expected an integer from 1 to 100000, got \"lots\" \(%s:8:\d+\)"),
        ("postgres: 'host'", r"options\.postgres: not a valid conninfo: missing \"=\" after "
                             r"\"host\" in connection info string \(%s:8:\d+\)"),
        ("sqlite: /nonexistent/dir/a.db",
         r"options\.sqlite: /nonexistent/dir/a\.db: cannot open: No such file or directory "
         r"\(directory /nonexistent/dir\) \(%s:8:\d+\)"),
    ]
    for n, (options, pattern) in enumerate(cases):
        path = wd.write("bad%d.yaml" % n,
                        "bus:\n"
                        "  connect: tcp://127.0.0.1:9\n"
                        "consumers:\n"
                        "  - name: archive\n"
                        "    plugin: store\n"
                        "    topics: [org.]\n"
                        "    options:\n"
                        "      {%s}\n" % options)
        status, out, err = fh.run(["check", "-c", path])
        assert status != 0, (options, out, err)
        assert re.search(pattern % re.escape(path), err), (options, err)
    wd.cleanup()


# ---------------------------------------------------------------------------
# PostgreSQL


def pg_bindir():
    """The newest installed PostgreSQL's bin directory; Skip when there is
    none."""
    dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                  key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(fh.require_tool(dirs[-1] if dirs else None,
                                           "PostgreSQL (initdb)", "postgresql"))


class PgServer:
    """A PostgreSQL server of its own in the workdir, on a free loopback
    port, run as the postgres user when the test runs as root (PostgreSQL
    refuses root), stopped by its PID."""

    def __init__(self, wd):
        self.bindir = pg_bindir()
        self.root = wd.file("pg")
        self.data = os.path.join(self.root, "data")
        self.sock = os.path.join(self.root, "sock")
        os.makedirs(self.sock)
        self.as_user = {}
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            # The server's user must reach its directory inside the workdir.
            os.chmod(wd.path, 0o755)
            for d in (self.root, self.sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            self.as_user = {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [],
                            "env": dict(os.environ, HOME=self.root)}
        self.port = fh.free_port()
        self.log_path = os.path.join(self.root, "postgres.log")
        r = subprocess.run([os.path.join(self.bindir, "initdb"), "-D", self.data, "-U", "postgres",
                            "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
                           capture_output=True, cwd=self.root, **self.as_user)
        if r.returncode != 0:
            raise AssertionError("initdb failed:\n%s" % r.stderr.decode(errors="replace"))
        self.proc = None
        self.start()

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [os.path.join(self.bindir, "postgres"), "-D", self.data, "-p", str(self.port),
             "-k", self.sock, "-c", "listen_addresses=127.0.0.1"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.root, **self.as_user)
        log.close()

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("postgres exited (%s):\n%s"
                                     % (self.proc.returncode, self.log()[-4000:]))
            return self.psql("SELECT 1", check=False) == "1"
        fh.wait_for(up, "PostgreSQL on port %d" % self.port)

    def log(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def conninfo(self, db="postgres"):
        return ("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable "
                "gssencmode=disable" % (self.port, db))

    def psql(self, sql, check=True, db="postgres"):
        r = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-A", "-t",
                            "-v", "ON_ERROR_STOP=1", "-d", self.conninfo(db), "-c", sql],
                           capture_output=True, timeout=fh.DEADLINE)
        if r.returncode != 0:
            if check:
                raise AssertionError("psql %r: %s" % (sql, r.stderr.decode(errors="replace")))
            return None
        return r.stdout.decode().rstrip("\n")

    def count(self):
        out = self.psql("SELECT count(*) FROM messages", check=False)
        return int(out) if out else 0

    def rows(self):
        """Every row as a dict, in seq order (body_bytes decoded)."""
        out = self.psql(
            "SELECT row_to_json(t) FROM (SELECT run, seq, topic,"
            " to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
            " AS received_at, msg_id, body_json, body_text,"
            " encode(body_bytes, 'base64') AS body_bytes FROM messages ORDER BY run, seq) t")
        rows = [json.loads(line) for line in out.split("\n")] if out else []
        for r in rows:
            if r["body_bytes"] is not None:
                r["body_bytes"] = base64.b64decode(r["body_bytes"])
        return rows

    def stop(self, sig=signal.SIGINT):
        """SIGINT is a fast shutdown, SIGQUIT an immediate one (a crash as
        far as clients can tell; the server recovers from its WAL)."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=fh.DEADLINE)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def check_pg_rows(rows, sent):
    """rows hold exactly the messages `sent` (message numbers), once each."""
    assert len(rows) == len(sent), (len(rows), len(sent))
    seen = set()
    for r in rows:
        # Which message: by its msg_id, or by its body's "i", or text/bytes.
        if r["body_json"] is not None:
            i = r["body_json"]["i"]
            assert r["body_json"] == json.loads(body_of(i)), r
        elif r["body_text"] is not None:
            i = int(r["body_text"].split()[2].rstrip(","))
            assert r["body_text"].encode() == body_of(i), r
        else:
            i = int(r["body_bytes"].split()[-1])
            assert r["body_bytes"] == body_of(i), r
        check_row(i, r["seq"], r["topic"], r["received_at"], r["msg_id"],
                  r["body_json"], r["body_text"], r["body_bytes"])
        assert i not in seen, ("stored twice", i)
        seen.add(i)
    assert seen == set(sent), sorted(set(sent) - seen)[:20]


def pg_test(fn):
    """Runs fn(wd, pg) with a fresh server; fh.Skip when PostgreSQL is not
    installed."""
    def run():
        pg_bindir()
        wd = fh.Workdir()
        pg = PgServer(wd)
        try:
            fn(wd, pg)
        finally:
            pg.stop()
        wd.cleanup()
    run.__name__ = fn.__name__
    return run


@pg_test
def test_postgres_archive(wd, pg):
    """50,000 messages: exactly 50,000 rows with the right topics and
    bodies, and the documented schema."""
    n = 50000
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, {"postgres": pg.conninfo()}, capacity=n + 10))
    try:
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send(topic_of(i), body_of(i))
        fh.wait_for(lambda: pg.count() >= n, "%d rows in PostgreSQL" % n, hub=hub)
        assert hub.stop() == 0, hub.log()
        assert "stored %d messages, 0 already stored, 0 refused, 0 lost" % n in hub.log()
        rows = pg.rows()
        check_pg_rows(rows, range(n))
        assert sorted(r["seq"] for r in rows) == list(range(1, n + 1))
        assert len({r["run"] for r in rows}) == 1
        # The schema: columns and their types, and the indexes.
        columns = pg.psql("SELECT string_agg(column_name || ' ' || data_type || ' '"
                          " || is_nullable, ', ' ORDER BY ordinal_position)"
                          " FROM information_schema.columns WHERE table_name = 'messages'")
        assert columns == (
            "id bigint NO, run bigint NO, seq bigint NO, topic text NO, received_at "
            "timestamp with time zone NO, msg_id text YES, body_json jsonb YES, "
            "body_text text YES, body_bytes bytea YES"), columns
        indexes = pg.psql("SELECT string_agg(indexdef, E'\\n' ORDER BY indexname)"
                          " FROM pg_indexes WHERE tablename = 'messages'")
        for part in ("UNIQUE INDEX messages_msg_id_key ON public.messages USING btree (msg_id)",
                     "UNIQUE INDEX messages_run_seq_key ON public.messages USING btree (run, seq)",
                     "INDEX messages_topic_idx ON public.messages USING btree (topic)",
                     "INDEX messages_received_at_idx ON public.messages USING btree (received_at)"):
            assert part in indexes, indexes
    finally:
        hub.kill()
        pub.close()


@pg_test
def test_postgres_refusals(wd, pg):
    """What PostgreSQL cannot take: JSON that jsonb refuses (a \\u escape
    that a SQL_ASCII database cannot hold) is stored in body_text instead,
    msg_id kept; a topic with a NUL byte is answered FAIL, logged and
    counted, and the messages around it are stored."""
    pg.psql("CREATE DATABASE ascii ENCODING 'SQL_ASCII' TEMPLATE template0")
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, {"postgres": pg.conninfo("ascii")}))
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("t.escape", '{"msg_id": "e1", "s": "caf\\u00e9"}')
        pub.send("t.plain", '{"msg_id": "e2", "s": "cafe"}')
        pub.send(b"t.nul\x00topic", "{}")
        pub.send("t.text", "caf\u00e9")
        hub.wait_log("cannot be stored in PostgreSQL: its topic holds a NUL byte")
        # Stopping ends receiving: first make sure all four have arrived.
        fh.wait_for(lambda: hub.stats()["hub"]["received"] == 4, "4 received", hub=hub)
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert "refused it with its body in body_json" in log, log
        assert "stored 3 messages, 0 already stored, 1 refused, 0 lost" in log, log
        assert "completed 3, failed 1," in log, log
        out = pg.psql("SELECT row_to_json(t) FROM (SELECT seq, topic, msg_id, body_json,"
                      " body_text FROM messages ORDER BY seq) t", db="ascii")
        rows = [json.loads(line) for line in out.split("\n")]
        assert rows == [
            {"seq": 1, "topic": "t.escape", "msg_id": "e1", "body_json": None,
             "body_text": '{"msg_id": "e1", "s": "caf\\u00e9"}'},
            {"seq": 2, "topic": "t.plain", "msg_id": "e2", "body_json": {"msg_id": "e2", "s": "cafe"},
             "body_text": None},
            {"seq": 4, "topic": "t.text", "msg_id": None, "body_json": None,
             "body_text": "caf\u00e9"},
        ], rows
    finally:
        hub.kill()
        pub.close()


def wait_log_count(hub, text, count):
    fh.wait_for(lambda: hub.log().count(text) >= count,
                "%d log lines %r" % (count, text), hub=hub)


@pg_test
def test_postgres_killed_midstream(wd, pg):
    """The server goes down twice while messages keep coming, first in an
    immediate shutdown (a crash as far as clients can tell), then in a fast
    one, and comes back each time: with the consumer's retry settings every
    message is stored exactly once. Messages without msg_id are in the mix:
    (run, seq) is what keeps them from being stored twice when a batch is
    written again after a commit whose answer was lost."""
    n = 30000
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, {"postgres": pg.conninfo(), "batch": 200}, capacity=n + 10,
                            retry="{max_attempts: 1000, initial_ms: 10, max_ms: 200}"))
    try:
        pub.wait_subscribed(hub=hub)
        sent = 0

        def send_to(end):
            nonlocal sent
            for i in range(sent, end):
                pub.send(topic_of(i), body_of(i))
            sent = end

        for outage, sig in enumerate((signal.SIGQUIT, signal.SIGINT), start=1):
            send_to(outage * 10000)
            # Down while the hub works through this part; more arrives
            # while it is down.
            fh.wait_for(lambda: pg.count() >= sent - 9000, "rows before outage %d" % outage,
                        hub=hub)
            pg.stop(sig)
            send_to(sent + 1000)
            wait_log_count(hub, "answering RETRY until the database is back", outage)
            pg.start()
            wait_log_count(hub, "available again", outage)
        send_to(n)
        fh.wait_for(lambda: pg.count() >= n, "%d rows in PostgreSQL" % n, hub=hub)
        assert hub.stop() == 0, hub.log()
        log = hub.log()
        assert "0 refused, 0 lost" in log, log
        assert "failed 0," in log, log
        rows = pg.rows()
        check_pg_rows(rows, range(n))
        assert sorted(r["seq"] for r in rows) == list(range(1, n + 1))
    finally:
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_sqlite_archive, test_sqlite_restart_appends, test_bad_options,
             test_postgres_archive, test_postgres_refusals, test_postgres_killed_midstream])
