"""The worker plugin with real python3 workers (the shipped runner):
ordering across worker processes, a poison message that segfaults its
worker, a worker that never answers, workers that cannot start (at `run`,
at `check`, and at run time: the consumer shows as down with the last
error), and what the runner makes of a consumer's exceptions."""
import json
import os
import re
import signal
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl

N_ORDERED = int(os.environ.get("FANHUB_WORKER_ORDERED", "100000"))


def test_ordering_across_four_workers():
    wl.ordering("python", N_ORDERED)


def test_a_poison_message_is_dead_lettered():
    wl.segfault("python")


def simple_hub(wd, pub, out, extra="", topics="[org.test]", options_extra="", top=""):
    config = ("%sbus:\n  connect: [%s]\nconsumers:\n"
              "  - name: py\n    plugin: python\n    topics: %s\n%s"
              "    options: {callable: \"wtest:record\", path: [%s]%s}\n"
              % (top, pub.endpoint, topics, extra, json.dumps(wl.WORKERS_DIR), options_extra))
    return fh.Hub(wd, config, env=wl.hub_env(out))


def test_a_worker_that_never_answers_is_killed_and_its_message_retried():
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    hub = simple_hub(wd, pub, out, extra="    consume_timeout: 2\n"
                     "    retry: {max_attempts: 3, initial_ms: 1, max_ms: 10}\n")
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("org.test", '{"i":0,"hang":true}')
        for i in range(1, 10):
            pub.send("org.test", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["completed"] == 10,
                    "every message completed", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        hub.wait_log("stopped answering (consume_timeout 2.0 s) and was killed")
        # One charge: the hub's expiry of the hung message's ticket,
        # consume_timeout after the worker started it. The nine queued
        # behind it in the process had not started, so they never
        # expire: the plugin's kill hands them to the new process
        # uncharged, and completes nothing late.
        assert c["failed"] == 0 and c["restarts"] == 1, c
        assert c["retried"] == 1 and c["tickets_expired"] == 1, c
        assert c["completions_late"] == 0, c
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    recs = wl.records(out)
    assert wl.check_each_once(recs, range(1, 11)) == 0
    assert {r["seq"]: r["attempt"] for r in recs} == {s: 2 if s == 1 else 1 for s in range(1, 11)}, recs
    wd.cleanup()


def test_a_slow_worker_is_not_taken_for_a_hung_one():
    """Sixteen messages of 0.25 s each, consume_timeout 2 s and the
    default prefetch (10): the process holds ten, the rest wait in the
    consumer's queue (backlog). A message's consume_timeout runs from
    when the worker starts it, so the tenth, 2.25 s after it was handed
    over, does not expire (it did: every ticket's clock ran from consume,
    and a deep queue repeated work), and the worker answering every
    0.25 s is not killed."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    n = 16
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(simple_hub(wd, pub, out, extra="    consume_timeout: 2\n"
                                     "    retry: {max_attempts: 1}\n"))
        pub.wait_subscribed(hub=hub)
        for i in range(n):
            pub.send("org.test", '{"i":%d,"sleep":0.25}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["enqueued"] == n, "all offered",
                    hub=hub)
        # The window: never more than prefetch handed over at once.
        assert hub.consumer(hub.stats(), "py")["in_flight"] <= 10
        fh.wait_for(lambda: len(wl.records(out)) == n, "every message done by the worker",
                    hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["restarts"] == 0 and "stopped answering" not in hub.log(), (c, hub.log())
        assert c["tickets_expired"] == 0 and c["completions_late"] == 0, c
        assert c["completed"] == n and c["failed"] == 0, c
        assert hub.stop() == 0, hub.log()
    assert wl.check_each_once(wl.records(out), range(1, n + 1)) == 0
    wd.cleanup()


def test_an_answer_is_not_held_back_by_the_next_message():
    """Message 1 is done at once; message 2, read in the same chunk, runs
    a second and kills its worker (0 holds them until they are read
    together). Message 1's answer went out while 2
    ran, so the crash takes only 2: 1 is done once, on its first attempt
    (the runner used to hold it until the chunk's end, and the crash
    charged and repeated it)."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(simple_hub(wd, pub, out, extra="    max_crashes: 1\n"
                                     "    retry: {max_attempts: 3, initial_ms: 1, max_ms: 10}\n"))
        pub.wait_subscribed(hub=hub)
        # 1 and 2 queue behind 0 while it sleeps: the worker reads them
        # together, in one chunk.
        pub.send("org.test", '{"i":0,"sleep":0.5}')
        pub.send("org.test", '{"i":1}')
        pub.send("org.test", '{"i":2,"sleep":1,"segv":true}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["failed"] == 1, "message 2 failed",
                    hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["completed"] == 2 and "SIGSEGV" in c["last_error"], c
        assert hub.stop() == 0, hub.log()
    recs = wl.records(out)
    assert [(r["body"]["i"], r["attempt"]) for r in recs] == [(0, 1), (1, 1)], recs
    wd.cleanup()


def test_a_consumer_that_cannot_start_yet_is_down_not_fatal():
    """A consumer whose own start-up raises (its class made: a database
    not up at boot) does not stop the hub, as an import error does: the
    other consumers run, it shows down (state 1) with the reason, and it
    starts once its start-up works, then takes its messages."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    gate = wd.file("database-up")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        config = ("bus:\n  connect: [%s]\nconsumers:\n"
                  "  - name: other\n    plugin: log\n    options: {path: %s}\n"
                  "  - name: py\n    plugin: python\n    topics: [org.test]\n"
                  "    options: {callable: \"wtest:Gated\", path: [%s], restart_delay: 50ms,"
                  " restart_delay_max: 200ms}\n"
                  % (pub.endpoint, json.dumps(wd.file("other.jsonl")),
                     json.dumps(wl.WORKERS_DIR)))
        env = dict(wl.hub_env(out), WORKER_TEST_GATE=gate)
        hub = cleanup.add(fh.Hub(wd, config, env=env))
        hub.wait_ready()
        c = hub.consumer(hub.stats(), "py")
        assert c["state"] == 1 and "the database is not up yet" in c["last_error"], c
        assert "not ready for now: next start in" in hub.log(), hub.log()
        pub.wait_subscribed(hub=hub)
        pub.send("org.test", '{"i":1}')
        fh.wait_for(lambda: fh.count_lines(wd.file("other.jsonl")) == 1, "the other consumer",
                    hub=hub)
        open(gate, "w").close()
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["state"] == 0, "py up", hub=hub)
        fh.wait_for(lambda: len(wl.records(out)) == 1, "py's message taken", hub=hub)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


def run_refused(wd, options, plugin="python", expect=""):
    os.environ.setdefault("WORKER_TEST_OUT", wd.file("records.jsonl"))  # wtest opens it
    pub = fh.Publisher()
    config = wd.write("bad.yaml", "bus:\n  connect: [%s]\nconsumers:\n"
                      "  - name: bad\n    plugin: %s\n    options: %s\n"
                      % (pub.endpoint, plugin, options))
    status, out, err = fh.run(["run", "-c", config], timeout=120)
    pub.close()
    assert status != 0 and expect in err, (status, err)
    return config, err


def test_a_worker_that_cannot_start_is_a_clear_error():
    wd = fh.Workdir()
    path = json.dumps(wl.WORKERS_DIR)
    # No interpreter: run and check both say so; check runs nothing.
    config, err = run_refused(wd, '{callable: "wtest:record", python: /nonexistent/python3}',
                              expect="options.python: the interpreter is missing: "
                              "/nonexistent/python3: No such file or directory")
    status, out, err = fh.run(["check", "-c", config])
    assert status != 0 and "the interpreter is missing" in err, err
    # An import error: run says which; check imports nothing, so it passes.
    config, err = run_refused(wd, '{callable: "no_such_module:Thing", path: [%s]}' % path,
                              expect="worker 0: refused to start: no_such_module:Thing: "
                              "ModuleNotFoundError: No module named 'no_such_module'")
    status, out, err = fh.run(["check", "-c", config])
    assert status == 0, err
    # A callable that is not there.
    run_refused(wd, '{callable: "wtest:nothing_here", path: [%s]}' % path,
                expect="AttributeError: module 'wtest' has no attribute 'nothing_here'")
    # A worker program that dies before READY: its exit status and last line.
    run_refused(wd, '{command: [/bin/sh, -c, "echo no database >&2; exit 3"]}', plugin="worker",
                expect="worker 0: exited with status 3 before READY: no database")
    # A program that is not there.
    run_refused(wd, '{command: [/nonexistent/worker]}', plugin="worker",
                expect="options.command: the program is missing: /nonexistent/worker")
    wd.cleanup()


def test_max_crashes_is_the_consumers_key():
    """One max_crashes: the consumer's key (as for a C plugin that crashes
    the hub) decides for the workers too; the plugin option is refused,
    at run and at check, with where it is and where it belongs."""
    wd = fh.Workdir()
    config, err = run_refused(wd, '{callable: "wtest:record", max_crashes: 2}',
                              expect="options.max_crashes: not an option of this plugin; "
                              "set max_crashes on the consumer")
    line = open(config).read().splitlines()[5]
    where = "bad.yaml:6:%d" % (line.index("2}") + 1)
    assert where in err, (where, err)
    status, out, err = fh.run(["check", "-c", config])
    assert status != 0 and where in err and "set max_crashes on the consumer" in err, err
    # max_crashes: 1 on the consumer: a message alone in its worker is a
    # dead letter at its first crash (the default, 3, would retry it), and
    # at its first hang (the hub's expiry charged that attempt; the next
    # one is failed without running it).
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    hub = simple_hub(wd, pub, out, top="state_dir: %s\n" % wd.file("state"),
                     extra="    max_crashes: 1\n    consume_timeout: 1\n"
                     "    retry: {max_attempts: 5, initial_ms: 1, max_ms: 10}\n")
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("org.test", '{"i":0,"segv":true}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["dead_lettered"] == 1,
                    "the message dead-lettered", hub=hub)
        pub.send("org.test", '{"i":1,"hang":true}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["dead_lettered"] == 2,
                    "the hung message dead-lettered", hub=hub)
        pub.send("org.test", '{"i":2}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["completed"] == 1,
                    "the next message completed", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["failed"] == 2 and c["retried"] == 1 and c["restarts"] == 2, c
        assert c["tickets_expired"] == 1 and c["completions_late"] == 0, c
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    status, text, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", "py"])
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert status == 0 and len(entries) == 2, text + err
    assert [e["reason"] for e in entries] == [
        "completed with FAIL: worker killed by signal 11 (SIGSEGV) 1 time on this message",
        "consume answered FAIL: worker stopped answering (consume_timeout 1.0 s) and was killed "
        "1 time on this message"], entries
    assert [r["body"]["i"] for r in wl.records(out)] == [2]
    wd.cleanup()


def test_a_worker_that_cannot_restart_shows_the_consumer_down():
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    module_dir = wd.file("mods")
    os.mkdir(module_dir)
    module = os.path.join(module_dir, "flaky_import.py")
    with open(module, "w") as f:
        f.write("from wtest import record\n")
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n"
              "  - name: py\n    plugin: python\n    topics: [org.test]\n"
              "    options: {callable: \"flaky_import:record\", path: [%s, %s],"
              " restart_delay: 50ms, restart_delay_max: 200ms}\n"
              % (pub.endpoint, json.dumps(module_dir), json.dumps(wl.WORKERS_DIR)))
    hub = fh.Hub(wd, config, env=wl.hub_env(out))
    try:
        pub.wait_subscribed(hub=hub)
        pid = wl.worker_pids(hub)[0]
        with open(module, "w") as f:
            f.write("raise ImportError('broken on purpose')\n")
        os.kill(pid, signal.SIGKILL)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["state"] == 1
                    and "broken on purpose" in hub.consumer(hub.stats(), "py")["last_error"],
                    "the consumer down with the import error", hub=hub)
        status, text, err = fh.run(["stats", "-c", hub.config, "--format", "prometheus"])
        assert 'fanhub_consumer_state{consumer="py"} 1' in text, text
        pub.send("org.test", '{"i":1}')  # waits for a worker
        with open(module, "w") as f:
            f.write("from wtest import record\n")
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["completed"] == 1,
                    "the message completed once a worker started again", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["state"] == 0 and c["restarts"] >= 2, c
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_what_the_runner_makes_of_exceptions():
    """Nack is a retry, Drop is done without processing (skipped), an
    exception is FAIL with its last line (a dead letter), HaltConsumer
    halts the consumer: shown with the reason, not restarted."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    hub = simple_hub(wd, pub, out, top="state_dir: %s\n" % wd.file("state"),
                     extra="    retry: {max_attempts: 3, initial_ms: 1, max_ms: 10}\n")
    try:
        pub.wait_subscribed(hub=hub)
        pub.send("org.test", '{"i":1,"nack":true}')
        pub.send("org.test", '{"i":2,"drop":true}')
        pub.send("org.test", '{"i":3,"fail":true}')
        pub.send("org.test", '{"i":4,"msg_id":"2026-abc"}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["completed"] == 3
                    and hub.consumer(hub.stats(), "py")["failed"] == 1,
                    "three completed, one failed", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["retried"] == 1 and c["skipped"] == 1 and c["dead_lettered"] == 1, c
        # The traceback is logged, each of its lines named.
        hub.wait_log("consumer 'py': worker 0: fanhub_worker: message None: Traceback")
        assert re.search(r"consumer 'py': worker 0: +raise ValueError\(", hub.log()), \
            hub.log()[-3000:]
        pub.send("org.test", '{"i":5,"halt":true}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["state"] == 2,
                    "the consumer halted", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["last_error"] == "halted by worker 0: asked to halt", c
        pub.send("org.test", '{"i":6}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["failed"] == 3,
                    "the halting message and the next one failed", hub=hub)
        c = hub.consumer(hub.stats(), "py")
        assert c["completed"] == 3 and c["in_flight"] == 0 and c["restarts"] == 0, c
        assert c["state"] == 2 and c["dead_lettered"] == 3, c
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    status, text, err = fh.run(["dead-letter", "list", "-c", hub.config, "--json", "py"])
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert [e["reason"] for e in entries] == [
        "completed with FAIL: ValueError: asked to fail: 3",
        "completed with FAIL: the consumer is halted by worker 0: asked to halt",
        "consume answered FAIL: the consumer is halted by worker 0: asked to halt"], entries
    recs = wl.records(out)
    assert sorted(r["body"]["i"] for r in recs) == [1, 4], recs
    assert [r["id"] for r in recs if r["body"]["i"] == 4] == ["2026-abc"], recs
    wd.cleanup()


def test_emit_wait_answers_when_the_worker_did():
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    hub = simple_hub(wd, pub, out, topics="[org.test, org.fail]")
    try:
        hub.wait_ready()
        status, text, err = fh.run(["emit", "--wait", "-e", hub.control, "org.test.x",
                                    '{"i": 1}'])
        assert status == 0 and text == "py: completed\n", (status, text, err)
        assert [r["body"]["i"] for r in wl.records(out)] == [1]
        status, text, err = fh.run(["emit", "--wait", "-e", hub.control, "org.fail.x",
                                    '{"i": 2, "fail": true}'])
        assert status == 1 and text == "py: failed\n", (status, text, err)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_a_reload_replaces_the_workers():
    """A reload that re-configures the consumer starts the new instance's
    workers (READY before the reload answers) and QUITs the old ones once
    they finished what they held: nothing is lost."""
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    hub = simple_hub(wd, pub, out)
    try:
        pub.wait_subscribed(hub=hub)
        old = wl.worker_pids(hub)[0]
        for i in range(100):
            pub.send("org.test", '{"i":%d}' % i)
        with open(hub.config) as f:
            text = f.read()
        with open(hub.config, "w") as f:
            f.write(text.replace("    topics: [org.test]\n", "    topics: [org.test]\n"
                                 "    workers: 2\n"))
        status, text, err = fh.run(["reload", "-e", hub.control])
        assert status == 0, (status, text, err)
        fh.wait_for(lambda: len(wl.worker_pids(hub)) == 2 and old not in
                    wl.worker_pids(hub).values(), "two new workers", hub=hub)
        fh.wait_for(lambda: not os.path.exists("/proc/%d" % old) or
                    open("/proc/%d/stat" % old).read().split()[2] == "Z",
                    "the old worker gone", hub=hub)
        for i in range(100, 200):
            pub.send("org.test", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["completed"] == 200,
                    "every message completed", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    assert sorted(r["body"]["i"] for r in wl.records(out)) == list(range(200))
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_ordering_across_four_workers, test_a_poison_message_is_dead_lettered,
             test_a_worker_that_never_answers_is_killed_and_its_message_retried,
             test_a_slow_worker_is_not_taken_for_a_hung_one,
             test_an_answer_is_not_held_back_by_the_next_message,
             test_a_consumer_that_cannot_start_yet_is_down_not_fatal,
             test_a_worker_that_cannot_start_is_a_clear_error,
             test_max_crashes_is_the_consumers_key,
             test_a_worker_that_cannot_restart_shows_the_consumer_down,
             test_what_the_runner_makes_of_exceptions,
             test_emit_wait_answers_when_the_worker_did, test_a_reload_replaces_the_workers])
