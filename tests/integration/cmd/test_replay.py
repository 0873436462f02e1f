"""`fanhub replay`, the plugin test harness: each shipped plugin driven from a
JSON-lines file, with no hub and no bus, and checked against the file.

- log: its output is the input (seq, received_at, topic, body, body_base64),
  and replaying that output again gives the same bytes; fedmsg records
  ({"topic", "body": {...}}) arrive encoded as Python's json.dumps with
  sorted keys and compact separators, as `fanhub pub --jsonl` sends them.
- null: one "SEQ TOPIC -> ok" line per message, numbered from 1, stdin.
- store: one SQLite row per message, read back with python3's sqlite3.
- exec: each body reaches the command's stdin; exit 75 is retry, 1 fail.
  Skipped only when this source tree has no consumers/exec.
- relay: every message reaches a pyzmq SUB, topics rewritten. Skipped only
  when this source tree has no consumers/relay.
- errors: a bad options file (FILE:LINE:COL), options the plugin refuses,
  an unknown plugin, a malformed input line (named, after the lines before
  it were consumed): exit status 2.
- valgrind: the null and log plugins replayed under valgrind: no errors,
  no definite leaks. Needs a build without sanitizers (valgrind and ASan
  or TSan exclude each other): in a sanitizer build this case says SKIP.
"""
import base64
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

BUILD_DIR = os.path.dirname(os.path.dirname(os.path.abspath(fh.BIN)))
RESULT_RE = re.compile(r"^(\d+) (.*) -> (ok|retry|fail)$")


def plugin_args():
    return ["--plugin-dir", fh.SHIPPED_PLUGINS] if fh.SHIPPED_PLUGINS else []


def plugin_dir():
    return fh.SHIPPED_PLUGINS or os.path.join(BUILD_DIR, "lib", "fanhub", "plugins")


def have_plugin(name):
    """True when NAME.so was built; False (skip) only when the sources have
    no such plugin: a plugin in the sources that did not build fails."""
    if os.path.exists(os.path.join(plugin_dir(), name + ".so")):
        return True
    source = os.path.join(fh.SOURCE_DIR, "consumers", name)
    assert not os.path.isdir(source), "%s exists but %s.so is not in %s" % (
        source, name, plugin_dir())
    print("SKIP: no consumers/%s in this tree" % name)
    return False


def jsonl(records):
    return "".join(json.dumps(r) + "\n" for r in records)


def replay(wd, plugin, records=None, options=None, stdin=None, extra=()):
    """Runs `fanhub replay`; returns (status, result lines, stderr)."""
    args = ["replay", "--plugin", plugin] + plugin_args() + list(extra)
    if options is not None:
        args += ["--options", wd.write("options.yaml", options if isinstance(options, str)
                                       else json.dumps(options))]
    if records is not None:
        args += ["--input", wd.write("input.jsonl", jsonl(records))]
    status, out, err = fh.run(args, stdin=stdin)
    return status, out.splitlines(), err


def results(lines):
    parsed = []
    for line in lines:
        m = RESULT_RE.match(line)
        assert m, "not a result line: %r" % line
        parsed.append((int(m.group(1)), m.group(2), m.group(3)))
    return parsed


