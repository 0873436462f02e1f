"""The worker case's consumers (tests/bench/bench_worker.py), both
fedora-messaging style callables; the runner has parsed each JSON body
before the call, as for any consumer.

noop: does nothing, so the hub and the runner's own cost set the pace.
fedora: the worker-bound row: each call parses a real ~2 KiB Fedora
message body (a Bodhi update from tests/data/fedmsg-sample.jsonl, read
once at import) and walks it, as a consumer that looks into its messages
would; a fixed amount of pure-Python work a message, whatever the body it
was given.
"""
import json
import os

_SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data",
                       "fedmsg-sample.jsonl")


def _pick(path, low=1900, high=2300):
    with open(path) as f:
        for line in f:
            body = json.loads(line)["body"]
            text = json.dumps(body, sort_keys=True, separators=(",", ":"))
            if low <= len(text) <= high and ".bodhi." in body.get("topic", ""):
                return text
    raise RuntimeError("no Bodhi body of %d to %d bytes in %s" % (low, high, path))


BODY = _pick(_SAMPLE)


def _walk(node):
    """Strings and numbers in node, as a consumer looking for users and
    packages would visit them."""
    if isinstance(node, dict):
        return sum(_walk(v) for v in node.values()) + len(node)
    if isinstance(node, list):
        return sum(_walk(v) for v in node)
    return 1


def noop(message):
    pass


def fedora(message):
    _walk(json.loads(BODY))
