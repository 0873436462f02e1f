"""A Node.js worker (tests/integration/workers/jsonl-worker.js, written from
docs/worker-protocol.md) under the shipped unit's MemoryDenyWriteExecute=,
and the effect of the documented drop-in config/systemd/jit-workers.conf
(issue 38, item 9). No systemd is needed: mdwe_exec.py applies the
restriction as systemd does, with prctl(PR_SET_MDWE,
PR_MDWE_REFUSE_EXEC_GAIN) (Linux 6.3 and later) and with systemd's
seccomp filter (W+X mmap, PROT_EXEC mprotect, SHM_EXEC shmat: EPERM),
each inherited by the hub's children, on the hub started as the unit
would be configured (with each way the kernel has):

- the unit alone (MemoryDenyWriteExecute=yes): node aborts at its first
  compile (V8's mprotect refused, SIGTRAP) before READY, and the hub
  refuses the consumer at start (exit 2, which the unit does not restart);
- the unit with the drop-in (its MemoryDenyWriteExecute=no read from the
  file): no restriction, every message written by the JS worker;
- the unit alone with `node --jitless` (the drop-in's other advice):
  every message written under the restriction.

Needs node (Debian's nodejs, scripts/deps): without it the test says
SKIP, and under CI=true it fails. A kernel without PR_SET_MDWE is tested
with the seccomp filter alone."""
import ctypes
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

UNIT = os.path.join(fh.SOURCE_DIR, "config", "systemd", "fanhub.service")
DROPIN = os.path.join(fh.SOURCE_DIR, "config", "systemd", "jit-workers.conf")
WORKER = os.path.join(fh.SOURCE_DIR, "tests", "integration", "workers", "jsonl-worker.js")
MDWE_EXEC = os.path.join(fh.SOURCE_DIR, "tests", "integration", "mdwe_exec.py")
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
N = 20


def memory_deny_write_execute(*files):
    """The unit's MemoryDenyWriteExecute= with these files read in order,
    as systemd reads a unit and then its drop-ins: the last one wins."""
    value = None
    for path in files:
        with open(path) as f:
            for line in f:
                m = re.match(r"^MemoryDenyWriteExecute=(\S+)$", line.strip())
                if m:
                    value = m.group(1) in ("yes", "true", "1", "on")
    assert value is not None, "no MemoryDenyWriteExecute= in %s" % (files,)
    return value


def mdwe_prctl_available():
    """True when this kernel has PR_SET_MDWE (tried in a child)."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def js_hub(wd, cleanup, pub, name, restricted, node_args=()):
    """A hub with the JS worker consumer, restricted (by "prctl" or
    "seccomp") or not (None); and the file the worker writes."""
    node = fh.require_tool(shutil.which("node"), "node", "nodejs")
    out = wd.file(name + ".jsonl")
    consumer = ("  - name: js\n    plugin: worker\n"
                "    options: {command: %s, config: {path: %s}}\n"
                % (json.dumps([node] + list(node_args) + [WORKER]), json.dumps(out)))
    prefix = (sys.executable, MDWE_EXEC, restricted) if restricted else ()
    hub = cleanup.add(fh.Hub(wd, fh.bus_hub_yaml({"connect": [pub.endpoint]}, consumer),
                             name=name, prefix=prefix))
    return hub, out


def js_consumes(wd, name, restricted, node_args=()):
    """N messages through the JS worker; the lines it wrote."""
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub, out = js_hub(wd, cleanup, pub, name, restricted, node_args)
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        for i in range(N):
            pub.send("org.test.js", '{"i":%d}' % i)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "js")["completed"] == N,
                    "%d messages through the JS worker" % N, hub=hub)
        assert hub.stop() == 0, hub.log()
        return fh.read_jsonl(out)


def test_node_worker_under_the_units_sandbox():
    fh.require_tool(shutil.which("node"), "node", "nodejs")
    ways = (["prctl"] if mdwe_prctl_available() else []) + ["seccomp"]
    wd = fh.Workdir()
    assert memory_deny_write_execute(UNIT) is True
    for way in ways:
        # The unit alone: restricted. node aborts before READY, so the
        # hub refuses the consumer at start: exit 2, which the unit does
        # not restart (RestartPreventExitStatus=2): `systemctl status`
        # shows the hub's last line.
        with fh.Cleanup() as cleanup:
            pub = cleanup.add(fh.Publisher())
            hub, out = js_hub(wd, cleanup, pub, "unit-" + way, way)
            assert hub.proc.wait(fh.DEADLINE) == 2, (way, hub.log())
            log = hub.log()
        assert "consumer 'js': plugin 'worker' refused its options: worker 0: killed by " \
            "signal 5 (SIGTRAP) before READY" in log, (way, log)
        assert "Check failed: " in log, (way, log)  # V8: its code pages refused
        assert not os.path.exists(out) or fh.read_jsonl(out) == []

        # The unit alone, node --jitless (the drop-in's other way): it runs.
        lines = js_consumes(wd, "jitless-" + way, way, ["--jitless"])
        assert sorted(json.loads(line["body"])["i"] for line in lines) == list(range(N)), lines

    # The unit with the documented drop-in: not restricted; it runs.
    assert memory_deny_write_execute(UNIT, DROPIN) is False
    lines = js_consumes(wd, "dropin", None)
    assert sorted(json.loads(line["body"])["i"] for line in lines) == list(range(N)), lines
    assert all(line["topic"] == "org.test.js" for line in lines), lines
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_node_worker_under_the_units_sandbox])
