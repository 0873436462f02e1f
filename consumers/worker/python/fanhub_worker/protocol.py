"""The frames of docs/worker-protocol.md, for a worker: read HELLO and
messages from the hub's socket in large chunks, write READY, answers, logs,
PUBLISH and HALT in batches. Integers are big-endian.

Text the hub keeps to a size (an answer's reason, a log line) is cut at a
character boundary, never inside a UTF-8 sequence."""
import json
import os
import struct
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Optional, Tuple, Union

PROTOCOL = 2  # the newest this runner speaks; it speaks 1 too
PROTOCOLS = (1, 2)
OK, RETRY, FAIL, DROP = 0, 1, 2, 3

FRAME_MAX = 1 << 20  # L of a frame from a worker, type byte included
REASON_MAX = 255  # the hub keeps this much of a reason
LOG_MAX = 4000
READ_MAX = 1 << 20  # bytes one read of the hub's socket takes

_LEN = struct.Struct(">I")
# ticket, seq, attempt, received_ns, msg_id length, and the frame count when
# there is no msg_id (else the msg_id's first bytes)
_MSG = struct.Struct(">QQIqHI")
_ANSWER = struct.Struct(">IBQBH")  # length, 'A', ticket, verdict, reason length
_LOG = struct.Struct(">IBB")  # length, 'L', level
_PUBLISH = struct.Struct(">IBH")  # length, 'P', topic length

# (ticket, seq, attempt, received_ns, msg_id or None, frames)
Delivery = Tuple[int, int, int, int, Optional[str], List[bytes]]


_RAW_DECODE = json.JSONDecoder().raw_decode  # json.loads's own decoder's scanner


def loads(data: Union[bytes, str]) -> Any:
    """json.loads(data), the same object or the same exception, at a quarter
    of its cost for what a bus carries: a JSON object (or array) with
    nothing after it, as bytes (taken as UTF-8, as json.loads takes bytes
    whose first two are not NUL) or text. json.loads spends the rest
    guessing the encoding and matching whitespace around the value; the
    scanner that reads the value is the same. Anything else (whitespace
    around it, another encoding, an error) goes the long way."""
    if len(data) > 1 and data[0] in _OPENERS and data[1] not in _NUL:
        try:
            text = data if isinstance(data, str) else data.decode("utf-8", "surrogatepass")
            value, end = _RAW_DECODE(text, 0)
            if end == len(text):
                return value
        except ValueError:
            pass  # json.loads raises it, as it would have
    return json.loads(data)


_OPENERS = (123, 91, "{", "[")  # a byte of bytes is an int, of text a str
_NUL = (0, "\0")


class ProtocolError(ValueError):
    """The hub sent what the protocol does not allow."""


class PublishError(RuntimeError):
    """A message cannot be published from here: a hub of protocol 1, no
    hub at all, or a process the worker forked."""

    __module__ = "fanhub_worker"  # where a consumer names it


def cut_utf8(text: str, limit: int) -> bytes:
    """text as UTF-8, at most limit bytes, cut before a whole character
    (lone surrogates become '?')."""
    data = text.encode("utf-8", "replace")
    if len(data) <= limit:
        return data
    end = limit
    while end > 0 and (data[end] & 0xC0) == 0x80:  # a continuation byte
        end -= 1
    return data[:end]


