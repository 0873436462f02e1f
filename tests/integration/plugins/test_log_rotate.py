"""The log plugin's file rotated while messages flow, as logrotate does it:
renamed, then (create mode) made again, then the hub told, by `fanhub
reload` the first time and by SIGHUP the second (renamed only: the plugin
makes the file). Every message is in one of the files once, in order;
the renamed files hold only messages published before the reload
answered, so nothing reaches them after it."""
import grp
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

N = 6000


def stream(pub, sent, gates):
    """Publishes N messages, paced; at each third it waits for the next
    rotation to be done, so that each lands mid-stream however slow the
    machine. sent[0] counts what has been handed to send (or is about to be)."""
    for i in range(N):
        if i and i % (N // 3) == 0:
            gates[i // (N // 3) - 1].wait(120)
        sent[0] = i + 1  # before the send: a message sent before a reading is below it
        pub.send("org.rotate", '{"i":%d}' % i)
        if i % 100 == 99:
            time.sleep(0.005)


def numbers(path):
    return [json.loads(line["body"])["i"] for line in fh.read_jsonl(path)]


def rotate_while_flowing(workers):
    """With workers > 1 lines are written by several threads, in no set
    order: the files then hold every message once, and the renamed ones
    only messages published before the reload answered."""
    wd = fh.Workdir()
    pub = fh.Publisher()
    log = wd.file("out.log")
    config = ("bus:\n  connect: [%s]\nconsumers:\n  - name: archive\n    plugin: log\n"
              "    workers: %d\n    options: {path: %s, flush_ms: 20}\n"
              % (pub.endpoint, workers, json.dumps(log)))
    hub = fh.Hub(wd, config)
    sent = [0]
    gates = [threading.Event(), threading.Event()]
    sender = threading.Thread(target=stream, args=(pub, sent, gates))
    try:
        pub.wait_subscribed(hub=hub)
        sender.start()
        fh.wait_for(lambda: fh.count_lines(log) > N // 6, "a sixth written", hub=hub)
        # create mode: rename, make the file again, then reload.
        os.rename(log, log + ".1")
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o640))
        status, out, err = fh.run(["reload", "-e", hub.control])
        first = sent[0]  # every message from here on was published after the answer
        gates[0].set()
        assert status == 0, (status, out, err)

        fh.wait_for(lambda: fh.count_lines(log) > N // 6, "lines in the new file", hub=hub)
        # Renamed only, and SIGHUP: the plugin makes the file.
        os.rename(log, log + ".2")
        hub.send_signal(signal.SIGHUP)
        fh.wait_for(lambda: hub.log().count("reloaded ") == 2, "the SIGHUP reload", hub=hub)
        second = sent[0]
        gates[1].set()
        sender.join()
        fh.wait_for(lambda: sum(fh.count_lines(p) for p in (log + ".1", log + ".2", log)) == N,
                    "every message in the files", hub=hub)
        assert hub.stop() == 0, hub.log()
    finally:
        for gate in gates:
            gate.set()
        if sender.is_alive():
            sender.join()
        hub.kill()
        pub.close()
    one, two, now = numbers(log + ".1"), numbers(log + ".2"), numbers(log)
    if workers == 1:
        assert one + two + now == list(range(N)), "lost, repeated or out of order"
    assert sorted(one + two + now) == list(range(N)), "lost or repeated"
    assert one and two and now, (len(one), len(two), len(now))
    assert max(one) < first, "message %d reached the renamed file after the reload (at %d)" \
        % (max(one), first)
    assert max(two) < second, "message %d reached the renamed file after SIGHUP (at %d)" \
        % (max(two), second)
    assert oct(os.stat(log).st_mode & 0o777) == oct(0o644), "made by the plugin, 0644"
    assert "cannot reopen" not in hub.log(), hub.log()
    wd.cleanup()


def test_rotate_while_flowing():
    rotate_while_flowing(1)


def test_rotate_while_flowing_two_workers():
    rotate_while_flowing(2)


def test_rotate_while_the_file_is_being_edited():
    """`fanhub reload -c FILE` (systemd's ExecReload, logrotate's reload)
    with a FILE that does not load, an edit half done: the client still
    finds the hub by the file's control key and asks it, so the hub
    refuses the file, keeps its configuration, and opens its log files
    again; `fanhub stats -c FILE` still answers. A file whose YAML does
    not parse names no endpoint: refused before asking."""
    wd = fh.Workdir()
    log = wd.file("out.log")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n  - name: archive\n"
                                 "    plugin: log\n    options: {path: %s, flush_ms: 20}\n"
                                 % (pub.endpoint, json.dumps(log))))
        pub.wait_subscribed(hub=hub)
        pub.send("org.rotate", '{"i":0}')
        fh.wait_for(lambda: fh.count_lines(log) == 1, "the first line", hub=hub)
        os.rename(log, log + ".1")
        with open(hub.config, "a") as f:
            f.write("bogus_key: 1\n")
        status, out, err = fh.run(["reload", "-c", hub.config])
        assert status == 1 and out == "", (status, out, err)
        assert "bogus_key: unknown key" in err and "all the same" in err, err
        assert "reload refused" in err, err  # the hub's answer
        status, out, err = fh.run(["stats", "-c", hub.config])
        assert status == 0 and json.loads(out)["hub"]["received"] == 1, (status, out, err)
        # Read once: a pipe (or a FIFO) serves as well.
        with open(hub.config, "rb") as f:
            status, out, err = fh.run(["stats", "-c", "/dev/stdin"], stdin=f.read())
        assert status == 0 and json.loads(out)["hub"]["received"] == 1, (status, out, err)
        # emit sends no message on a file that does not load.
        status, out, err = fh.run(["emit", "-c", hub.config, "org.rotate", '{"i":9}'])
        assert status == 2 and "all the same" not in err, (status, out, err)
        pub.send("org.rotate", '{"i":1}')
        fh.wait_for(lambda: fh.count_lines(log) == 1, "the line in the file opened again",
                    hub=hub)
        assert fh.count_lines(log + ".1") == 1
        with open(hub.config, "a") as f:
            f.write("consumers: [\n")
        status, out, err = fh.run(["reload", "-c", hub.config])
        assert status == 2 and "all the same" not in err, (status, out, err)
        assert hub.stop() == 0, hub.log()
    wd.cleanup()


