"""The Python runner's protocol (consumers/worker/python/fanhub_worker)
over a socketpair, without a hub: frames split across reads (one larger
than a read's buffer, followed by a small one), a frame of
length 0 refused, reasons and log lines cut at a character boundary,
PUBLISH frames as docs/worker-protocol.md lays them out (from several
threads at once, refused on a protocol-1 hub), and the version the runner
answers HELLO with. Standard library only; ctest runs it as
unit.python_worker_runner."""
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import unittest

SOURCE_DIR = os.environ.get("FANHUB_SOURCE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..")
RUNNER_DIR = os.path.join(SOURCE_DIR, "consumers", "worker", "python")
sys.path.insert(0, RUNNER_DIR)

import fanhub_worker  # noqa: E402
from fanhub_worker import protocol  # noqa: E402
from fanhub_worker.protocol import Connection, ProtocolError, PublishError  # noqa: E402


def frame(kind, payload):
    return struct.pack(">I", len(payload) + 1) + kind + payload


def message_frame(ticket, seq, topic, body, msg_id=b""):
    payload = struct.pack(">QQIqH", ticket, seq, 1, 0, len(msg_id)) + msg_id
    payload += struct.pack(">I", 2)
    for part in (topic, body):
        payload += struct.pack(">I", len(part)) + part
    return frame(b"M", payload)


def read_frames(sock, count):
    """count whole frames from sock: [(type, payload)]."""
    data, out = b"", []
    while len(out) < count:
        chunk = sock.recv(1 << 16)
        assert chunk, "end of file after %d frames" % len(out)
        data += chunk
        while len(data) >= 4:
            (length,) = struct.unpack_from(">I", data)
            if len(data) < 4 + length:
                break
            out.append((data[4:5], data[5:4 + length]))
            data = data[4 + length:]
    return out


class Pair(unittest.TestCase):
    def setUp(self):
        self.hub, worker = socket.socketpair()
        self.conn = Connection(os.dup(worker.fileno()))
        worker.close()

    def tearDown(self):
        self.hub.close()
        os.close(self.conn.fd)
        fanhub_worker._connection = None