class Connection:
    """Reads are the serving thread's; writes (answers, logs and PUBLISH
    frames from any of the consumer's threads, the flusher's) go into one
    deque, in order, and are written under one lock. Queueing takes no
    lock (a deque's append is atomic): queue, then look whether the
    flusher must be woken; the writer takes what it finds, then looks
    whether more came (so a frame is never left without the flusher
    armed). A process the consumer forks writes nothing on
    the socket: its logs go to its stderr, and it never repeats what the
    worker had queued."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = bytearray()
        self.data = b""  # the buffer as bytes, for the frames frames() yields
        self.rbuf = bytearray(READ_MAX)  # what one read takes in
        self.rview = memoryview(self.rbuf)
        self.out: Deque[bytes] = deque()
        self.lock = threading.RLock()  # a log from a __del__ or a signal handler
        self.oldest: Optional[float] = None  # when the first frame not yet written was queued
        self.waiting = threading.Event()  # set while frames wait
        self.forked = False
        self.protocol = 1  # what READY said; 2 allows PUBLISH
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(before=self.lock.acquire, after_in_parent=self.lock.release,
                                after_in_child=self._after_fork)

    def _after_fork(self) -> None:
        self.lock = threading.RLock()
        self.out = deque()
        self.oldest = None
        self.waiting = threading.Event()
        self.forked = True

    def read(self) -> bool:
        """More bytes from the hub; False at end of file. Into one buffer
        kept for the connection's life: os.read(fd, 1 MiB) would allocate
        (mmap) a 1 MiB object every call and shrink and free it after, three
        more system calls and fresh pages for each read, and with a small
        prefetch window a read brings only a few messages."""
        n = os.readv(self.fd, [self.rbuf])
        if not n:
            return False
        self.buf += self.rview[:n]
        return True

    def frames(self) -> Iterator[Tuple[int, int, int]]:
        """Yields (type, start, end) of each whole frame in the buffer; the
        caller reads the payload from self.data[start:end] (message() does).
        self.data is the buffer as bytes, taken once a whole frame is in
        it: a slice of bytes is the payload's one copy (one of the
        bytearray, then bytes of that, made two objects a frame). Consumed
        frames are dropped from the buffer when the generator ends. A
        frame of length 0 raises ProtocolError."""
        buf = self.buf
        size = len(buf)
        if size < 4 or size - 4 < _LEN.unpack_from(buf, 0)[0]:
            return  # not one whole frame yet (a large message: no copy each read)
        data = self.data = bytes(buf)
        pos = 0
        try:
            while size - pos >= 4:
                (length,) = _LEN.unpack_from(data, pos)
                if length == 0:
                    raise ProtocolError("a frame of length 0 (every frame has a type byte)")
                if size - pos - 4 < length:
                    break
                start = pos
                pos += 4 + length  # before the yield: a caller may stop here
                yield data[start + 4], start + 5, pos
        finally:
            del buf[:pos]

    def message(self, start: int) -> Delivery:
        """An 'M' payload at start (of the frame frames() yielded last):
        (ticket, seq, attempt, received_ns, msg_id or None, [frames as
        bytes])."""
        data = self.data
        ticket, seq, attempt, received, idlen, count = _MSG.unpack_from(data, start)
        pos = start + 34 + idlen
        msg_id = None
        if idlen:
            (count,) = _LEN.unpack_from(data, pos - 4)
            msg_id = data[start + 30:pos - 4].decode("utf-8", "replace")
        frames = []
        for _ in range(count):
            end = pos + 4 + _LEN.unpack_from(data, pos)[0]
            frames.append(data[pos + 4:end])
            pos = end
        return ticket, seq, attempt, received, msg_id, frames

    def _queue(self, frame: bytes) -> None:
        if self.forked:
            return
        self.out.append(frame)
        if self.oldest is None:
            self._arm()

    def _arm(self) -> None:
        """Frames wait: when the first was queued, and the flusher woken."""
        with self.lock:
            if self.oldest is None and self.out:
                self.oldest = time.monotonic()
                self.waiting.set()

    def send_json(self, kind: bytes, obj: Dict[str, Any]) -> None:
        data = json.dumps(obj).encode()
        self._queue(_LEN.pack(len(data) + 1) + kind + data)

    def answer(self, ticket: int, verdict: int, reason: str = "") -> None:
        if not reason:
            self._queue(_ANSWER.pack(12, 65, ticket, verdict, 0))
            return
        data = cut_utf8(reason, REASON_MAX)
        self._queue(_ANSWER.pack(12 + len(data), 65, ticket, verdict, len(data)) + data)

    def log(self, level: int, text: str) -> None:
        if self.forked:
            os.write(2, (text + "\n").encode("utf-8", "replace"))
            return
        data = cut_utf8(text, LOG_MAX)
        self._queue(_LOG.pack(len(data) + 2, 76, level) + data)

    def publish(self, topic: bytes, body: bytes) -> None:
        """A PUBLISH frame (protocol 2): u16 topic length, topic, body.
        Raises ValueError for what the hub would take for a broken worker."""
        if self.forked:
            raise PublishError("a process the worker forked cannot publish on its socket")
        if self.protocol < 2:
            raise PublishError("the hub speaks worker protocol %d, which has no PUBLISH: "
                               "publishing needs a hub of protocol 2" % self.protocol)
        if not topic or len(topic) > 0xFFFF:
            raise ValueError("a topic of %d bytes (1 to 65535)" % len(topic))
        length = 3 + len(topic) + len(body)
        if length > FRAME_MAX:
            raise ValueError("a message of %d bytes is over the %d a worker may send in a frame"
                             % (len(topic) + len(body), FRAME_MAX - 3))
        self._queue(_PUBLISH.pack(length, 80, len(topic)) + topic + body)

    def flush(self, older_than: Optional[float] = None) -> None:
        """Writes what waits (only if its first frame is older_than
        seconds, when given)."""
        with self.lock:
            if not self.out or (older_than is not None and self.oldest is not None
                                and time.monotonic() - self.oldest < older_than):
                return
            out = self.out
            data = b"".join([out.popleft() for _ in range(len(out))])
            self.oldest = None
            self.waiting.clear()
            if out:  # queued since: armed again (its queuer saw oldest set)
                self._arm()
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

    def start_flusher(self, after_s: float) -> None:
        """A thread that writes what has waited after_s seconds: an answer
        is not held back while the next message of its chunk runs long (a
        crash or a hang there would take it along)."""
        def run() -> None:
            while True:
                self.waiting.wait()
                time.sleep(after_s)
                try:
                    self.flush(older_than=after_s)
                except OSError:
                    return  # the hub is gone: the serving thread sees it too

        threading.Thread(target=run, name="fanhub-flusher", daemon=True).start()
