"""A worker speaking docs/worker-protocol.md by hand that leaves something
behind, for tests/integration/plugins/test_worker_protocol.py: at start it forks a
child that calls setsid (leaving the worker's process group) and sleeps
holding the worker's socket, its pid written to DIR/grandchild-WORKERPID.
Then READY; every message is answered OK, except that the first message
of the run (DIR/exited absent) makes it exit with status 3 instead.

Usage: setsid_worker.py DIR
"""
import json
import os
import struct
import sys
import time

FD = 3
DIR = sys.argv[1]


def frame(kind, data):
    return struct.pack(">I", len(data) + 1) + kind + data


def read_frame():
    head = b""
    while len(head) < 4:
        chunk = os.read(FD, 4 - len(head))
        if not chunk:
            sys.exit(0)
        head += chunk
    (n,) = struct.unpack(">I", head)
    data = b""
    while len(data) < n:
        data += os.read(FD, n - len(data))
    return data[:1], data[1:]


def leave_a_grandchild():
    me = os.getpid()
    if os.fork() == 0:
        os.setsid()
        path = os.path.join(DIR, "grandchild-%d" % me)
        with open(path + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(path + ".tmp", path)
        time.sleep(600)  # holds fd 3, the worker's socket
        os._exit(0)


leave_a_grandchild()
read_frame()  # HELLO
os.write(FD, frame(b"R", json.dumps({"protocol": 1, "name": "setsid", "version": "0"}).encode()))
while True:
    kind, payload = read_frame()
    if kind == b"Q":
        sys.exit(0)
    if kind != b"M":
        continue
    if not os.path.exists(os.path.join(DIR, "exited")):
        open(os.path.join(DIR, "exited"), "w").close()
        sys.exit(3)
    ticket = struct.unpack_from(">Q", payload, 0)[0]
    os.write(FD, frame(b"A", struct.pack(">QBH", ticket, 0, 0)))