SHIPPED_LOGROTATE = os.path.join(fh.SOURCE_DIR, "config", "logrotate", "fanhub")


def test_shipped_logrotate_reaches_a_hub_started_by_hand():
    """The shipped logrotate.d/fanhub, run by logrotate itself, with no
    systemd: its postrotate finds the hub by the file it has open and
    sends it SIGHUP, so no line reaches the rotated file after it. The
    file is taken as shipped but for its directory (/var/log/fanhub: this
    test's) and its user and group (fanhub: this test's). A `fanhub tail`
    whose output goes to the same directory is not signalled."""
    logrotate = fh.require_tool(shutil.which("logrotate"), "logrotate", "logrotate")
    wd = fh.Workdir()
    logdir = wd.file("log")
    os.mkdir(logdir, 0o750)
    user, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
    with open(SHIPPED_LOGROTATE) as f:
        shipped = f.read()
    assert shipped.count("/var/log/fanhub/*") == 3 and "su fanhub fanhub" in shipped, shipped
    conf = wd.write("logrotate.conf", shipped.replace("/var/log/fanhub", logdir).replace(
        "fanhub fanhub", "%s %s" % (user, group)))
    log = os.path.join(logdir, "bus.jsonl")
    with fh.Cleanup() as cleanup:
        pub = cleanup.add(fh.Publisher())
        hub = cleanup.add(fh.Hub(wd, "bus:\n  connect: [%s]\nconsumers:\n  - name: archive\n"
                                 "    plugin: log\n    options: {path: %s, flush_ms: 0}\n"
                                 % (pub.endpoint, json.dumps(log))))
        pub.wait_subscribed(hub=hub)
        tail_out = open(os.path.join(logdir, "tail.log"), "wb")
        tail = cleanup.add(subprocess.Popen([fh.BIN, "tail", "--connect", pub.endpoint],
                                            stdout=tail_out, stderr=subprocess.DEVNULL))
        for i in range(50):
            pub.send("org.rotate", '{"i":%d}' % i)
        fh.wait_for(lambda: fh.count_lines(log) == 50, "50 lines", hub=hub)
        proc = subprocess.run([logrotate, "-f", "-s", wd.file("logrotate.state"), conf],
                              capture_output=True, timeout=fh.DEADLINE)
        assert proc.returncode == 0, proc.stderr.decode()
        fh.wait_for(lambda: "reloaded " in hub.log(), "the reload postrotate asked", hub=hub)
        for i in range(50, 100):
            pub.send("org.rotate", '{"i":%d}' % i)
        fh.wait_for(lambda: fh.count_lines(log) == 50, "50 lines in the new file", hub=hub)
        assert numbers(log + ".1") == list(range(50)), "a line reached the rotated file"
        assert numbers(log) == list(range(50, 100))
        assert tail.poll() is None, "postrotate signalled fanhub tail"
        assert hub.stop() == 0, hub.log()
        tail_out.close()
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_rotate_while_flowing, test_rotate_while_flowing_two_workers,
             test_rotate_while_the_file_is_being_edited,
             test_shipped_logrotate_reaches_a_hub_started_by_hand])