def sample_records():
    """Log-format records of every kind: seq and received_at given or not,
    text with escapes and non-ASCII, bytes that are not UTF-8."""
    records = []
    for i in range(1, 201):
        r = {"topic": "org.fanhub.test.%d" % (i % 7)}
        if i % 3:
            r["seq"] = 1000 + i
            r["received_at"] = "2026-11-21T09:%02d:%02d.%06dZ" % (i // 60, i % 60, i * 4711 % 1000000)
        if i % 11 == 0:
            r["body_base64"] = base64.b64encode(b"\xff\x00\xfe bytes %d" % i).decode()
        else:
            r["body"] = "body %d: caf\u00e9 \u2713 \"q\" \\ tab\t nl\n \u0001 \U0001F600" % i
        records.append(r)
    return records


def expected_seqs(records):
    seqs, following = [], 1
    for r in records:
        seq = r.get("seq", following)
        seqs.append(seq)
        following = seq + 1
    return seqs


def test_log_writes_back_its_input():
    wd = fh.Workdir()
    records = sample_records()
    out = wd.file("out.jsonl")
    status, lines, err = replay(wd, "log", records, {"path": out, "flush_ms": 0})
    assert status == 0, err
    seqs = expected_seqs(records)
    assert results(lines) == [(s, r["topic"], "ok") for s, r in zip(seqs, records)], lines
    assert "%d messages: %d ok, 0 retry, 0 fail" % (len(records), len(records)) in err, err
    written = fh.read_jsonl(out)
    assert len(written) == len(records)
    for r, w, seq in zip(records, written, seqs):
        assert w["seq"] == seq and w["topic"] == r["topic"], (r, w)
        if "received_at" in r:
            assert w["received_at"] == r["received_at"], (r, w)
        else:
            assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", w["received_at"]), w
        if "body" in r:
            assert w.get("body") == r["body"], (r, w)
        else:
            assert w.get("body_base64") == r["body_base64"], (r, w)
    # The log's own output replays to the same bytes.
    again = wd.file("again.jsonl")
    status, _, err = fh.run(["replay", "--plugin", "log", "--input", out, "--options",
                             wd.write("again.yaml", "path: %s\nflush_ms: 0\n" % again)]
                            + plugin_args())
    assert status == 0, err
    with open(out, "rb") as a, open(again, "rb") as b:
        assert a.read() == b.read()
    wd.cleanup()


def fedmsg_records():
    path = os.path.join(fh.DATA_DIR, "fedmsg-sample.jsonl") if fh.DATA_DIR else ""
    if path and os.path.exists(path):
        with open(path) as f:
            return [json.loads(line) for line in f]
    return [{"topic": "org.fedoraproject.prod.x.%d" % i,
             "body": {"i": i, "timestamp": 1359579067.617802 + i, "z": [1, 2.5e-7, None],
                      "a": "caf\u00e9 \U0001F600 \x7f", "msg": {"b": True, "a": {}}}}
            for i in range(50)]


def test_fedmsg_records_encoded_as_pub_sends_them():
    wd = fh.Workdir()
    records = fedmsg_records()
    out = wd.file("out.jsonl")
    status, lines, err = replay(wd, "log", records, "path: %s\nflush_ms: 0\n" % out)
    assert status == 0, err
    assert [s for s, _, _ in results(lines)] == list(range(1, len(records) + 1))
    written = fh.read_jsonl(out)
    assert len(written) == len(records)
    for r, w in zip(records, written):
        assert w["topic"] == r["topic"]
        assert w["body"] == json.dumps(r["body"], sort_keys=True, separators=(",", ":")), (r, w)
    wd.cleanup()


def test_null_from_stdin():
    wd = fh.Workdir()
    text = "".join('{"topic": "t.%d", "body": "%d"}\n\n' % (i, i) for i in range(500))
    status, lines, err = replay(wd, "null", stdin=text.encode())
    assert status == 0, err
    assert results(lines) == [(i + 1, "t.%d" % i, "ok") for i in range(500)]
    assert "500 messages: 500 ok, 0 retry, 0 fail" in err, err
    wd.cleanup()


def test_store_sqlite_one_row_per_message():
    if not have_plugin("store"):
        return
    wd = fh.Workdir()
    db = wd.file("archive.db")
    records = [{"topic": "org.fanhub.store.%d" % (i % 5),
                "body": {"msg_id": "2026-%d" % i, "i": i}} for i in range(300)]
    records += [{"topic": "org.fanhub.text", "body": "plain %d" % i} for i in range(20)]
    status, lines, err = replay(wd, "store", records, {"sqlite": db, "batch": 7})
    assert status == 0, err
    assert len(results(lines)) == len(records)
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT seq, topic, msg_id, body_json, body_text FROM messages "
                        "ORDER BY seq").fetchall()
    conn.close()
    assert len(rows) == len(records), (len(rows), err)
    for (seq, topic, msg_id, body_json, body_text), r, i in zip(rows, records, range(1, 10**6)):
        assert seq == i and topic == r["topic"], (seq, topic, r)
        if isinstance(r["body"], dict):
            assert msg_id == r["body"]["msg_id"]
            assert json.loads(body_json) == r["body"] and body_text is None
        else:
            assert body_text == r["body"] and body_json is None and msg_id is None
    wd.cleanup()


