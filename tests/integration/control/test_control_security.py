"""The control socket against another user of the machine (`runuser -u
nobody`): a squatter on the old default path does not stop the hub nor
receive anything from the clients; the socket is never reachable by
another user while it starts, whatever the umask.

Runs as root (runuser needs it); as another user every test fails with
that reason rather than passing unchecked."""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

import zmq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh

PYTHON = "/usr/bin/python3"  # has python3-zmq
NOBODY = pwd.getpwnam("nobody")

CONSUMERS = """consumers:
  - name: quiet
    plugin: "null"
"""

# A squatter: binds a ROUTER on argv[1] as `nobody`, answers every request
# as a hub would ("PONG", a fake STATS, "OK ..."), records what it got, and
# on "END" writes the record to argv[2] and exits. (It also exits when its
# directory is gone: killing runuser does not kill its child.)
SQUATTER = textwrap.dedent("""\
    import json, os, sys, zmq
    sock = zmq.Context.instance().socket(zmq.ROUTER)
    sock.bind("ipc://" + sys.argv[1])
    open(sys.argv[1] + ".ready", "w").close()
    got = []
    while os.path.exists(os.path.dirname(sys.argv[2])):
        if not sock.poll(100):
            continue
        frames = sock.recv_multipart()
        body = frames[frames.index(b"") + 1:] if b"" in frames else frames[1:]
        if body == [b"END"]:
            break
        got.append([f.decode("latin-1") for f in body])
        envelope = frames[:len(frames) - len(body)]
        answer = {b"PING": b"PONG", b"STATS": b'{"squatter": 1}'}.get(body[0], b"OK squatted")
        sock.send_multipart(envelope + [answer])
    with open(sys.argv[2], "w") as f:
        json.dump(got, f)
""")

# Tries to connect to argv[1] as `nobody` until argv[2] exists; prints
# "connected refused absent" counts.
PROBER = textwrap.dedent("""\
    import errno, os, socket, sys
    counts = {"connected": 0, "refused": 0, "absent": 0}
    while not os.path.exists(sys.argv[2]) and os.path.exists(os.path.dirname(sys.argv[2])):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sys.argv[1])
            counts["connected"] += 1
        except PermissionError:
            counts["refused"] += 1
        except OSError:
            counts["absent"] += 1
        finally:
            s.close()
    print(counts["connected"], counts["refused"], counts["absent"])
""")


def require_root():
    assert os.geteuid() == 0, "these tests play another user with runuser: run them as root"


def shared_dir(mode, owner=NOBODY.pw_uid):
    """A directory `nobody` can use, outside the test's private workdir."""
    path = tempfile.mkdtemp(prefix="fanhub-shared-")
    os.chown(path, owner, owner)
    os.chmod(path, mode)
    return path


def write_script(directory, name, text):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)
    return path


def as_nobody(args, **kwargs):
    return subprocess.Popen(["runuser", "-u", "nobody", "--"] + args, **kwargs)


def clean_env():
    env = dict(os.environ)
    env.pop("RUNTIME_DIRECTORY", None)
    env.pop("XDG_RUNTIME_DIR", None)
    return env


