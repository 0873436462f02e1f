"""README's "Monitor" section, run as written against a real hub (issue
38): every line of its shell blocks, and the inline `fanhub ...`
commands of the section, must exit 0 and say what the README says.

Substituted: `sudo runuser -u fanhub --` goes (the test is the hub's
user), `fanhub` at the start is this build's binary, and the README's
`/etc/fanhub/fanhub.yaml` and `/etc/fanhub/NAME.yaml` are the test
hub's configuration. The hub has the README's consumer `archive`."""
import os
import re
import shlex
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

README = os.path.join(fh.SOURCE_DIR, "README.md")
CONFIGS = ("/etc/fanhub/fanhub.yaml", "/etc/fanhub/NAME.yaml")


def monitor_commands():
    """The command lines of README's Monitor section: its shell blocks'
    lines, then its inline `fanhub ...` commands."""
    with open(README) as f:
        text = f.read()
    section = re.search(r"^## Monitor\n(.*?)^## ", text, re.M | re.S).group(1)
    lines = []
    for block in re.findall(r"^```sh\n(.*?)^```$", section, re.M | re.S):
        lines += [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    inline = [c for c in re.findall(r"`(fanhub [^`]+)`", section.replace("\n", " "))
              if " -c " in c or " --format " in c]
    return lines + inline


def run(line, config):
    line = line.replace("sudo runuser -u fanhub -- ", "")
    assert line.startswith("fanhub "), "not a fanhub command: %r" % line
    args = shlex.split(line)[1:]
    args = [config if a in CONFIGS else a for a in args]
    if "-c" not in args and "-e" not in args:
        args += ["-c", config]
    proc = subprocess.run([fh.BIN] + args, capture_output=True, timeout=fh.DEADLINE)
    out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
    fh.check_sanitizers(err, line)
    assert proc.returncode == 0, "README's %r: status %d\n%s\n%s" % (
        line, proc.returncode, out, err)
    return args[0], out


def test_monitor_commands_run_as_written():
    wd = fh.Workdir()
    commands = monitor_commands()
    verbs = [shlex.split(c.replace("sudo runuser -u fanhub -- ", ""))[1] for c in commands]
    for verb in ("stats", "restart", "pause", "resume", "dead-letter"):
        assert verb in verbs, (verb, commands)
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, "state_dir: %s\nbus:\n  connect: [%s]\nconsumers:\n"
                                 "  - name: archive\n    plugin: log\n    topics: [org.]\n"
                                 "    options: {path: %s}\n"
                                 % (wd.file("state"), pub.endpoint, wd.file("archive.jsonl"))))
        pub.wait_subscribed(hub=hub)
        hub.wait_ready()
        for line in commands:
            verb, out = run(line, hub.config)
            if verb == "pause":
                fh.wait_for(lambda: hub.consumer(hub.stats(), "archive")["state"] == 3,
                            "archive paused", hub=hub)
            elif verb == "resume":
                fh.wait_for(lambda: hub.consumer(hub.stats(), "archive")["state"] == 0,
                            "archive up again", hub=hub)
            elif verb == "stats" and "--format" in line and "table" in line:
                assert re.search(r"^archive +up ", out, re.M), out
            elif verb == "stats" and "--consumer" in line:
                assert "archive" in out and "state" in out, out
        pub.send("org.after", "{}")
        fh.wait_for(lambda: fh.count_lines(wd.file("archive.jsonl")) >= 1,
                    "archive consumes after the restart and the pause", hub=hub)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_monitor_commands_run_as_written])
