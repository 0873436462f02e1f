"""Per-consumer control of a running hub (issue 38, item 3): `fanhub
restart CONSUMER` under load gives a Python consumer new worker
processes that load the module anew, losing nothing; `fanhub pause` stops
its delivery while the backlog rises (state "paused" in every view), and
`fanhub resume` delivers it all."""
import json
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

N = 3000
WINDOW = 10  # the worker plugin's default prefetch: what a worker may hold

MODULE = """import json
import os

VERSION = %d
_out = os.open(os.environ["CONTROL_TEST_OUT"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def record(message):
    line = {"i": message.body["i"], "version": VERSION, "pid": os.getpid()}
    os.write(_out, (json.dumps(line) + "\\n").encode())
"""


def write_module(directory, version):
    with open(os.path.join(directory, "versioned.py"), "w") as f:
        f.write(MODULE % version)


def consumer_yaml(directory, workers=1):
    return ("  - name: py\n    plugin: python\n    topics: [org.test]\n"
            "    queue: {capacity: 100000}\n    workers: %d\n" % workers +
            "    options: {callable: \"versioned:record\", path: [%s],"
            " restart_delay: 50ms, restart_delay_max: 200ms}\n" % json.dumps(directory))


def records(path):
    return fh.read_jsonl(path) if os.path.exists(path) else []


def stream(pub, first, count, restarted):
    """Sends count messages; the second half waits for the restart to have
    answered, so that it lands mid-stream however slow the machine."""
    for i in range(first, first + count):
        if i == first + count // 2 and restarted is not None:
            restarted.wait(120)
        pub.send("org.test.x", json.dumps({"i": i}))
        if i % 100 == 99:
            time.sleep(0.01)


def test_restart_under_load_loads_new_code():
    wd = fh.Workdir()
    directory = wd.file("modules")
    os.makedirs(directory)
    write_module(directory, 1)
    out = wd.file("records.jsonl")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml({"connect": [pub.endpoint]},
                                                     consumer_yaml(directory),
                                                     "shutdown_timeout: 60\n"),
                                 env={"CONTROL_TEST_OUT": out}))
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        restarted = threading.Event()
        sender = threading.Thread(target=stream, args=(pub, 0, N, restarted))
        sender.start()
        try:
            fh.wait_for(lambda: len(records(out)) > N // 8, "an eighth consumed", hub=hub)
            write_module(directory, 2)  # the new code, on disk before the restart
            status, said, err = fh.run(["restart", "-e", hub.control, "py"])
        finally:
            restarted.set()
            sender.join()
        assert status == 0 and "restarted consumer 'py'" in said, (status, said, err)
        fh.wait_for(lambda: {r["i"] for r in records(out)} >= set(range(N)), "every message",
                    hub=hub)
        lines = records(out)
        seen = [r["i"] for r in lines]
        assert set(seen) == set(range(N)), "lost: %s" % sorted(set(range(N)) - set(seen))[:20]
        repeats = len(seen) - N
        assert 0 <= repeats <= WINDOW, repeats
        versions = [r["version"] for r in lines]
        # The old instance consumed what it held, then the new one took over.
        assert versions[0] == 1 and versions[-1] == 2, versions[:3] + versions[-3:]
        first_new = versions.index(2)
        assert set(versions[first_new:]) == {2}, "old code answered after the new"
        assert {r["pid"] for r in lines[first_new:]}.isdisjoint(
            {r["pid"] for r in lines[:first_new]}), "no new worker processes"
        log = hub.log()
        assert "consumer 'py': restarting (fanhub restart)" in log, log
        # A consumer the hub does not have: refused, exit 1.
        status, _, err = fh.run(["restart", "-e", hub.control, "nope"])
        assert status == 1 and "no consumer 'nope' in this hub" in err, (status, err)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def test_pause_and_resume():
    """One worker thread, then a pool (workers: 2: a dispatcher and a
    keyed scheduler, which must hold what it has too)."""
    for workers in (1, 2):
        pause_and_resume(workers)


def pause_and_resume(workers):
    wd = fh.Workdir()
    directory = wd.file("modules")
    os.makedirs(directory)
    write_module(directory, 1)
    out = wd.file("records.jsonl")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml({"connect": [pub.endpoint]},
                                                     consumer_yaml(directory, workers)),
                                 env={"CONTROL_TEST_OUT": out}))
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        stream(pub, 0, 100, None)
        fh.wait_for(lambda: len(records(out)) == 100, "the first 100", hub=hub)

        status, said, err = fh.run(["pause", "-e", hub.control, "py"])
        assert status == 0 and "paused 'py'" in said, (status, said, err)
        before = hub.consumer(hub.stats(), "py")
        assert before["state"] == 3, before
        stream(pub, 100, 500, None)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["backlog"] == 500,
                    "the backlog of 500", hub=hub)
        paused = hub.consumer(hub.stats(), "py")
        # Nothing taken from the queue while paused.
        assert paused["dequeued"] == before["dequeued"] == 100, paused
        assert len(records(out)) == 100
        assert paused["state"] == 3, paused
        status, table, err = fh.run(["stats", "-e", hub.control, "-f", "table"])
        assert status == 0 and re.search(r"^py +paused ", table, re.M), table
        metrics = hub.request("METRICS").decode()
        assert re.search(r'^fanhub_consumer_state\{consumer="py"\} 3$', metrics, re.M), metrics
        status_json = json.loads(hub.request("STATUS"))
        assert hub.consumer(status_json, "py")["status"]["state"] == "paused", status_json

        status, said, err = fh.run(["resume", "-e", hub.control, "py"])
        assert status == 0 and "resumed 'py'" in said, (status, said, err)
        fh.wait_for(lambda: len(records(out)) >= 600, "all 600 delivered", hub=hub)
        assert sorted(r["i"] for r in records(out)) == list(range(600))
        after = hub.consumer(hub.stats(), "py")
        assert after["state"] == 0 and after["backlog"] == 0, after
        status, _, err = fh.run(["pause", "-e", hub.control, "nope"])
        assert status == 1 and "no consumer 'nope'" in err, (status, err)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_restart_under_load_loads_new_code, test_pause_and_resume])
