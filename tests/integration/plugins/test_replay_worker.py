"""`fanhub replay --plugin python` runs the real worker processes on the
repository's Fedora sample (tests/data/fedmsg-sample.jsonl, 765 fedmsg
messages): every message is answered as the consumer decides (ok, drop,
fail with its reason), none reported "retry" unrun, none expired. The way
docs/porting.md tells to try a ported consumer on real messages."""
import collections
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

SAMPLE = os.path.join(fh.SOURCE_DIR, "tests", "data", "fedmsg-sample.jsonl")

CONSUMER = """from fedora_messaging.exceptions import Drop


def handle(message):
    topic = message.topic
    assert isinstance(message.body, dict), type(message.body)
    if ".git." in topic:
        raise Drop()
    if ".fas." in topic:
        raise ValueError("no FAS here")
"""


def expected(topic):
    return "drop" if ".git." in topic else "fail" if ".fas." in topic else "ok"


def test_replay_python_over_the_fedora_sample():
    wd = fh.Workdir()
    directory = wd.file("modules")
    os.makedirs(directory)
    with open(os.path.join(directory, "porter.py"), "w") as f:
        f.write(CONSUMER)
    options = wd.write("options.yaml", "callable: \"porter:handle\"\npath: [%s]\n"
                       % json.dumps(directory))
    topics = [json.loads(line)["topic"] for line in open(SAMPLE) if line.strip()]
    assert len(topics) == 765, len(topics)
    status, out, err = fh.run(["replay", "--plugin", "python", "--options", options,
                               "--input", SAMPLE])
    lines = out.splitlines()
    assert len(lines) == len(topics), (len(lines), err[-2000:])
    answers = {}
    for line in lines:
        seq, topic, arrow, word = line.split(" ")
        assert arrow == "->", line
        answers[int(seq)] = (topic, word)
    assert sorted(answers) == list(range(1, len(topics) + 1)), "a message answered twice"
    words = collections.Counter(word for _, word in answers.values())
    assert words["retry"] == 0 and words["expired"] == 0, (words, err[-2000:])
    for seq, topic in enumerate(topics, 1):
        assert answers[seq] == (topic, expected(topic)), (seq, answers[seq], topic)
    # Each kind is there, so the test says something about each.
    assert words["ok"] and words["drop"] and words["fail"], words
    assert "fail: ValueError: no FAS here" in err, err[-2000:]
    summary = "%d messages: %d ok, 0 retry, %d fail, %d drop, 0 expired" % (
        len(topics), words["ok"], words["fail"], words["drop"])
    assert summary in err, err[-2000:]
    assert status == 1, status  # a fail is a failure, as for a C plugin
    wd.cleanup()


def test_replay_worker_with_the_perl_example():
    """--plugin worker: the Perl example worker (consumers/worker/examples)
    appends every message it gets; all 765 answered ok, each written once."""
    perl = fh.require_tool(shutil.which("perl"), "perl", "perl")
    wd = fh.Workdir()
    path = wd.file("bus.jsonl")
    example = os.path.join(fh.SOURCE_DIR, "consumers", "worker", "examples", "jsonl-worker.pl")
    options = wd.write("options.yaml", "command: [%s, %s]\nconfig: {path: %s}\n"
                       % (json.dumps(perl), json.dumps(example), json.dumps(path)))
    status, out, err = fh.run(["replay", "--plugin", "worker", "--options", options,
                               "--input", SAMPLE])
    assert status == 0, err[-2000:]
    words = collections.Counter(line.rsplit(" ", 1)[1] for line in out.splitlines())
    assert words == {"ok": 765}, words
    # The example writes with Perl's own encoding: only its seq is read.
    with open(path, "rb") as f:
        written = sorted(int(m) for m in re.findall(rb'"seq":(\d+)', f.read()))
    assert written == list(range(1, 766)), written[:10]
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_replay_python_over_the_fedora_sample, test_replay_worker_with_the_perl_example])
