"""The worker protocol's failure paths, with tiny workers written inline:
no READY within handshake_timeout, READY of another protocol version, a
frame over the limit, an answer to a ticket the worker does not hold, a
frame of no known type; a worker's LOG frames and stdout lines reach the
hub's log with the consumer's name."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

PY = "/usr/bin/python3"

# A worker that answers HELLO with READY, then runs BODY for each message
# frame (payload in `p`, the socket `s`), as the protocol document says.
WORKER = r'''
import json, os, struct, sys
fd = 3
def frame(t, data): return struct.pack(">I", len(data) + 1) + t + data
def read_frame():
    head = b""
    while len(head) < 4:
        chunk = os.read(fd, 4 - len(head))
        if not chunk: sys.exit(0)
        head += chunk
    (n,) = struct.unpack(">I", head)
    data = b""
    while len(data) < n:
        data += os.read(fd, n - len(data))
    return data[:1], data[1:]
t, hello = read_frame()
os.write(fd, frame(b"R", json.dumps({"protocol": %(protocol)d, "name": "t", "version": "0"}).encode()))
while True:
    t, p = read_frame()
    if t == b"Q": sys.exit(0)
    ticket = struct.unpack_from(">Q", p, 0)[0]
%(body)s
'''


def worker_options(body, protocol=1, extra=""):
    code = WORKER % {"protocol": protocol, "body": body}
    return "{command: [%s, -c, %s]%s}" % (PY, json.dumps(code), extra)


def run_hub(wd, options, messages=1, extra=""):
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: w\n    plugin: worker\n%s"
              "    options: %s\n" % (pub.endpoint, extra, options))
    hub = fh.Hub(wd, config)
    pub.wait_subscribed(hub=hub)
    for i in range(messages):
        pub.send("org.test", '{"i":%d}' % i)
    return hub, pub


def refused(wd, options, expect):
    pub = fh.Publisher()
    config = wd.write("w.yaml", "bus:\n  connect: [%s]\nconsumers:\n  - name: w\n"
                      "    plugin: worker\n    options: %s\n" % (pub.endpoint, options))
    status, out, err = fh.run(["run", "-c", config])
    pub.close()
    assert status != 0 and expect in err, err


def test_handshakes_that_fail():
    wd = fh.Workdir()
    refused(wd, "{command: [/bin/sleep, '60'], handshake_timeout: 300ms}",
            "worker 0: no READY within handshake_timeout (0.3 s)")
    refused(wd, worker_options("    pass", protocol=7),
            "worker 0: READY speaks protocol 7; the hub speaks 1")
    # It exits, but what it started keeps the socket open: seen by its exit.
    refused(wd, "{command: [/bin/sh, -c, 'sleep 60 & exit 5']}",
            "worker 0: exited with status 5 before READY")
    wd.cleanup()


def killed_for(body, expect):
    wd = fh.Workdir()
    hub, pub = run_hub(wd, worker_options(body),
                       extra="    retry: {max_attempts: 2, initial_ms: 1, max_ms: 2}\n")
    try:
        hub.wait_log(expect)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "w")["restarts"] >= 1, "a restart",
                    hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_protocol_errors_kill_the_worker():
    killed_for("    os.write(fd, struct.pack('>I', (1 << 20) + 1))",
               "worker 0: protocol error: a frame of 1048577 bytes (the limit is 1048576); killed")
    killed_for("    os.write(fd, frame(b'A', struct.pack('>QBH', ticket + 1, 0, 0)))",
               "worker 0: protocol error: a malformed ANSWER, or one to a ticket it does not "
               "hold; killed")
    killed_for("    os.write(fd, frame(b'A', struct.pack('>QBH', ticket, 9, 0)))",
               "worker 0: protocol error: a malformed ANSWER")
    killed_for("    os.write(fd, frame(b'Z', b''))",
               "worker 0: protocol error: a frame of type 0x5a where it has no place; killed")
    killed_for("    os.write(fd, struct.pack('>I', 0))",
               "worker 0: protocol error: a frame of length 0 (every frame has a type byte)")


def test_logs_and_output_reach_the_hub_log():
    wd = fh.Workdir()
    body = ("    os.write(fd, frame(b'L', bytes([4]) + b'disk almost full'))\n"
            "    print('plain stdout', flush=True)\n"
            "    sys.stderr.write('plain stderr\\n'); sys.stderr.flush()\n"
            "    os.write(fd, frame(b'A', struct.pack('>QBH', ticket, 0, 0)))")
    hub, pub = run_hub(wd, worker_options(body))
    try:
        fh.wait_for(lambda: hub.consumer(hub.stats(), "w")["completed"] == 1, "done", hub=hub)
        hub.wait_log("fanhub: warning: consumer 'w': worker 0: disk almost full")
        hub.wait_log("fanhub: info: consumer 'w': worker 0: plain stdout")
        hub.wait_log("fanhub: warning: consumer 'w': worker 0: plain stderr")
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_a_worker_that_skips_a_message_is_killed():
    """Answers may come in any order: a worker that never answers one
    message but goes on answering the others (so it is never silent) is
    killed consume_timeout after that message was sent to it."""
    wd = fh.Workdir()
    body = ("    if not globals().get('skipped'):\n"
            "        skipped = True\n"
            "        continue\n"
            "    os.write(fd, frame(b'A', struct.pack('>QBH', ticket, 0, 0)))")
    hub, pub = run_hub(wd, worker_options(body), messages=1,
                       extra="    consume_timeout: 2\n    retry: {max_attempts: 1}\n")
    try:
        # The others keep coming, and are answered at once, until the kill.
        for i in range(1, 300):
            if "stopped answering (consume_timeout 2.0 s) and was killed" in hub.log():
                break
            pub.send("org.test", '{"i":%d}' % i)
            time.sleep(0.1)
        hub.wait_log("stopped answering (consume_timeout 2.0 s) and was killed", deadline=1)
        assert hub.stop() == 0, hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_a_worker_that_ignores_quit_is_killed_at_shutdown_timeout():
    wd = fh.Workdir()
    # Answers, then takes QUIT for a message it never answers and sleeps.
    body = ("    os.write(fd, frame(b'A', struct.pack('>QBH', ticket, 0, 0)))")
    code = WORKER % {"protocol": 1, "body": body}
    code = code.replace('if t == b"Q": sys.exit(0)', 'if t == b"Q": __import__("time").sleep(60)')
    options = "{command: [%s, -c, %s], shutdown_timeout: 300ms}" % (PY, json.dumps(code))
    hub, pub = run_hub(wd, options)
    try:
        fh.wait_for(lambda: hub.consumer(hub.stats(), "w")["completed"] == 1, "done", hub=hub)
        assert hub.stop() == 0, hub.log()
        assert "fanhub: warning: consumer 'w': worker 0 (pid " in hub.log()
        assert ") still running at shutdown_timeout: killed after QUIT" in hub.log(), hub.log()
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def test_a_stop_during_the_handshake_ends_the_start():
    # Issue 39 item 4: SIGTERM while a worker has not answered HELLO was
    # held until handshake_timeout (30 s); now the start ends at once.
    wd = fh.Workdir()
    marker = wd.file("started")
    code = ("import os, time\nopen(%r + '.tmp', 'w').write(str(os.getpid()))\n"
            "os.rename(%r + '.tmp', %r)\ntime.sleep(120)\n" % (marker, marker, marker))
    options = "{command: [%s, -c, %s], handshake_timeout: 30s}" % (PY, json.dumps(code))
    pub = fh.Publisher()
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: w\n    plugin: worker\n"
              "    options: %s\n" % (pub.endpoint, options))
    hub = fh.Hub(wd, config)
    try:
        fh.wait_for(lambda: os.path.exists(marker), "the worker started", hub=hub)
        pid = int(open(marker).read())
        begun = time.monotonic()
        # Far below handshake_timeout, generous for ASan on a loaded machine.
        status = hub.stop(deadline=15)
        took = time.monotonic() - begun
        log = hub.log()
        assert status == 3, (status, log)
        assert took < 15, took
        assert "Terminated: stopping once the start under way returns" in log, log
        assert "the hub is stopping: gave up waiting for READY" in log, log
        assert "Terminated: the start was stopped: exiting without running" in log, log
        assert "no READY" not in log, log
        try:
            os.kill(pid, 0)
            raise AssertionError("worker %d outlived the hub" % pid)
        except ProcessLookupError:
            pass
    finally:
        hub.kill()
        pub.close()
    wd.cleanup()


def alive(pid):
    """Running (a zombie waits for its parent only: not running)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def test_what_a_worker_started_goes_with_it():
    # Issue 39 item 5: a setsid child outlived its worker and the hub, and
    # the log said "worker 0 (pid 0) exited".
    wd = fh.Workdir()
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "workers",
                          "setsid_worker.py")
    state = wd.file("state")
    os.mkdir(state)
    options = "{command: [%s, %s, %s], restart_delay: 10ms}" % (PY, script, state)

    def grandchildren():
        return {int(n.split("-")[1]): int(open(os.path.join(state, n)).read())
                for n in os.listdir(state) if n.startswith("grandchild-") and "." not in n}

    hub, pub = run_hub(wd, options, messages=0)
    try:
        fh.wait_for(lambda: len(grandchildren()) == 1, "the first grandchild", hub=hub)
        (first_worker, first_grandchild), = grandchildren().items()
        # The first message makes the worker exit 3: it is restarted, and
        # its setsid child goes with it.
        pub.send("org.test", '{"i":0}')
        hub.wait_log("worker 0 (pid %d) exited with status 3" % first_worker)
        assert "(pid 0)" not in hub.log(), hub.log()
        fh.wait_for(lambda: not alive(first_grandchild), "the first grandchild gone", hub=hub)
        fh.wait_for(lambda: len(grandchildren()) == 2, "the second grandchild", hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "w")["completed"] == 1, "done", hub=hub)
        second = [g for w, g in grandchildren().items() if w != first_worker][0]
        assert alive(second)
        assert hub.stop() == 0, hub.log()
        assert not alive(second), "grandchild %d outlived the hub" % second
    finally:
        hub.kill()
        pub.close()
        for pid in grandchildren().values():
            if alive(pid):
                os.kill(pid, 9)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_handshakes_that_fail, test_protocol_errors_kill_the_worker,
             test_logs_and_output_reach_the_hub_log,
             test_a_worker_that_ignores_quit_is_killed_at_shutdown_timeout,
             test_a_worker_that_skips_a_message_is_killed,
             test_a_stop_during_the_handshake_ends_the_start,
             test_what_a_worker_started_goes_with_it])
