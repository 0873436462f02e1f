"""Consumers for tests/integration/plugins/test_worker*.py, run by the shipped
Python runner. Each writes one JSON line per message it finished to
$WORKER_TEST_OUT (O_APPEND, one write a line: several processes share the
file): seq, attempt, pid, start and end (CLOCK_MONOTONIC ns), topic, body.

What a message's body asks for:
  "segv": true     the worker kills itself with SIGSEGV (a poison message)
  "gate": PATH     with segv: from its third attempt on, wait for PATH to
                   exist before dying (a test holds the crash loop open)
  "hang": true     the first attempt never answers
  "sleep": S       takes S seconds first (a slow consumer, not a hung one;
                   with segv, one that dies after a while)
  "nack" / "drop" / "fail" / "halt": true   raise Nack / Drop / an
                   exception / HaltConsumer
"""
import json
import os
import signal
import time

from fedora_messaging.exceptions import Drop, HaltConsumer, Nack

_out = os.open(os.environ["WORKER_TEST_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def record(message):
    """fedora-messaging style: a function given a Message."""
    start = time.monotonic_ns()
    body = message.body
    attempt = message.headers["fanhub_attempt"]
    if body.get("sleep"):
        time.sleep(body["sleep"])
    if body.get("segv"):
        gate = body.get("gate")
        if gate and attempt >= 3:
            while not os.path.exists(gate):
                time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGSEGV)
    if body.get("hang") and attempt == 1:
        while True:
            time.sleep(60)
    if body.get("nack") and attempt == 1:
        raise Nack()
    if body.get("drop"):
        raise Drop()
    if body.get("fail"):
        raise ValueError("asked to fail: %s" % body.get("i"))
    if body.get("halt"):
        raise HaltConsumer(reason="asked to halt")
    line = {"seq": message.headers["fanhub_seq"], "attempt": attempt, "pid": os.getpid(),
            "start": start, "end": time.monotonic_ns(), "topic": message.topic,
            "id": message.id, "body": body}
    os.write(_out, (json.dumps(line) + "\n").encode())


class Gated:
    """A class consumer whose start-up needs the file $WORKER_TEST_GATE (a
    database that is not up yet at boot)."""

    def __init__(self):
        if not os.path.exists(os.environ["WORKER_TEST_GATE"]):
            raise ConnectionRefusedError("the database is not up yet")

    def __call__(self, message):
        record(message)


def noop(message):
    """The benchmark's consumer: the body is parsed by the runner."""
