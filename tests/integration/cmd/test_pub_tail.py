#!/usr/bin/python3
"""fanhub pub and fanhub tail against pyzmq peers and against each other.

Run by ctest with Debian's /usr/bin/python3 (it has python3-zmq). The
environment names the binary (FANHUB_BIN) and the sample data
(FANHUB_DATA_DIR). Every wait is for a condition with a generous
deadline, never a sleep: a slow machine makes the test slower, not red.
Each case runs on its own free TCP port on 127.0.0.1.
"""

import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib  # first: run by hand, it sets FANHUB_BIN etc. from the build tree

FANHUB = os.environ.get("FANHUB_BIN", "fanhub")
DATA_DIR = os.environ.get("FANHUB_DATA_DIR", os.path.join(os.path.dirname(__file__), "../../data"))
SAMPLE = os.path.join(DATA_DIR, "fedmsg-sample.jsonl")
DEADLINE = 60.0
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "WARNING: ThreadSanitizer", "ERROR: ThreadSanitizer")

CTX = zmq.Context.instance()
CASES = []
RUNNING = []  # every process started, killed after each case if still there


def case(fn):
    CASES.append(fn)
    return fn


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def free_endpoint():
    # A port reserved for this process, not a bind(0)-close-and-hope one.
    return "tcp://127.0.0.1:%d" % fanhublib.free_port()


