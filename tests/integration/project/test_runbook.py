"""docs/runbook.md's commands, run as written against a real hub (issue
38, item 5): every shell block of the runbook is marked with a line
`<!-- runbook: NAME -->` right before it (the test fails on one that is
not), and each of its lines is a `fanhub` command that must exit 0.

Only three things are substituted: `fanhub` at the start of a line is
this build's binary, the runbook's `/etc/fanhub/fanhub.yaml` is the
test hub's configuration, and its example entry ID `0006203a4c5b1d20`
is a real dead letter's. Where the runbook says to restart the hub, the
test restarts its hub. The scenario: a consumer `bad` that fails every
message (dead letters), a Python consumer `py` halted by its worker
(HaltConsumer), and one that is fine."""
import json
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

RUNBOOK = os.path.join(fh.SOURCE_DIR, "docs", "runbook.md")
RUNBOOK_CONFIG = "/etc/fanhub/fanhub.yaml"
RUNBOOK_ID = "0006203a4c5b1d20"


def blocks():
    """{NAME: [command lines]} of the runbook's marked shell blocks."""
    with open(RUNBOOK) as f:
        text = f.read()
    found = {}
    pattern = r"^( *)<!-- runbook: (\S+) -->\n\1```sh\n(.*?)^\1```$"
    for m in re.finditer(pattern, text, re.M | re.S):
        lines = [line.strip() for line in m.group(3).splitlines() if line.strip()]
        found[m.group(2)] = lines
    shell_blocks = len(re.findall(r"^ *```sh$", text, re.M))
    assert shell_blocks == len(found), (
        "%s has %d shell blocks, %d marked `<!-- runbook: NAME -->`: mark each, so that "
        "this test runs it" % (RUNBOOK, shell_blocks, len(found)))
    return found


def run_block(lines, config, entry_id=None):
    """Runs each line, substituted; returns the outputs in order."""
    outputs = []
    for line in lines:
        assert line.startswith("fanhub "), "not a fanhub command: %r" % line
        if entry_id:
            line = line.replace(RUNBOOK_ID, entry_id)
        assert RUNBOOK_ID not in line, line
        args = [a.replace(RUNBOOK_CONFIG, config) for a in shlex.split(line)[1:]]
        proc = subprocess.run([fh.BIN] + args, capture_output=True, timeout=fh.DEADLINE,
                              env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
        out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        fh.check_sanitizers(err, line)
        assert proc.returncode == 0, "the runbook's %r: status %d\n%s\n%s" % (
            line, proc.returncode, out, err)
        outputs.append(out)
    return outputs


def test_runbook_commands_as_written():
    runbook = blocks()
    assert set(runbook) == {"overview", "crash-find", "crash-replay", "halted", "consumer"}, \
        runbook
    wd = fh.Workdir()
    py = fh.PythonConsumer(wd, "py", topics="[org.test.py]")
    consumers = ("  - name: bad\n    plugin: %s/flaky.so\n    topics: [org.test.bad]\n"
                 "    options: {retries: 0, final: fail}\n%s"
                 "  - {name: fine, plugin: \"null\"}\n" % (fh.TEST_PLUGINS, py.yaml()))
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        text = fh.bus_hub_yaml({"connect": [pub.endpoint]}, consumers,
                               "state_dir: %s\n" % json.dumps(wd.file("state")))
        hub = cleanup.add(fh.Hub(wd, text, env=py.env()))
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        pub.send("org.test.bad", '{"i": 1}')
        pub.send("org.test.py", '{"i": 2, "halt": true}')
        fh.wait_for(lambda: hub.consumer(hub.stats(), "py")["state"] == 2, "py halted", hub=hub)
        pub.send("org.test.py", '{"i": 3}')
        fh.wait_for(lambda: [hub.consumer(hub.stats(), n)["dead_lettered"]
                             for n in ("bad", "py")] == [1, 2], "the dead letters", hub=hub)

        table, summary = run_block(runbook["overview"], hub.config)
        assert re.search(r"^py +halted ", table, re.M), table
        assert re.search(r"^bad +1 ", summary, re.M), summary
        assert re.search(r"^py +2 ", summary, re.M), summary

        status, out, err = fh.run(["dead-letter", "list", "--json", "-c", hub.config, "bad"])
        assert status == 0, err
        entry = json.loads(out.splitlines()[0])["id"]
        listed, shown = run_block(runbook["crash-find"], hub.config, entry)
        assert entry in listed and "consumer:       bad" in shown, (listed, shown)
        replayed, = run_block(runbook["crash-replay"], hub.config, entry)
        assert "1 replayed" in replayed, replayed

        shown, = run_block(runbook["halted"][:1], hub.config)
        assert "\nstate                halted\n" in shown, shown
        assert hub.stop() == 0, hub.log()  # "restart the hub"
        hub = cleanup.add(fh.Hub(wd, text, name="restarted", env=py.env()))
        hub.wait_ready()
        replayed, = run_block(runbook["halted"][1:], hub.config)
        assert "2 replayed" in replayed and "into the hub" in replayed, replayed
        paused, resumed, restarted = run_block(runbook["consumer"], hub.config)
        assert "paused 'py'" in paused and "resumed 'py'" in resumed, (paused, resumed)
        assert "restarted consumer 'py'" in restarted, restarted
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_runbook_commands_as_written])