def test_exec_command_gets_each_body():
    if not have_plugin("exec"):
        return
    wd = fh.Workdir()
    outdir = wd.file("bodies")
    os.makedirs(outdir)
    records = [{"topic": "org.fanhub.exec.%d" % i, "body": "body %d\n\u00e9" % i}
               for i in range(1, 31)]
    # $0 is the directory: each command writes its stdin to a file named
    # after the message's sequence number.
    options = {"command": ["/bin/sh", "-c", 'cat > "$0/$FANHUB_SEQ"', outdir]}
    status, lines, err = replay(wd, "exec", records, options)
    assert status == 0, err
    assert results(lines) == [(i, r["topic"], "ok") for i, r in enumerate(records, 1)]
    for i, r in enumerate(records, 1):
        with open(os.path.join(outdir, str(i)), encoding="utf-8") as f:
            assert f.read() == r["body"]
    # Exit status 75 is RETRY, anything else FAIL: replay exits 1.
    options = {"command": ["/bin/sh", "-c", 'exit "$(cat)"']}
    status, lines, err = replay(wd, "exec", [{"topic": "a", "body": "0"},
                                             {"topic": "b", "body": "75"},
                                             {"topic": "c", "body": "1"}], options)
    assert status == 1, err
    assert results(lines) == [(1, "a", "ok"), (2, "b", "retry"), (3, "c", "fail")], lines
    assert "3 messages: 1 ok, 1 retry, 1 fail" in err, err
    wd.cleanup()


