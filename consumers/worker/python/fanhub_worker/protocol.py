"""The frames of docs/worker-protocol.md, for a worker: read HELLO and
messages from the hub's socket in large chunks, write READY, answers, logs
and HALT in batches. Integers are big-endian."""
import json
import os
import struct
import threading
import time

PROTOCOL = 1
OK, RETRY, FAIL, DROP = 0, 1, 2, 3

_LEN = struct.Struct(">I")
_MSG = struct.Struct(">QQIqH")  # ticket, seq, attempt, received_ns, msg_id length
_ANSWER = struct.Struct(">IBQBH")  # length, 'A', ticket, verdict, reason length
_LOG = struct.Struct(">IBB")  # length, 'L', level


class Connection:
    """Reads are the serving thread's; writes (answers, logs from any of
    the consumer's threads, the flusher's) go through one lock, in order.
    A process the consumer forks writes nothing on the socket: its logs
    go to its stderr, and it never repeats what the worker had queued."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = bytearray()
        self.out = []
        self.lock = threading.RLock()  # a log from a __del__ or a signal handler
        self.oldest = None  # when the first frame not yet written was queued
        self.waiting = threading.Event()  # set while frames wait
        self.forked = False
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=self.lock.acquire, after_in_parent=self.lock.release,
                                after_in_child=self._after_fork)

    def _after_fork(self):
        self.lock = threading.RLock()
        self.out = []
        self.oldest = None
        self.waiting = threading.Event()
        self.forked = True

    def read(self):
        """More bytes from the hub; False at end of file."""
        chunk = os.read(self.fd, 1 << 20)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def frames(self):
        """Yields (type, start, end) of each whole frame in the buffer; the
        caller reads the payload from self.buf[start:end]. Consumed frames
        are dropped from the buffer when the generator ends."""
        buf = self.buf
        pos, size = 0, len(buf)
        try:
            while size - pos >= 4:
                (length,) = _LEN.unpack_from(buf, pos)
                if length == 0:
                    raise ValueError("a frame of length 0")
                if size - pos - 4 < length:
                    break
                start = pos
                pos += 4 + length  # before the yield: a caller may stop here
                yield buf[start + 4], start + 5, pos
        finally:
            del buf[:pos]

    def message(self, start):
        """An 'M' payload at start: (ticket, seq, attempt, received_ns,
        msg_id or None, [frames as bytes])."""
        buf = self.buf
        ticket, seq, attempt, received, idlen = _MSG.unpack_from(buf, start)
        pos = start + 30
        msg_id = buf[pos:pos + idlen].decode("utf-8", "replace") if idlen else None
        pos += idlen
        (count,) = _LEN.unpack_from(buf, pos)
        pos += 4
        frames = []
        for _ in range(count):
            (flen,) = _LEN.unpack_from(buf, pos)
            pos += 4
            frames.append(bytes(buf[pos:pos + flen]))
            pos += flen
        return ticket, seq, attempt, received, msg_id, frames

    def _queue(self, frame):
        if self.forked:
            return
        with self.lock:
            if self.oldest is None:
                self.oldest = time.monotonic()
                self.waiting.set()
            self.out.append(frame)

    def send_json(self, kind, obj):
        data = json.dumps(obj).encode()
        self._queue(_LEN.pack(len(data) + 1) + kind + data)

    def answer(self, ticket, verdict, reason=""):
        data = reason.encode("utf-8", "replace")[:255] if reason else b""
        self._queue(_ANSWER.pack(12 + len(data), 65, ticket, verdict, len(data)) + data)

    def log(self, level, text):
        if self.forked:
            os.write(2, (text + "\n").encode("utf-8", "replace"))
            return
        data = text.encode("utf-8", "replace")[:4000]
        self._queue(_LOG.pack(len(data) + 2, 76, level) + data)

    def flush(self, older_than=None):
        """Writes what waits (only if its first frame is older_than
        seconds, when given)."""
        with self.lock:
            if not self.out or (older_than is not None
                                and time.monotonic() - self.oldest < older_than):
                return
            out, self.out = self.out, []
            data = b"".join(out)
            self.oldest = None
            self.waiting.clear()
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

    def start_flusher(self, after_s):
        """A thread that writes what has waited after_s seconds: an answer
        is not held back while the next message of its chunk runs long (a
        crash or a hang there would take it along)."""
        def run():
            while True:
                self.waiting.wait()
                time.sleep(after_s)
                try:
                    self.flush(older_than=after_s)
                except OSError:
                    return  # the hub is gone: the serving thread sees it too

        threading.Thread(target=run, name="fanhub-flusher", daemon=True).start()
