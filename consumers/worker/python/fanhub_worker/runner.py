"""The runner: HELLO, the callable loaded and wrapped, READY, then
messages answered until QUIT or the end of the socket.

Two kinds of consumer (docs/porting.md):
  Moksha / fedmsg-hub: a class with consume(self, message); message is
      {"topic": TOPIC, "body": BODY} with the body parsed from JSON. It is
      made once as Class(hub), hub.config being options.config. Its topic
      (a string or a list) filters as Moksha's zeromq subscription did: a
      topic that starts with it, its '*' taken out, matches (or one that
      matches it as an fnmatch pattern); a message it does not match is
      answered DROP. validate, pre_consume and post_consume are
      called around consume when it has them; validate raising is DROP.
  fedora-messaging: a function, or a class made once with no arguments and
      called, given a Message (.topic, .body, .id, .headers, .queue).
      Nack is RETRY, Drop is DROP, HaltConsumer is HALT.
Any other exception is FAIL with its last line as the reason (RETRY with
options.on_exception: retry), and its traceback is logged, as fedmsg-hub
logged it.
"""
import fnmatch
import importlib
import json
import logging
import os
import sys
import traceback

import fanhub_worker
from fanhub_worker import Drop, HaltConsumer, Nack, compat
from fanhub_worker.protocol import DROP, FAIL, OK, PROTOCOL, RETRY, Connection

FLUSH_S = 0.02  # answers wait at most this long for a batch to fill


class Hub:
    """What a Moksha consumer sees as self.hub."""

    def __init__(self, config):
        self.config = config


class Message:
    """A fedora-messaging style message."""

    __slots__ = ("topic", "body", "id", "headers", "queue", "frames")

    def __init__(self, topic, body, msg_id, headers, queue, frames):
        self.topic = topic
        self.body = body
        self.id = msg_id
        self.headers = headers
        self.queue = queue
        self.frames = frames

    def __repr__(self):
        return "Message(id=%r, topic=%r, body=%r)" % (self.id, self.topic, self.body)


class LogHandler(logging.Handler):
    """Python logging through the hub's log (LOG frames)."""

    LEVELS = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
              logging.CRITICAL: 2}

    def __init__(self, conn):
        super().__init__()
        self.conn = conn

    def emit(self, record):
        try:
            level = self.LEVELS.get(record.levelno, 6 if record.levelno < 30 else 3)
            self.conn.log(level, "%s: %s" % (record.name, self.format(record)))
            self.conn.flush()
        except Exception:  # never let logging take the worker down
            self.handleError(record)


def topic_matcher(topics):
    """Moksha's subscription: a prefix, '*' taken out; or a pattern."""
    prefixes = [t.replace("*", "") for t in topics]
    return lambda topic: any(topic.startswith(p) for p in prefixes) or any(
        fnmatch.fnmatchcase(topic, t) for t in topics)


def failed(exc, message_id):
    """The reason of an exception that escaped the consumer, its traceback
    logged first."""
    logging.getLogger("fanhub_worker").error(
        "message %s: %s", message_id, "".join(traceback.format_exception(
            type(exc), exc, exc.__traceback__)).rstrip())
    return last_line(exc)


def last_line(exc):
    if not str(exc):
        return type(exc).__name__
    lines = traceback.format_exception_only(type(exc), exc)
    return lines[-1].strip() if lines else type(exc).__name__


def load(spec, paths):
    for path in reversed(paths or []):
        sys.path.insert(0, path)
    module_name, _, attr = spec.partition(":")
    if not attr:
        module_name, _, attr = spec.rpartition(".")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def parse_body(data):
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


class Halt(Exception):
    pass


class StartFailed(Exception):
    """The consumer's own start-up raised (its class made) something other
    than a mistake of code or configuration: the hub starts it again
    later, as after a crash, instead of refusing the consumer."""


# What a constructor raises for a mistake, not for a service not up yet
# (a database driver's OperationalError, ConnectionRefusedError, ...).
MISTAKES = (ImportError, SyntaxError, NameError, AttributeError, TypeError, LookupError,
            ValueError, AssertionError, NotImplementedError)


def moksha_handler(cls, options, fail):
    consumer = cls(Hub(options.get("config") or {}))
    topics = getattr(consumer, "topic", None) or []
    if isinstance(topics, str):
        topics = [topics]
    patterns = [t for t in topics if t not in ("*", "#")]
    matches = topic_matcher(patterns)
    validate = getattr(consumer, "validate", None)
    pre = getattr(consumer, "pre_consume", None)
    post = getattr(consumer, "post_consume", None)
    consume = consumer.consume

    def handle(topic, body, msg_id, headers, frames):
        if patterns and not matches(topic):
            return DROP, "topic not in the class's topic"
        message = {"topic": topic, "body": body}
        if validate is not None:
            try:
                validate(message)
            except Exception as e:
                return DROP, "failed validation: " + last_line(e)
        try:
            if pre is not None:
                pre(message)
            consume(message)
            if post is not None:
                post(message)
        except Exception as e:
            return fail, failed(e, msg_id)
        return OK, ""

    return handle