def test_relay_to_a_subscriber():
    if not have_plugin("relay"):
        return
    wd = fh.Workdir()
    sub = zmq.Context.instance().socket(zmq.SUB)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.RCVHWM, 0)
    endpoint = "tcp://127.0.0.1:%d" % fh.free_port()
    sub.bind(endpoint)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    records = [{"topic": "org.a.%d" % i, "body": "relayed %d" % i} for i in range(100)]
    # require_subscriber: the first message waits for the SUB's
    # subscription to reach the relay, so none is lost to the join.
    options = {"connect": endpoint, "topic_prefix": {"from": "org.a.", "to": "org.b."},
               "require_subscriber": True, "subscriber_wait_ms": int(fh.DEADLINE * 1000)}
    args = ["replay", "--plugin", "relay", "--options",
            wd.write("options.yaml", json.dumps(options)),
            "--input", wd.write("input.jsonl", jsonl(records))] + plugin_args()
    proc = subprocess.Popen([fh.BIN] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # libzmq attaches the relay's connection to the SUB (and sends the
        # subscription) only when this thread calls into the socket: poll
        # while the replay runs.
        got = []

        def received_all():
            while sub.poll(50):
                got.append(sub.recv_multipart())
            if proc.poll() not in (None, 0):
                raise AssertionError("replay exited %d:\n%s"
                                     % (proc.returncode, proc.stderr.read().decode()))
            return len(got) == len(records)

        fh.wait_for(received_all, "the SUB to get %d messages" % len(records))
        out, err = proc.communicate(timeout=fh.DEADLINE)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sub.close()
    err = err.decode(errors="replace")
    fh.check_sanitizers(err, "fanhub replay")
    assert proc.returncode == 0, err
    assert len(results(out.decode().splitlines())) == len(records)
    assert got == [[("org.b.%d" % i).encode(), r["body"].encode()]
                   for i, r in enumerate(records)], got[:3]
    wd.cleanup()


def test_errors_exit_2():
    wd = fh.Workdir()
    one = [{"topic": "a", "body": "x"}]
    # A YAML syntax error, named FILE:LINE:COL.
    status, lines, err = replay(wd, "null", one, "a: 1\nb: [1, 2\n")
    path = wd.file("options.yaml")
    assert status == 2 and re.search(re.escape(path) + r":\d+:\d+: ", err), err
    assert lines == [], lines
    # A key given twice.
    status, _, err = replay(wd, "null", one, "a: 1\na: 2\n")
    assert status == 2 and "%s:2:1: options.a: duplicate key (first at line 1)" % path in err, err
    # Not a map.
    status, _, err = replay(wd, "null", one, "- a\n")
    assert status == 2 and "%s:1:1: options: expected a map" % path in err, err
    # Options the plugin refuses: its reason, with the value's place.
    status, _, err = replay(wd, "log", one, "path: \"-\"\nflush_ms: lots\n")
    assert status == 2 and "refused its options" in err and "%s:2:11" % path in err, err
    # No such plugin, by name and by path.
    status, _, err = replay(wd, "no-such-plugin", one)
    assert status == 2 and "plugin 'no-such-plugin'" in err, err
    status, _, err = replay(wd, wd.file("nothing.so"), one)
    assert status == 2 and "nothing.so" in err, err
    # A malformed line stops the replay there, named; the lines before it
    # were consumed.
    text = ('{"topic": "a", "body": "1"}\n{"topic": "b", "body": "2"}\n'
            '{"topic": "c", "body": \n{"topic": "d", "body": "4"}\n')
    status, lines, err = replay(wd, "null", stdin=text.encode())
    assert status == 2 and "<stdin>:3" in err, err
    assert results(lines) == [(1, "a", "ok"), (2, "b", "ok")], lines
    for bad, why in ((['{"body": "x"}'], '"topic"'),
                     (['{"topic": "a"}'], '"body"'),
                     (['{"topic": "a", "body": "x", "body_base64": "eA=="}'], "not both"),
                     (['{"topic": "a", "body_base64": "%%%"}'], "base64"),
                     (['{"topic": "a", "body": "x", "seq": -1}'], '"seq"'),
                     (['{"topic": "a", "body": "x", "received_at": "yesterday"}'], "RFC 3339"),
                     (['["topic", "body"]'], "JSON object")):
        status, lines, err = replay(wd, "null", stdin=("\n".join(bad) + "\n").encode())
        assert status == 2 and "<stdin>:1" in err and why in err, (bad, err)
    input_path = wd.write("in.jsonl", '{"topic": "a", "body": "x"}\nnot json\n')
    status, _, err = fh.run(["replay", "--plugin", "null", "--input", input_path]
                            + plugin_args())
    assert status == 2 and "%s:2:" % input_path in err, err
    # Usage.
    status, _, err = fh.run(["replay"])
    assert status == 2 and "--plugin" in err, err
    status, _, err = fh.run(["replay", "--plugin", "null", "--name", "a b"], stdin=b"")
    assert status == 2 and "--name" in err, err
    wd.cleanup()


def sanitizer():
    cache = os.path.join(BUILD_DIR, "CMakeCache.txt")
    if not os.path.exists(cache):
        return ""
    with open(cache) as f:
        m = re.search(r"^FANHUB_SANITIZE:STRING=(.*)$", f.read(), re.M)
    return m.group(1) if m else ""


def test_valgrind_null_and_log():
    if sanitizer():
        print("SKIP: a FANHUB_SANITIZE=%s build; valgrind needs one without" % sanitizer())
        return
    valgrind = shutil.which("valgrind")
    assert valgrind, "valgrind is not installed (scripts/deps installs it)"
    wd = fh.Workdir()
    records = sample_records() + fedmsg_records()[:100]
    input_path = wd.write("input.jsonl", jsonl(records))
    for plugin, options in (("null", None),
                            ("log", "path: %s\nflush_ms: 5\n" % wd.file("log.jsonl")),
                            ("log", "flush_ms: 0\n")):
        args = ["replay", "--plugin", plugin, "--input", input_path] + plugin_args()
        if options:
            args += ["--options", wd.write("options.yaml", options)]
        proc = subprocess.run([valgrind, "--error-exitcode=99", "--leak-check=full",
                               "--errors-for-leak-kinds=definite", fh.BIN] + args,
                              capture_output=True, timeout=fh.DEADLINE)
        err = proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, "%s under valgrind: %d\n%s" % (plugin, proc.returncode, err)
        assert "ERROR SUMMARY: 0 errors" in err, err
        m = re.search(r"definitely lost: ([\d,]+) bytes", err)
        assert not m or m.group(1) == "0", err
        # With path "-" the log's lines come between the results.
        out = proc.stdout.decode().splitlines()
        logged = [line for line in out if line.startswith("{")]
        assert len(results([line for line in out if not line.startswith("{")])) == len(records)
        assert len(logged) == (len(records) if options == "flush_ms: 0\n" else 0)
    assert len(fh.read_jsonl(wd.file("log.jsonl"))) == len(records)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([
        test_log_writes_back_its_input,
        test_fedmsg_records_encoded_as_pub_sends_them,
        test_null_from_stdin,
        test_store_sqlite_one_row_per_message,
        test_exec_command_gets_each_body,
        test_relay_to_a_subscriber,
        test_errors_exit_2,
        test_valgrind_null_and_log,
    ])