def fanhub(*args, **kw):
    """Starts fanhub; stdout and stderr go to temp files (no pipe to fill)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([FANHUB] + list(args), stdout=out, stderr=err, **kw)
    proc.out_file, proc.err_file = out, err
    RUNNING.append(proc)
    return proc


def finish(proc, timeout=DEADLINE):
    """Waits for exit; returns (rc, stdout bytes, stderr text)."""
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise Failure("%s did not exit within %.0f s" % (proc.args, timeout))
    proc.out_file.seek(0)
    proc.err_file.seek(0)
    out = proc.out_file.read()
    err = proc.err_file.read().decode("utf-8", "replace")
    proc.out_file.close()
    proc.err_file.close()
    # A sanitizer report fails the case even if the exit status hides it.
    for mark in SANITIZER_MARKS:
        check(mark not in err, "%s: sanitizer report:\n%s" % (proc.args, err[-6000:]))
    return rc, out, err


def kill(proc):
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def sub_socket(endpoint, bind=False, prefix=b""):
    sock = CTX.socket(zmq.SUB)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 0)
    sock.setsockopt(zmq.SUBSCRIBE, prefix)
    if bind:
        sock.bind(endpoint)
    else:
        sock.connect(endpoint)
    return sock


def receive(sock, count, proc=None):
    """Receives `count` multipart messages or fails at the deadline."""
    msgs = []
    deadline = time.monotonic() + DEADLINE
    while len(msgs) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Failure("received %d of %d messages before the deadline" % (len(msgs), count))
        if sock.poll(int(min(left, 0.5) * 1000)):
            msgs.append(sock.recv_multipart())
        elif proc is not None and proc.poll() is not None and not sock.poll(0):
            rc, _, err = finish(proc)
            raise Failure("publisher exited (%d) after %d of %d messages: %s" % (rc, len(msgs), count, err))
    return msgs


def pub_ok(proc, sent):
    rc, _, err = finish(proc)
    check(rc == 0, "pub exited %d: %s" % (rc, err))
    check(re.search(r"sent %d messages in \d+\.\d{3} s \(\d+ msg/s\)" % sent, err),
          "no summary for %d messages in: %r" % (sent, err))


def fedmsg_encode(body):
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


# ---- fanhub pub ------------------------------------------------------------

@case
def pub_size_bodies_in_order():
    ep = free_endpoint()
    proc = fanhub("pub", "--bind", ep, "-n", "1000", "--size", "100", "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 1000, proc)
    finally:
        sub.close()
    pub_ok(proc, 1000)
    last = 0
    for i, frames in enumerate(msgs):
        check(len(frames) == 2, "message %d has %d frames" % (i, len(frames)))
        topic, body = frames
        check(topic == b"org.fanhub.demo.message", "topic %r" % topic)
        check(len(body) == 100, "message %d: body of %d bytes: %r" % (i, len(body), body))
        seq = json.loads(body)["seq"]
        check(seq == last + 1, "message %d: seq %d after %d" % (i, seq, last))
        last = seq


@case
def pub_size_small_bodies_stay_exact():
    # 32 bytes leaves no room for the pad once the number grows: the
    # size must hold anyway, and the body must stay JSON.
    ep = free_endpoint()
    proc = fanhub("pub", "-b", ep, "-n", "5", "--size", "32", "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 5, proc)
    finally:
        sub.close()
    pub_ok(proc, 5)
    for i, (_, body) in enumerate(msgs):
        check(len(body) == 32 and json.loads(body)["seq"] == i + 1, "body %r" % body)


@case
def pub_jsonl_as_fedmsg_encoded():
    with open(SAMPLE, encoding="utf-8") as f:
        records = [json.loads(line) for line in f if line.strip()]
    check(len(records) == 765, "sample has %d records" % len(records))
    ep = free_endpoint()
    proc = fanhub("pub", "-b", ep, "--jsonl", SAMPLE, "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, len(records), proc)
    finally:
        sub.close()
    pub_ok(proc, len(records))
    for i, (frames, rec) in enumerate(zip(msgs, records)):
        check(len(frames) == 2, "message %d: %d frames" % (i, len(frames)))
        check(frames[0] == rec["topic"].encode(), "message %d: topic %r, want %r" % (i, frames[0], rec["topic"]))
        want = fedmsg_encode(rec["body"])
        if frames[1] != want:
            at = next((k for k in range(min(len(want), len(frames[1]))) if want[k] != frames[1][k]), None)
            raise Failure("message %d (line %d): body differs at byte %s:\n got  %r\n want %r" % (
                i, i + 1, at, frames[1][max(0, (at or 0) - 40):(at or 0) + 40],
                want[max(0, (at or 0) - 40):(at or 0) + 40]))


@case
def pub_jsonl_encoding_edge_cases():
    # Where jansson's own dump and Python's json.dumps part ways: float
    # digits and notation, \u escapes (case, DEL, NUL, astral planes).
    bodies = [
        {"f": [0.1, 1.1, 2.5, 1e16, 1e15, 1e-5, 0.0001, 123456.789e3, -0.0, 0.0, 1e+100,
               5e-324, 1.7976931348623157e308, 1359579067.617802, 2 ** 0.5]},
        {"i": [0, -1, 2 ** 63 - 1, -2 ** 63], "b": [True, False, None]},
        {"s": "caf\u00e9 \u2603 \U0001f600 \x00 \x1f \x7f \" \\ / \b\f\n\r\t"},
        {"z": 1, "a": {"\u00e9": 1, "e": 2, "E": 3, "": 4}, "m": []},
        "a bare string",
        [1, {}],
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "edge.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for i, body in enumerate(bodies):
                f.write(json.dumps({"topic": "t.%d" % i, "body": body}, ensure_ascii=False) + "\n")
        ep = free_endpoint()
        proc = fanhub("pub", "-b", ep, "--jsonl", path, "--timeout", "60")
        sub = sub_socket(ep)
        try:
            msgs = receive(sub, len(bodies), proc)
        finally:
            sub.close()
        pub_ok(proc, len(bodies))
    for i, ((topic, got), body) in enumerate(zip(msgs, bodies)):
        check(topic == b"t.%d" % i, "topic %r" % topic)
        check(got == fedmsg_encode(body), "body %d:\n got  %r\n want %r" % (i, got, fedmsg_encode(body)))


@case
def pub_jsonl_cycles_to_count():
    ep = free_endpoint()
    proc = fanhub("pub", "-b", ep, "--jsonl", SAMPLE, "-n", "800", "--timeout", "60", "-q")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 800, proc)
    finally:
        sub.close()
    rc, _, err = finish(proc)
    check(rc == 0 and err == "", "rc %d, stderr %r (-q must keep it quiet)" % (rc, err))
    check(msgs[765] == msgs[0] and msgs[799] == msgs[34], "the file is not cycled")


@case
def pub_jsonl_bad_line_names_file_and_line():
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bad.jsonl")
        with open(path, "w") as f:
            f.write('{"topic":"a.b","body":{"x":1}}\n\n{"topic":"a.c","body":\n')
        rc, _, err = finish(fanhub("pub", "-b", free_endpoint(), "--jsonl", path))
        check(rc == 1, "exit %d, want 1" % rc)
        check("%s:3" % path in err, "error does not name %s:3: %r" % (path, err))
        with open(path, "w") as f:
            f.write('{"topic":"a.b","body":{"x":1}}\n["no", "topic"]\n')
        rc, _, err = finish(fanhub("pub", "-b", free_endpoint(), "--jsonl", path))
        check(rc == 1 and "%s:2" % path in err, "exit %d, stderr %r" % (rc, err))
        rc, _, err = finish(fanhub("pub", "-b", free_endpoint(), "--jsonl", os.path.join(tmp, "missing")))
        check(rc == 1 and "missing" in err, "exit %d, stderr %r" % (rc, err))


@case
def pub_stdin_lines_are_bodies():
    lines = ["first line", '{"json": "too"}', "", "caf\u00e9 \u2603", "crlf"]
    data = ("\n".join(lines[:-1]) + "\n" + lines[-1] + "\r\n").encode("utf-8")
    for flag in (["-"], ["--stdin"]):
        ep = free_endpoint()
        proc = fanhub("pub", "-b", ep, "-t", "org.example.log", "--timeout", "60", *flag,
                      stdin=subprocess.PIPE)
        sub = sub_socket(ep)
        try:
            # pub reads stdin only once the subscription is there.
            proc.stdin.write(data)
            proc.stdin.close()
            msgs = receive(sub, len(lines), proc)
        finally:
            sub.close()
        pub_ok(proc, len(lines))
        got = [(t, b.decode("utf-8")) for t, b in msgs]
        check(got == [(b"org.example.log", line) for line in lines], "got %r" % got)


@case
def pub_rate_completes():
    ep = free_endpoint()
    proc = fanhub("pub", "-b", ep, "--rate", "2000", "-n", "2000", "--size", "64", "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 2000, proc)
    finally:
        sub.close()
    pub_ok(proc, 2000)
    check([json.loads(b)["seq"] for _, b in msgs] == list(range(1, 2001)), "sequence broken")


@case
def pub_stamp_frame():
    ep = free_endpoint()
    before = time.monotonic_ns()
    proc = fanhub("pub", "-b", ep, "-n", "20", "--stamp", "--body", "{}", "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 20, proc)
    finally:
        sub.close()
    after = time.monotonic_ns()
    pub_ok(proc, 20)
    stamps = []
    for frames in msgs:
        check(len(frames) == 3 and len(frames[2]) == 8, "frames %r" % frames)
        check(frames[1] == b"{}", "body %r" % frames[1])
        stamps.append(int.from_bytes(frames[2], "little"))
    check(stamps == sorted(stamps), "stamps go back in time")
    check(before <= stamps[0] and stamps[-1] <= after, "stamps are not CLOCK_MONOTONIC ns")


@case
def pub_connects_to_a_subscriber():
    ep = free_endpoint()
    sub = sub_socket(ep, bind=True)
    try:
        proc = fanhub("pub", "--connect", ep, "--wait-subscribers", "1", "-n", "50", "--body", "hi",
                      "--timeout", "60")
        msgs = receive(sub, 50, proc)
    finally:
        sub.close()
    pub_ok(proc, 50)
    check(all(m == [b"org.fanhub.demo.message", b"hi"] for m in msgs), "messages %r" % msgs[:3])


@case
def pub_stops_cleanly_on_signals():
    for signum in (signal.SIGINT, signal.SIGTERM):
        ep = free_endpoint()
        proc = fanhub("pub", "-b", ep, "-n", "0", "-r", "200", "--timeout", "60")
        sub = sub_socket(ep)
        try:
            receive(sub, 5, proc)
        finally:
            sub.close()
        proc.send_signal(signum)
        rc, _, err = finish(proc)
        check(rc == 0, "exit %d after signal %d: %s" % (rc, signum, err))
        check(re.search(r"sent \d+ messages", err), "no summary: %r" % err)


@case
def pub_wait_timeout_fails():
    rc, _, err = finish(fanhub("pub", "-b", free_endpoint(), "--timeout", "0.2"))
    check(rc == 1, "exit %d, want 1" % rc)
    check("subscri" in err and "--timeout" in err, "unclear message: %r" % err)


# ---- fanhub tail -------------------------------------------------------------

TOPICS = [
    "org.fedoraproject.prod.buildsys.build.state.change",
    "org.fedoraproject.prod.git.receive",
    "io.pagure.prod.pagure.issue.new",
    "io.pagure.prod.pagure.issue.new.comment",
    "org.fedoraproject.prod.bodhi.update.comment",
    "org.centos.prod.ci.pipeline.complete",
    "io.pagure.prod.pagure.git.receive",
    "org.fedoraproject.stg.buildsys.tag",
]


def pattern_match(pattern, topic):
    if pattern.startswith("="):
        return topic == pattern[1:]
    if "*" in pattern:
        return re.fullmatch(".*".join(re.escape(p) for p in pattern.split("*")), topic, re.S) is not None
    return topic.startswith(pattern)


def expected_subscriptions(patterns):
    """The subscriptions tail is expected to make (see cmd_tail.c)."""
    prefixes = set()
    for p in patterns:
        prefixes.add(p[1:] if p.startswith("=") else p.split("*", 1)[0])
    if not patterns or "" in prefixes:
        return {b""}
    return {p.encode() for p in prefixes
            if not any(q != p and p.startswith(q) for q in prefixes)}


def tail_against_publisher(patterns, count, extra=(), tail_binds=False, body_of=None):
    """Runs `fanhub tail` against a pyzmq XPUB that publishes the TOPICS in
    a cycle (body {"seq":N}) until tail exits. The XPUB reports tail's
    subscriptions, so publishing starts once tail is fully subscribed.
    Returns (stdout lines, [(seq, topic, body)] of what was published)."""
    ep = free_endpoint()
    pub = CTX.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.setsockopt(zmq.SNDHWM, 0)
    if tail_binds:
        proc = fanhub("tail", "-b", ep, "-n", str(count), *extra, *patterns)
        pub.connect(ep)
    else:
        pub.bind(ep)
        proc = fanhub("tail", "--connect", ep, "-n", str(count), *extra, *patterns)
    sent = []
    try:
        want = expected_subscriptions(patterns)
        have = set()
        deadline = time.monotonic() + DEADLINE
        while not want <= have:
            check(time.monotonic() < deadline, "tail subscribed to %r, expected %r" % (have, want))
            if proc.poll() is not None:
                raise Failure("tail exited early: %r" % (finish(proc)[2],))
            if pub.poll(200):
                msg = pub.recv()
                if msg[:1] == b"\x01":
                    have.add(msg[1:])
        check(have == want, "tail subscribed to %r, expected %r" % (have, want))
        seq = 0
        while proc.poll() is None:
            check(time.monotonic() < deadline, "tail did not exit after %d messages" % seq)
            for _ in range(50):
                topic = TOPICS[seq % len(TOPICS)]
                body = body_of(seq) if body_of else ('{"seq":%d}' % seq).encode()
                pub.send_multipart([topic.encode(), body])
                sent.append((seq, topic, body))
                seq += 1
            time.sleep(0.001)  # pacing only; correctness never depends on it
            while pub.poll(0):
                pub.recv()
    finally:
        kill(proc)
        pub.close()
    rc, out, err = finish(proc)
    check(rc == 0, "tail exited %d: %s" % (rc, err))
    return out.decode("utf-8").splitlines(), sent


def check_run(patterns, lines, sent, count):
    """The printed lines are the first `count` published messages that match
    (a contiguous run of the matching sequence, starting at its start,
    since publishing began only after tail had subscribed)."""
    check(len(lines) == count, "tail printed %d lines, want %d: %r" % (len(lines), count, lines[:5]))
    matching = ["%s %s" % (t, b.decode()) for _, t, b in sent if any(pattern_match(p, t) for p in patterns)]
    for line in lines:
        topic = line.split(" ", 1)[0]
        check(any(pattern_match(p, topic) for p in patterns), "%r matches none of %r" % (line, patterns))
    starts = [i for i, m in enumerate(matching) if m == lines[0]]
    check(starts, "first line %r was never published" % lines[0])
    start = starts[0]
    check(matching[start:start + count] == lines,
          "not a contiguous run of the matching messages: %r" % lines[:5])
    check(start == 0, "run starts at matching message %d, not the first" % start)


@case
def tail_prefix_pattern():
    patterns = ["org.fedoraproject.prod.buildsys."]
    lines, sent = tail_against_publisher(patterns, 25)
    check_run(patterns, lines, sent, 25)


@case
def tail_glob_pattern():
    patterns = ["*.git.receive"]
    lines, sent = tail_against_publisher(patterns, 25)
    check_run(patterns, lines, sent, 25)


@case
def tail_glob_with_literal_prefix():
    patterns = ["org.fedoraproject.*.buildsys.*"]
    lines, sent = tail_against_publisher(patterns, 25)
    check_run(patterns, lines, sent, 25)


@case
def tail_exact_pattern():
    # The exact pattern must not take io.pagure.prod.pagure.issue.new.comment.
    patterns = ["=io.pagure.prod.pagure.issue.new"]
    lines, sent = tail_against_publisher(patterns, 25)
    check_run(patterns, lines, sent, 25)


@case
def tail_mixed_patterns():
    patterns = ["org.fedoraproject.prod.buildsys.", "io.pagure.*.issue.*",
                "=org.centos.prod.ci.pipeline.complete", "org.fedoraproject.prod."]
    lines, sent = tail_against_publisher(patterns, 40)
    check_run(patterns, lines, sent, 40)


@case
def tail_no_pattern_is_everything():
    lines, sent = tail_against_publisher([], 30)
    check(lines == ["%s %s" % (t, b.decode()) for _, t, b in sent[:30]], "got %r" % lines[:5])


@case
def tail_binds():
    patterns = ["io.pagure."]
    lines, sent = tail_against_publisher(patterns, 20, tail_binds=True)
    check_run(patterns, lines, sent, 20)


@case
def tail_json_output():
    bodies = [b'{"seq":%d,"x":[1,2.5,"\\u00e9"]}', b"plain text %d", b"\xff\xfe %d",
              b"two\nlines %d", b'  "a json string %d"  ']

    def body_of(seq):
        return bodies[seq % len(bodies)].replace(b"%d", str(seq).encode())

    lines, sent = tail_against_publisher(["org.fedoraproject.prod."], 20, extra=["--json"], body_of=body_of)
    check(len(lines) == 20, "%d lines" % len(lines))
    matching = [(t, b) for _, t, b in sent if t.startswith("org.fedoraproject.prod.")]
    for line, (topic, body) in zip(lines, matching):
        obj = json.loads(line)
        check(obj["topic"] == topic, "topic in %r" % line)
        if "body" in obj:
            check(b"\n" not in body, "multi-line body embedded: %r" % line)
            check(json.loads(body) == obj["body"], "body in %r" % line)
            check(body.decode() in line, "JSON body not copied verbatim: %r" % line)
        elif "body_text" in obj:
            check(obj["body_text"].encode() == body, "body_text in %r" % line)
        else:
            import base64
            check(base64.b64decode(obj["body_base64"]) == body, "body_base64 in %r" % line)
    kinds = {next(k for k in json.loads(l) if k.startswith("body")) for l in lines}
    check(kinds == {"body", "body_text", "body_base64"}, "kinds %r" % kinds)


@case
def tail_escapes_plain_output():
    def body_of(seq):
        return [b"a\nb\r\x1b %d", b"\xc3\x28 %d", "caf\u00e9\t%d".encode()][seq % 3].replace(
            b"%d", str(seq).encode())

    lines, sent = tail_against_publisher([], 3, body_of=body_of)
    want = ["%s a\\nb\\r\\x1b 0" % TOPICS[0],
            "%s base64:wyggMQ==" % TOPICS[1],
            "%s caf\u00e9\t2" % TOPICS[2]]
    check(lines == want, "got %r, want %r" % (lines, want))


@case
def pub_to_tail():
    # pub waits for tail's subscription, so tail sees every message.
    ep = free_endpoint()
    tail = fanhub("tail", "--connect", ep, "-n", "5")
    try:
        proc = fanhub("pub", "-b", ep, "-n", "5", "--size", "50", "-t", "org.fanhub.test.e2e",
                      "--timeout", "60")
        pub_ok(proc, 5)
        rc, out, err = finish(tail)
    finally:
        kill(tail)
    check(rc == 0, "tail exited %d: %s" % (rc, err))
    lines = out.decode().splitlines()
    check(len(lines) == 5, "lines %r" % lines)
    for i, line in enumerate(lines):
        topic, body = line.split(" ", 1)
        check(topic == "org.fanhub.test.e2e" and len(body) == 50 and json.loads(body)["seq"] == i + 1,
              "line %r" % line)


@case
def tail_stops_cleanly_on_signals():
    for signum in (signal.SIGINT, signal.SIGTERM):
        ep = free_endpoint()
        pub = CTX.socket(zmq.XPUB)
        pub.setsockopt(zmq.LINGER, 0)
        pub.bind(ep)
        tail = fanhub("tail", "--connect", ep)
        try:
            check(pub.poll(int(DEADLINE * 1000)), "tail never subscribed")
            pub.recv()
            pub.send_multipart([b"a.b", b"before the signal"])
            # Buffered output reaches the file within ~100 ms of quiet.
            deadline = time.monotonic() + DEADLINE
            while os.fstat(tail.out_file.fileno()).st_size == 0:
                check(time.monotonic() < deadline, "buffered output never flushed")
                time.sleep(0.01)
            tail.send_signal(signum)
            rc, out, err = finish(tail)
        finally:
            kill(tail)
            pub.close()
        check(rc == 0, "exit %d after signal %d: %s" % (rc, signum, err))
        check(out == b"a.b before the signal\n", "output %r" % out)


# ---- -c FILE: the hub's bus ------------------------------------------------------

CONFIG_DIR = tempfile.TemporaryDirectory(prefix="fanhub-pubtail-")  # removed at exit


def hub_config(text):
    """A hub configuration file (consumers are not looked at here)."""
    path = tempfile.mktemp(suffix=".yaml", dir=CONFIG_DIR.name)
    with open(path, "w") as f:
        f.write(text + "consumers:\n  - {name: a, plugin: log}\n")
    return path


@case
def tail_config_connects_where_the_hub_does():
    ep = free_endpoint()
    bind = free_endpoint()
    path = hub_config("bus:\n  connect: [%s]\n  bind: %s\n" % (ep, bind))
    pub = CTX.socket(zmq.XPUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.bind(ep)
    tail = fanhub("tail", "-c", path, "-n", "3")
    try:
        check(pub.poll(int(DEADLINE * 1000)), "tail never subscribed to the hub's publisher")
        pub.recv()
        for i in range(3):
            pub.send_multipart([b"org.fanhub.test.config", b"%d" % i])
        rc, out, err = finish(tail)
    finally:
        kill(tail)
        pub.close()
    check(rc == 0, "tail exited %d: %s" % (rc, err))
    check(out.decode().splitlines() == ["org.fanhub.test.config %d" % i for i in range(3)],
          "output %r" % out)
    # The hub's bind endpoint is said, not used.
    check("%s: the hub binds %s: its publishers connect to the hub, where tail cannot see them\n"
          % (path, bind) in err, "stderr %r" % err)


@case
def tail_config_of_a_hub_that_only_binds():
    path = hub_config("bus:\n  bind: tcp://*:9940\n")
    rc, out, err = finish(fanhub("tail", "-c", path))
    check(rc == 2 and out == b"", "exit %d, stdout %r" % (rc, out))
    check(err == "fanhub tail: %s: the hub binds tcp://*:9940: its publishers connect to "
          "the hub, where tail cannot see them; give --connect or --bind\n" % path, "%r" % err)
    rc, out, err = finish(fanhub("tail", "-c", "/nonexistent/hub.yaml"))
    check(rc == 2 and "/nonexistent/hub.yaml: cannot open" in err, "%d %r" % (rc, err))


@case
def pub_config_meets_the_hub():
    # A hub that connects: pub binds there.
    ep = free_endpoint()
    proc = fanhub("pub", "-c", hub_config("bus:\n  connect: %s\n" % ep), "-n", "5",
                  "--body", "to the hub", "--timeout", "60")
    sub = sub_socket(ep)
    try:
        msgs = receive(sub, 5, proc)
    finally:
        sub.close()
    pub_ok(proc, 5)
    check(msgs == [[b"org.fanhub.demo.message", b"to the hub"]] * 5, "messages %r" % msgs)
    # A hub that binds on every address: pub connects to it on loopback.
    ep = free_endpoint()
    path = hub_config("bus:\n  bind: tcp://*:%s\n" % ep.rsplit(":", 1)[1])
    sub = sub_socket(ep, bind=True)
    try:
        proc = fanhub("pub", "-c", path, "--wait-subscribers", "1", "-n", "5", "--timeout", "60")
        msgs = receive(sub, 5, proc)
    finally:
        sub.close()
    pub_ok(proc, 5)
    check(len(msgs) == 5, "messages %r" % msgs)


# ---- usage ---------------------------------------------------------------------

@case
def usage_errors_exit_2():
    ep = free_endpoint()
    path = hub_config("bus:\n  connect: %s\n" % ep)
    bad = [
        ["pub", "--connect", ep, "--bind", ep],
        ["pub", "-c", path, "--connect", ep],
        ["pub", "--bind", ep, "-c", path],
        ["pub", "-c", "/nonexistent/hub.yaml"],
        ["tail", "-c", path, "--connect", ep],
        ["tail", "-c", path, "-b", ep],
        ["pub", "--bind", "nonsense"],
        ["pub", "--connect", "tcp://127.0.0.1"],
        ["pub", "--frobnicate"],
        ["pub", "-Z"],
        ["pub", "--rate", "fast"],
        ["pub", "--rate", "-5"],
        ["pub", "--count", "-1"],
        ["pub", "--size", "3"],
        ["pub", "--body", "x", "--jsonl", SAMPLE],
        ["pub", "--topic"],
        ["pub", "extra-argument"],
        ["tail", "--frobnicate"],
        ["tail", "--connect", "nonsense"],
        ["tail", "-n", "many"],
        ["tail", "--rcvhwm", "-1"],
        ["pub", "--timeout", "soon"],
        ["pub", "--linger-ms", "-2"],
        ["pub", "--sndhwm", "2147483648"],
        ["pub", "--wait-subscribers", "x"],
    ]
    for args in bad:
        rc, out, err = finish(fanhub(*args))
        check(rc == 2, "%r: exit %d, want 2 (stderr %r)" % (args, rc, err))
        check("try 'fanhub %s --help'" % args[0] in err, "%r: no hint in %r" % (args, err))
        check(len(err.strip().splitlines()) == 2, "%r: want problem + hint, got %r" % (args, err))
        check(out == b"", "%r: stdout %r" % (args, out))
    # The option table words a bad value as the configuration does.
    worded = {
        ("pub", "--count", "-1"): "--count: expected an integer of at least 0, got '-1'",
        ("pub", "--size", "3"): "--size: expected a size such as 4096, 64KiB or 1MiB from 32 to "
                                "1073741824 bytes, got '3'",
        ("pub", "--rate", "fast"): "--rate: expected a number of at least 0, got 'fast'",
        ("pub", "--timeout", "1.0001"): "--timeout: expected seconds from 0 to 31536000 (or a "
                                        "duration such as 250ms, 2s or 1m), got '1.0001'",
        ("pub", "--linger-ms", "-2"): "--linger-ms: expected an integer from -1 to 2147483647, "
                                      "got '-2'",
        ("tail", "-n", "many"): "--count: expected an integer of at least 0, got 'many'",
    }
    for args, what in worded.items():
        rc, out, err = finish(fanhub(*args))
        check(err.splitlines()[0] == "fanhub %s: %s" % (args[0], what), "%r: %r" % (args, err))


@case
def help_exits_0():
    for cmd in ("pub", "tail"):
        for flag in ("--help", "-h"):
            rc, out, err = finish(fanhub(cmd, flag))
            check(rc == 0, "%s %s: exit %d" % (cmd, flag, rc))
            check(out.startswith(b"usage: fanhub %s" % cmd.encode()), "%s %s: %r" % (cmd, flag, out[:80]))
            check(err == "", "%s %s: stderr %r" % (cmd, flag, err))


def main():
    # NAME or FILE::NAME, else FANHUB_CASE=GLOB (as fanhublib.main).
    only = [arg.rsplit("::", 1)[-1] for arg in sys.argv[1:]]
    pattern = os.environ.get("FANHUB_CASE", "")
    if pattern and not only:
        only = [fn.__name__ for fn in CASES if fnmatch.fnmatchcase(fn.__name__, pattern)]
        if not only:
            print("SKIP: no case matches FANHUB_CASE=%s" % pattern)
            return fanhublib.SKIP_STATUS
    passed = failed = 0
    for fn in CASES:
        if only and fn.__name__ not in only:
            continue
        started = time.monotonic()
        try:
            fn()
        except Exception as e:
            failed += 1
            print("FAIL %s (%.1f s): %s" % (fn.__name__, time.monotonic() - started, e), flush=True)
            if not isinstance(e, Failure):
                traceback.print_exc()
        else:
            passed += 1
            print("ok   %s (%.1f s)" % (fn.__name__, time.monotonic() - started), flush=True)
        for proc in RUNNING:
            kill(proc)
        RUNNING.clear()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