def callable_handler(obj, options, fail, queue):
    if isinstance(obj, type):
        obj = obj()

    def handle(topic, body, msg_id, headers, frames):
        try:
            obj(Message(topic, body, msg_id, headers, queue, frames))
        except Nack as e:
            return RETRY, last_line(e)
        except Drop as e:
            return DROP, last_line(e)
        except HaltConsumer as e:
            raise Halt(getattr(e, "reason", None) or str(e) or "HaltConsumer")
        except Exception as e:
            return fail, failed(e, msg_id)
        return OK, ""

    return handle


def make_handler(options, queue):
    obj = load(options["callable"], options.get("path"))
    fail = RETRY if options.get("on_exception") == "retry" else FAIL
    if not callable(obj):
        raise TypeError("%s is neither a class with consume() nor a callable"
                        % options["callable"])
    try:
        if isinstance(obj, type) and callable(getattr(obj, "consume", None)):
            return moksha_handler(obj, options, fail)
        return callable_handler(obj, options, fail, queue)
    except (compat.ConfigKeyDisabled,) + MISTAKES:
        raise  # the configuration's or the code's: a restart would not mend it
    except Exception as e:
        raise StartFailed(last_line(e)) from e


def handshake(conn):
    """The HELLO's JSON object."""
    while True:
        for kind, start, end in conn.frames():
            if kind != ord("H"):
                raise ValueError("expected HELLO, got frame type %r" % chr(kind))
            return json.loads(bytes(conn.buf[start:end]))
        if not conn.read():
            raise EOFError("the hub closed the socket before HELLO")


def serve(conn, handle):
    """Answers messages until QUIT or end of file; returns the exit status."""
    halted = False
    while True:
        if not conn.read():
            return 0
        quit_ = False
        for kind, start, end in conn.frames():
            if kind == 77:  # 'M'
                ticket, seq, attempt, received, msg_id, frames = conn.message(start)
                if halted:
                    continue  # never answered: the hub keeps it
                topic = frames[0].decode("utf-8", "replace")
                headers = {"fanhub_seq": seq, "fanhub_attempt": attempt,
                           "fanhub_received_ns": received}
                try:
                    verdict, reason = handle(topic, parse_body(frames[1]), msg_id, headers, frames)
                except Halt as e:
                    halted = True
                    conn.send_json(b"X", {"reason": str(e)})
                    conn.flush()
                    continue
                conn.answer(ticket, verdict, reason)
            elif kind == 81:  # 'Q'
                quit_ = True
            else:
                raise ValueError("unexpected frame type %r" % chr(kind))
        conn.flush()
        if quit_:
            return 0


def main():
    # The socket moves to a descriptor that processes the consumer starts
    # do not inherit (os.dup's are not inheritable): one that outlived the
    # worker would keep its socket open.
    hub_fd = int(os.environ.get("FANHUB_WORKER_FD", "3"))
    fd = os.dup(hub_fd)
    os.close(hub_fd)
    conn = Connection(fd)
    # print() goes to the hub's log line by line; fd 1 is not the protocol's.
    try:
        sys.stdout.reconfigure(line_buffering=True)
    except AttributeError:
        pass
    logging.basicConfig(level=logging.INFO, handlers=[LogHandler(conn)], format="%(message)s")
    hello = handshake(conn)
    options = hello.get("options") or {}
    try:
        if hello.get("protocol") not in (1, 2):
            raise ValueError("the hub speaks protocol %r, this runner %d"
                             % (hello.get("protocol"), PROTOCOL))
        fanhub_worker.config = options.get("config") or {}
        compat.install(fanhub_worker.config)
        handle = make_handler(options, hello.get("consumer"))
    except BaseException as e:
        traceback.print_exc()  # before ERROR: the hub stops reading at it
        sys.stderr.flush()
        error = {"error": "%s: %s" % (options.get("callable"), last_line(e))}
        if isinstance(e, StartFailed):
            error = {"error": "%s: %s" % (options.get("callable"), e), "retry": True}
        conn.send_json(b"E", error)
        conn.flush()
        return 1
    conn.send_json(b"R", {"protocol": min(hello.get("protocol"), 2), "name": options.get("callable", "?"),
                          "version": "fanhub_worker %s, Python %s" % (
                              fanhub_worker.__version__, sys.version.split()[0])})
    conn.flush()
    conn.start_flusher(FLUSH_S)
    return serve(conn, handle)
