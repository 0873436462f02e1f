"""A Node.js worker (tests/integration/workers/jsonl-worker.js, written from
docs/worker-protocol.md) under the shipped unit's MemoryDenyWriteExecute=,
and the effect of the documented drop-in config/systemd/jit-workers.conf
(issue 38, item 9). No systemd is needed: the restriction is applied the
way the kernel offers it, prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)
(Linux 6.3 and later; inherited by the hub's children, as systemd's is),
on the hub started as the unit would be configured:

- the unit alone (MemoryDenyWriteExecute=yes): node aborts at its first
  compile (V8's mprotect refused, SIGTRAP) before READY, and the hub
  refuses the consumer at start (exit 2, which the unit does not restart);
- the unit with the drop-in (its MemoryDenyWriteExecute=no read from the
  file): no restriction, every message written by the JS worker;
- the unit alone with `node --jitless` (the drop-in's other advice):
  every message written under the restriction.

Needs node (Debian's nodejs, scripts/deps) and a kernel with PR_SET_MDWE:
without either it says SKIP, and under CI=true it fails."""
import ctypes
import json
import os
import re
import shutil
import sys

import fanhublib as fh

UNIT = os.path.join(fh.SOURCE_DIR, "config", "systemd", "fanhub.service")
DROPIN = os.path.join(fh.SOURCE_DIR, "config", "systemd", "jit-workers.conf")
WORKER = os.path.join(fh.SOURCE_DIR, "tests", "integration", "workers", "jsonl-worker.js")
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
N = 20

# Run as the hub's prefix: the restriction set, then the hub exec'd.
MDWE_EXEC = """import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.prctl(%d, %d, 0, 0, 0) != 0:
    sys.exit("prctl(PR_SET_MDWE): " + os.strerror(ctypes.get_errno()))
os.execv(sys.argv[1], sys.argv[1:])
""" % (PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN)


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


def mdwe_available():
    """None when this kernel has PR_SET_MDWE (tried in a child), else why not."""
    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) == 0 else 1)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return "this kernel (%s) has no prctl(PR_SET_MDWE) (Linux 6.3 and later)" % os.uname().release


def js_hub(wd, cleanup, pub, name, restricted, node_args=()):
    """A hub with the JS worker consumer, restricted or not; and the
    file the worker writes."""
    node = fh.require_tool(shutil.which("node"), "node", "nodejs")
    out = wd.file(name + ".jsonl")
    consumer = ("  - name: js\n    plugin: worker\n"
                "    options: {command: %s, config: {path: %s}}\n"
                % (json.dumps([node] + list(node_args) + [WORKER]), json.dumps(out)))
    prefix = (sys.executable, "-c", MDWE_EXEC) if restricted else ()
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
    why = mdwe_available()
    if why:
        raise fh.Skip(why)
    wd = fh.Workdir()
    # The unit alone: restricted. node aborts before READY, so the hub
    # refuses the consumer at start: exit 2, which the unit does not
    # restart (RestartPreventExitStatus=2): `systemctl status` says why.
    assert memory_deny_write_execute(UNIT) is True
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub, out = js_hub(wd, cleanup, pub, "unit", True)
        assert hub.proc.wait(fh.DEADLINE) == 2, hub.log()
        log = hub.log()
    assert "consumer 'js': plugin 'worker' refused its options: worker 0: killed by signal 5 " \
        "(SIGTRAP) before READY" in log, log
    assert "Check failed: 12 == (*__errno_location ())" in log, log  # V8's mprotect refused
    assert not os.path.exists(out) or fh.read_jsonl(out) == []

    # The unit with the documented drop-in: not restricted; it runs.
    restricted = memory_deny_write_execute(UNIT, DROPIN)
    assert restricted is False
    lines = js_consumes(wd, "dropin", restricted)
    assert sorted(json.loads(line["body"])["i"] for line in lines) == list(range(N)), lines
    assert all(line["topic"] == "org.test.js" for line in lines), lines

    # The unit alone, node --jitless (the drop-in's other way): it runs.
    lines = js_consumes(wd, "jitless", True, ["--jitless"])
    assert sorted(json.loads(line["body"])["i"] for line in lines) == list(range(N)), lines
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_node_worker_under_the_units_sandbox])