class Frames(Pair):
    def test_a_message_split_at_every_byte_reads_the_same(self):
        data = message_frame(7, 42, b"org.test.topic", b'{"msg": "\xc3\xa9"}', b"2026-x")
        for cut in range(1, len(data)):
            self.hub.sendall(data[:cut])
            self.conn.read()
            self.assertEqual(list(self.conn.frames()), [], "a whole frame at byte %d" % cut)
            self.hub.sendall(data[cut:])
            while len(self.conn.buf) < len(data):
                self.conn.read()
            found = [(kind, self.conn.message(start)) for kind, start, _ in self.conn.frames()]
            self.assertEqual(found, [(ord("M"), (7, 42, 1, 0, "2026-x", [
                b"org.test.topic", b'{"msg": "\xc3\xa9"}']))])
            self.assertEqual(len(self.conn.buf), 0)

    def test_msg_ids_short_and_long(self):
        for msg_id in (b"a", b"ab", b"abc", b"abcd", b"2026-\xc3\xa9" * 40):
            self.hub.sendall(message_frame(3, 4, b"t", b"{}", msg_id))
            self.conn.read()
            found = [self.conn.message(start) for _, start, _ in self.conn.frames()]
            self.assertEqual(found, [(3, 4, 1, 0, msg_id.decode(), [b"t", b"{}"])])

    def test_several_frames_in_one_read(self):
        self.hub.sendall(message_frame(1, 1, b"t", b"a") + message_frame(2, 2, b"t", b"b")
                         + frame(b"Q", b""))
        self.conn.read()
        kinds = [kind for kind, _, _ in self.conn.frames()]
        self.assertEqual(kinds, [ord("M"), ord("M"), ord("Q")])

    def test_a_message_larger_than_one_read_and_the_next_after_it(self):
        # One read takes at most READ_MAX bytes into a buffer the
        # connection keeps; what a read brings must never be what an
        # earlier one left there.
        big = bytes(range(256)) * (3 * protocol.READ_MAX // 256 + 7)
        data = message_frame(9, 1, b"t", big) + message_frame(10, 2, b"t", b"small")
        sender = threading.Thread(target=self.hub.sendall, args=(data,))
        sender.start()
        found = []
        while len(found) < 2:
            self.assertTrue(self.conn.read())
            found += [self.conn.message(start) for _, start, _ in self.conn.frames()]
        sender.join()
        self.assertEqual([(m[0], m[5]) for m in found], [(9, [b"t", big]), (10, [b"t", b"small"])])
        self.hub.shutdown(socket.SHUT_WR)
        self.assertFalse(self.conn.read())

    def test_a_frame_of_length_zero_is_refused(self):
        self.hub.sendall(struct.pack(">I", 0))
        self.conn.read()
        with self.assertRaises(ProtocolError):
            list(self.conn.frames())


class Cuts(Pair):
    TEXTS = ["é" * 200, "€" * 200, "\U0001F600" * 100, "a" + "€" * 200, "ab" + "€" * 200,
             "x\udcffy" * 100]

    def test_reasons_are_cut_at_a_character_boundary(self):
        for text in self.TEXTS:
            self.conn.answer(5, protocol.FAIL, text)
            self.conn.flush()
            ((kind, payload),) = read_frames(self.hub, 1)
            ticket, verdict, length = struct.unpack_from(">QBH", payload)
            reason = payload[11:]
            self.assertEqual((kind, ticket, verdict, length), (b"A", 5, 2, len(reason)))
            self.assertLessEqual(len(reason), protocol.REASON_MAX)
            self.assertGreater(len(reason), protocol.REASON_MAX - 4)
            decoded = reason.decode("utf-8")  # never mid-character
            self.assertTrue(text.encode("utf-8", "replace").decode().startswith(decoded))

    def test_log_lines_are_cut_at_a_character_boundary(self):
        for text in self.TEXTS:
            self.conn.log(4, text * 30)
            self.conn.flush()
            ((kind, payload),) = read_frames(self.hub, 1)
            self.assertEqual((kind, payload[0]), (b"L", 4))
            line = payload[1:]
            self.assertLessEqual(len(line), protocol.LOG_MAX)
            self.assertGreater(len(line), protocol.LOG_MAX - 4)
            line.decode("utf-8")

    def test_short_text_is_kept_whole(self):
        self.assertEqual(protocol.cut_utf8("ünïcödé", 255), "ünïcödé".encode())


class Publish(Pair):
    def setUp(self):
        super().setUp()
        self.conn.protocol = 2
        fanhub_worker._connection = self.conn

    def published(self, count):
        self.conn.flush()
        out = []
        for kind, payload in read_frames(self.hub, count):
            self.assertEqual(kind, b"P")
            (tlen,) = struct.unpack_from(">H", payload)
            out.append((payload[2:2 + tlen].decode(), payload[2 + tlen:]))
        return out

    def test_bodies_as_bytes_text_or_json(self):
        fanhub_worker.publish("org.test.a", b"\x00raw")
        fanhub_worker.publish("org.test.b", "t\u00e9xt")
        fanhub_worker.publish("org.test.c", {"n": 1})
        fanhub_worker.publish("org.test.d", b"")
        self.assertEqual(self.published(4), [
            ("org.test.a", b"\x00raw"), ("org.test.b", "t\u00e9xt".encode()),
            ("org.test.c", b'{"n": 1}'), ("org.test.d", b"")])

    def test_the_exact_frame(self):
        fanhub_worker.publish("t\u00e9", b"xy")
        self.conn.flush()
        data = self.hub.recv(100)
        self.assertEqual(data, struct.pack(">IBH", 1 + 2 + 3 + 2, ord("P"), 3) + b"t\xc3\xa9xy")

    def test_refused_topics_and_sizes(self):
        with self.assertRaises(ValueError):
            fanhub_worker.publish("", b"x")
        with self.assertRaises(ValueError):
            fanhub_worker.publish("t", b"x" * (1 << 20))
        fanhub_worker.publish("t", b"x" * ((1 << 20) - 4))  # L = 1 MiB exactly
        self.conn.out.clear()

    def test_a_protocol_1_hub_refuses_publish_clearly(self):
        self.conn.protocol = 1
        with self.assertRaises(PublishError) as caught:
            fanhub_worker.publish("org.test", {})
        self.assertIn("protocol 1", str(caught.exception))
        fanhub_worker._connection = None
        with self.assertRaises(PublishError):
            fanhub_worker.publish("org.test", {})

    def test_from_many_threads_at_once(self):
        def run(n):
            for i in range(200):
                fanhub_worker.publish("org.test.%d" % n, {"i": i, "pad": "x" * (i * 7)})
        threads = [threading.Thread(target=run, args=(n,)) for n in range(4)]
        reader = threading.Thread(target=lambda: self.got.extend(self.published(800)))
        self.got = []
        reader.start()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.conn.flush()
        reader.join(30)
        per_topic = {}
        for topic, body in self.got:
            per_topic.setdefault(topic, []).append(json.loads(body)["i"])
        self.assertEqual(per_topic, {"org.test.%d" % n: list(range(200)) for n in range(4)})


class Flusher(Pair):
    """Answers queued while the serving thread works on are written by the
    flusher, not held back until the chunk ends: also those queued while
    it wrote (then it is armed again)."""

    def test_what_waits_is_written_without_a_flush(self):
        self.conn.start_flusher(0.005)
        self.hub.settimeout(30)
        for round_ in range(50):
            for i in range(20):
                self.conn.answer(round_ * 100 + i, protocol.OK)
            got = read_frames(self.hub, 20)
            self.assertEqual([struct.unpack(">Q", p[:8])[0] for _, p in got],
                             [round_ * 100 + i for i in range(20)])
        self.assertIsNone(self.conn.oldest)
        self.assertEqual(len(self.conn.out), 0)


class Bodies(unittest.TestCase):
    """protocol.loads is json.loads: the same value, or the same exception
    with the same text, for what takes its short way and what does not."""

    CASES = [b'{"a": 1}', b'[1, 2]', b'{"pad":"xxxx"}', b'{"msg": "\xc3\xa9\\ud800"}',
             b'{"a": 1} ', b' {"a": 1}', b'{"a": 1}\n', b'{"a": 1}{"b": 2}', b'{"a": 1} x',
             b'{"a": ', b'{', b'[', b'{}', b'[]', b'"text"', b'12', b'null', b'',
             b'{"a": "\xff"}', b'\xef\xbb\xbf{"a": 1}', '{"a": 1}'.encode("utf-16-le"),
             '{"a": 1}'.encode("utf-16"), '{"a": 1}'.encode("utf-32"), b'{\x00', b'[\x00\x00\x00',
             b'{"a": NaN}', b'{"a": 1e400}', b'{"a": 1, "a": 2}', b'{"a": "\x01"}']

    def outcome(self, load, data):
        try:
            return "value", load(data)
        except Exception as e:  # the exception's class and text are the point
            return type(e), str(e)

    def test_the_same_as_json_loads(self):
        for data in self.CASES:
            for form in (data, data.decode("utf-8", "replace")):
                self.assertEqual(repr(self.outcome(protocol.loads, form)),
                                 repr(self.outcome(json.loads, form)), form)


class Handshake(unittest.TestCase):
    """The runner itself, on a socketpair, answering HELLO."""

    def ready(self, hello):
        hub, worker = socket.socketpair()
        env = dict(os.environ, FANHUB_WORKER_FD=str(worker.fileno()))
        proc = subprocess.Popen([sys.executable, os.path.join(RUNNER_DIR, "fanhub_worker",
                                                              "__main__.py")],
                                pass_fds=[worker.fileno()], env=env, stderr=subprocess.PIPE)
        worker.close()
        hub.sendall(frame(b"H", json.dumps(hello).encode()))
        ((kind, payload),) = read_frames(hub, 1)
        hub.sendall(frame(b"Q", b""))
        proc.wait(30)
        proc.stderr.close()
        hub.close()
        return kind, json.loads(payload)

    def hello(self, protocol):
        return {"protocol": protocol, "consumer": "c", "worker": 0, "max_pending": 10,
                "prefetch": 4, "options": {"callable": "json:loads"}}

    def test_ready_speaks_the_lower_version(self):
        self.assertEqual(self.ready(self.hello(1))[1]["protocol"], 1)
        self.assertEqual(self.ready(self.hello(2))[1]["protocol"], 2)
        self.assertEqual(self.ready(self.hello(3))[1]["protocol"], 2)

    def test_an_unknown_version_is_an_error(self):
        kind, payload = self.ready(self.hello(0))
        self.assertEqual(kind, b"E")
        self.assertIn("the hub speaks protocol 0", payload["error"])


if __name__ == "__main__":
    unittest.main()