def test_squatter_on_the_old_default_path():
    require_root()
    wd = fh.Workdir()
    shared = shared_dir(0o755)
    name = "sq%d" % os.getpid()
    old_default = "/tmp/fanhub-%s.sock" % name
    squatter = None
    hub = None
    try:
        script = write_script(shared, "squatter.py", SQUATTER)
        record = os.path.join(shared, "record.json")
        # The squatter takes the path main used as the default, and a path
        # that root's clients are pointed at.
        squat_paths = [old_default, os.path.join(shared, "hub.sock")]
        squatters = [as_nobody([PYTHON, script, p, record + str(i)])
                     for i, p in enumerate(squat_paths)]
        for p in squat_paths:
            fh.wait_for(lambda: os.path.exists(p + ".ready"), "squatter on " + p)
        squatter = squatters

        # The hub, without a runtime directory, starts in its private one.
        config = wd.write("hub.yaml", "name: %s\nbus: {bind: 'tcp://127.0.0.1:%d'}\n%s"
                          % (name, fh.free_port(), CONSUMERS))
        err = open(wd.file("hub.stderr"), "wb")
        proc = subprocess.Popen([fh.BIN, "run", "-c", config], stderr=err,
                                stdout=subprocess.DEVNULL, env=clean_env())
        hub = proc
        private = "/run/fanhub-0/fanhub-%s.sock" % name
        fh.wait_for(lambda: os.path.exists(private) or proc.poll() is not None, "private socket")
        assert proc.poll() is None, open(wd.file("hub.stderr")).read()
        st = os.stat("/run/fanhub-0")
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
        status, out, _ = fh.run(["stats", "-c", config, "--format", "json"])
        assert status == 0 and '"quiet"' in out and "squatter" not in out, out

        # Root's clients pointed at the squatted path refuse it, send nothing.
        squatted = wd.write("squatted.yaml", "control: ipc://%s\nbus: {bind: 'tcp://127.0.0.1:%d'}\n%s"
                            % (squat_paths[1], fh.free_port(), CONSUMERS))
        for args in (["emit", "-c", squatted, "org.secret", "password=hunter2"],
                     ["stats", "-c", squatted],
                     ["reload", "-c", squatted]):
            status, out, errtext = fh.run(args)
            assert status != 0, (args, out)
            assert "belongs to uid %d (nobody)" % NOBODY.pw_uid in errtext, errtext
            assert "refusing to talk to it" in errtext, errtext
            assert "squatted" not in out and "squatter" not in out, out
        # What did the squatters get? Nothing (root's END is the only call).
        for i, p in enumerate(squat_paths):
            sock = zmq.Context.instance().socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 1000)
            sock.connect("ipc://" + p)
            sock.send(b"END")
            squatters[i].wait(timeout=fh.DEADLINE)
            sock.close()
            with open(record + str(i)) as f:
                assert __import__("json").load(f) == [], "squatter %s got requests" % p
        squatter = None
        proc.terminate()
        assert proc.wait(timeout=fh.DEADLINE) == 0
        hub = None
        assert not os.path.exists(private)
        fh.check_sanitizers(open(wd.file("hub.stderr")).read(), "fanhub run")
    finally:
        for p in squatter or []:
            p.kill()
            p.wait()
        if hub is not None:
            hub.kill()
            hub.wait()
        for p in (old_default, old_default + ".ready"):
            if os.path.exists(p):
                os.unlink(p)
        shutil.rmtree(shared, ignore_errors=True)
        wd.cleanup()


def test_regular_file_and_abstract_are_refused():
    wd = fh.Workdir()
    try:
        precious = wd.write("precious", "keep me\n")
        config = wd.write("file.yaml", "control: ipc://%s\nbus: {bind: 'tcp://127.0.0.1:%d'}\n%s"
                          % (precious, fh.free_port(), CONSUMERS))
        status, _, err = fh.run(["run", "-c", config])
        assert status != 0 and "exists and is not a socket; refusing to replace it" in err, err
        with open(precious) as f:
            assert f.read() == "keep me\n"
        abstract = wd.write("abstract.yaml", "control: ipc://@fanhub-%d\nbus: {bind: 'tcp://127.0.0.1:%d'}\n%s"
                            % (os.getpid(), fh.free_port(), CONSUMERS))
        status, _, err = fh.run(["check", "-c", abstract])
        assert status == 2 and "an abstract socket (ipc://@NAME) has no owner" in err, err
    finally:
        wd.cleanup()


def test_no_foreign_connection_while_starting_under_umask_000():
    require_root()
    wd = fh.Workdir()
    shared = shared_dir(0o1777, owner=0)  # like /tmp: anyone may try
    prober = None
    try:
        script = write_script(shared, "prober.py", PROBER)
        path = os.path.join(shared, "race.sock")
        stop = os.path.join(shared, "stop")
        prober = as_nobody([PYTHON, script, path, stop], stdout=subprocess.PIPE)
        old = os.umask(0)
        try:
            for i in range(100):
                hub = fh.Hub(wd, "control: ipc://%s\nbus: {bind: 'tcp://127.0.0.1:%d'}\n%s"
                             % (path, fh.free_port(), CONSUMERS), name="race")
                hub.control = "ipc://" + path
                hub.wait_ready()
                assert os.stat(path).st_mode & 0o777 == 0o660
                assert hub.stop() == 0, hub.log()
        finally:
            os.umask(old)
        open(stop, "w").close()
        out, _ = prober.communicate(timeout=fh.DEADLINE)
        prober = None
        connected, refused, absent = map(int, out.split())
        assert connected == 0, "nobody connected %d times" % connected
        assert refused > 0, "the prober never met the socket (%d absent)" % absent
    finally:
        if prober is not None:
            prober.kill()
            prober.wait()
        shutil.rmtree(shared, ignore_errors=True)
        wd.cleanup()


if __name__ == "__main__":
    fh.main([test_squatter_on_the_old_default_path, test_regular_file_and_abstract_are_refused,
             test_no_foreign_connection_while_starting_under_umask_000])
