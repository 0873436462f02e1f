"""`fanhub stats --watch` on a terminal (a tmux pane) and on a pipe.

On a terminal the screen holds one table that changes in place: the
backlog of a held consumer grows as messages arrive, and every capture of
the pane shows the hub line, one header and the consumer lines, nothing
else, with nothing scrolled into the pane's history (the alternate
screen). When the hub goes away, the error takes the table's place. Ctrl-C
ends it with status 0 and the main screen back. On a pipe
the tables are appended, without escape sequences. Every wait is for
what the pane or the pipe shows, with a deadline."""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

WIDTH, HEIGHT = 200, 30


def config(pub, wd):
    return ("bus:\n  connect: [%s]\nconsumers:\n"
            "  - name: held\n    plugin: %s/sleep.so\n"
            "    options: {release_file: %s}\n"
            "  - name: fast\n    plugin: \"null\"\n"
            % (pub.endpoint, fh.TEST_PLUGINS, json.dumps(wd.file("release"))))


class Tmux:
    """A tmux server of our own (its own socket name), one session."""

    def __init__(self, wd, command):
        self.tmux = fh.require_tool(shutil.which("tmux"), "tmux", "tmux")
        self.socket = "fanhub-test-%d" % os.getpid()
        self.run("-f", "/dev/null", "new-session", "-d", "-s", "w", "-x", str(WIDTH),
                 "-y", str(HEIGHT), command)
        self.run("set-option", "-t", "w", "remain-on-exit", "on")

    def run(self, *args):
        proc = subprocess.run([self.tmux, "-L", self.socket] + list(args),
                              capture_output=True, timeout=60)
        assert proc.returncode == 0, (args, proc.stderr)
        return proc.stdout.decode(errors="replace")

    def screen(self):
        return self.run("capture-pane", "-p", "-t", "w").split("\n")

    def show(self, fmt):
        return self.run("display-message", "-p", "-t", "w", fmt).strip()

    def kill(self):
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True,
                       timeout=60)


def held_backlog(lines):
    """The BACKLOG column of the consumer "held", or None."""
    for line in lines:
        if line.startswith("held "):
            return int(line.split()[2])  # CONSUMER STATE BACKLOG
    return None


def check_one_table(tmux):
    """The pane holds exactly one table: hub line, header, two consumers."""
    lines = [line.rstrip() for line in tmux.screen()]
    shown = [line for line in lines if line]
    assert len(shown) == 4, lines
    assert shown[0].startswith("hub - up "), lines
    assert shown[1].startswith("CONSUMER ") and "RATE" in shown[1] and "ETA" in shown[1], lines
    assert lines[:4] == shown, "the table is not at the top: %r" % lines
    assert tmux.show("#{history_size}") == "0", "lines scrolled away: %r" % lines
    assert tmux.show("#{alternate_on}") == "1"
    return shown


def test_watch_redraws_in_place_on_a_terminal():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, wd))
    tmux = None
    try:
        hub.wait_ready()
        pub.wait_subscribed(hub=hub)
        # The shell ignores Ctrl-C (the program sets its own handler) and
        # writes the program's exit status: tmux 3.3 does not always reap
        # a pane's process itself.
        status_file = wd.file("status")
        tmux = Tmux(wd, "trap '' INT; %s stats --watch -e %s 2>&1; echo $? > %s"
                    % (fh.BIN, hub.control, status_file))
        fh.wait_for(lambda: held_backlog(tmux.screen()) == 0, "the first table", hub=hub)
        first = check_one_table(tmux)
        sent = 0
        for batch in (5, 7):
            for _ in range(batch):
                pub.send("org.test", "%d" % sent)
                sent += 1
            # One message is inside consume: the backlog is the rest.
            fh.wait_for(lambda: held_backlog(tmux.screen()) == sent - 1,
                        "the table to show backlog %d" % (sent - 1), hub=hub)
            check_one_table(tmux)
        assert check_one_table(tmux) != first
        # The hub goes away: the screen says so in place of the table.
        open(wd.file("release"), "w").close()
        assert hub.stop() == 0, hub.log()
        fh.wait_for(lambda: any(line.startswith("fanhub stats: ") for line in tmux.screen()),
                    "the error on the screen")
        lines = [line for line in tmux.screen() if line.strip()]
        assert len(lines) == 1 and "is the hub running" in lines[0], lines
        assert tmux.show("#{history_size}") == "0", tmux.screen()
        tmux.run("send-keys", "-t", "w", "C-c")
        fh.wait_for(lambda: os.path.exists(status_file) and open(status_file).read(),
                    "stats --watch to exit")
        with open(status_file) as f:
            assert f.read() == "0\n", tmux.screen()
        assert tmux.show("#{alternate_on}") == "0", "the main screen is not back"
        fh.check_sanitizers("\n".join(tmux.screen()), "fanhub stats --watch")
        wd.cleanup()
    finally:
        if tmux:
            tmux.kill()
        hub.kill()
        pub.close()


def test_watch_appends_on_a_pipe():
    wd = fh.Workdir()
    pub = fh.Publisher()
    hub = fh.Hub(wd, config(pub, wd))
    proc = None
    try:
        hub.wait_ready()
        proc = subprocess.Popen([fh.BIN, "stats", "--watch", "-e", hub.control],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = b""
        end = time.monotonic() + fh.DEADLINE
        while out.count(b"\nCONSUMER ") + out.startswith(b"CONSUMER ") < 3:
            assert time.monotonic() < end, "no three tables: %r" % out
            if select.select([proc.stdout], [], [], 0.1)[0]:
                chunk = os.read(proc.stdout.fileno(), 65536)
                assert chunk, "stdout closed: %r" % out
                out += chunk
        proc.send_signal(signal.SIGINT)
        rest, err = proc.communicate(timeout=fh.DEADLINE)
        assert proc.returncode == 0, err
        text = (out + rest).decode()
        assert "\x1b" not in text, repr(text)
        tables = [t for t in text.split("\n\n") if t.strip()]
        assert len(tables) >= 3, text
        for table in tables:
            lines = table.strip("\n").split("\n")
            assert lines[0].startswith("hub - up ") and lines[1].startswith("CONSUMER "), table
            assert [line.split()[0] for line in lines[2:]] == ["held", "fast"], table
        fh.check_sanitizers(err.decode(errors="replace"), "fanhub stats --watch")
        assert hub.stop() == 0, hub.log()
        wd.cleanup()
    finally:
        if proc and proc.poll() is None:
            proc.kill()
            proc.wait()
        hub.kill()
        pub.close()


if __name__ == "__main__":
    fh.main([test_watch_redraws_in_place_on_a_terminal,
             test_watch_appends_on_a_pipe])
