"""The runner: HELLO, the callable loaded and wrapped, READY, then
messages answered until QUIT or the end of the socket, then the consumer
stopped.

Two kinds of consumer (docs/porting.md):
  Moksha / fedmsg-hub: a class with consume(self, message), made once as
      Class(hub) with moksha_hub.Hub: it subscribes its callbacks, and
      each message goes through them as moksha's ZeroMQ hub delivered it
      (moksha_hub.py).
  fedora-messaging: a function, or a class made once with no arguments and
      called, given a Message (fm.py). Nack is RETRY, Drop is DROP,
      HaltConsumer is HALT.
Any other exception is FAIL with its last line as the reason (RETRY with
options.on_exception: retry), and its traceback is logged, as fedmsg-hub
logged it.

Order at start: the consumer's `path` first on sys.path, then the
stand-ins for what is still not importable (compat.py), then
fedora_messaging's consumer_config, then the callable imported.
"""
import importlib
import json
import logging
import logging.config
import os
import sys
import traceback
from typing import Any, Callable, Dict, List, Optional, Tuple

import fanhub_worker
from fanhub_worker import compat, fm, fm_config, moksha_hub
from fanhub_worker.protocol import FAIL, OK, PROTOCOL, PROTOCOLS, RETRY, Connection
from fanhub_worker.reasons import last_line

FLUSH_S = 0.02  # answers wait at most this long for a batch to fill

Handler = Callable[[str, Optional[str], Dict[str, Any], List[bytes]], Tuple[int, str]]


class LogHandler(logging.Handler):
    """Python logging through the hub's log (LOG frames)."""

    LEVELS = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3,
              logging.CRITICAL: 2}

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.conn = conn

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level = self.LEVELS.get(record.levelno, 6 if record.levelno < 30 else 3)
            self.conn.log(level, "%s: %s" % (record.name, self.format(record)))
            self.conn.flush()
        except Exception:  # never let logging take the worker down
            self.handleError(record)


# Kept for callers of the runner's earlier layout.
topic_matcher = moksha_hub.topic_matcher


class StartFailed(Exception):
    """The consumer's own start-up raised (its class made) something other
    than a mistake of code or configuration: the hub starts it again
    later, as after a crash, instead of refusing the consumer."""


# What a constructor raises for a mistake, not for a service not up yet
# (a database driver's OperationalError, ConnectionRefusedError, ...).
MISTAKES = (ImportError, SyntaxError, NameError, AttributeError, TypeError, LookupError,
            ValueError, AssertionError, NotImplementedError)


def add_paths(paths: Optional[List[str]]) -> None:
    for path in reversed(paths or []):
        sys.path.insert(0, path)


def load(spec: str) -> Any:
    module_name, _, attr = spec.partition(":")
    if not attr:
        module_name, _, attr = spec.rpartition(".")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def make_handler(options: Dict[str, Any], queue: Optional[str]) -> Any:
    """The consumer, made: a moksha_hub.MokshaConsumer or an fm.Callback
    (each answers handler(topic, msg_id, headers, frames), and stop())."""
    obj = load(options["callable"])
    fail = RETRY if options.get("on_exception") == "retry" else FAIL
    if not callable(obj):
        raise TypeError("%s is neither a class with consume() nor a callable"
                        % options["callable"])
    try:
        if isinstance(obj, type) and callable(getattr(obj, "consume", None)):
            return moksha_hub.MokshaConsumer(obj, options, fail)
        return fm.Callback(obj, fail, queue, deployed=bool(options.get("fedora_messaging")),
                           halt_on_exception=options.get("on_exception") == "halt")
    except (moksha_hub.ConfigKeyDisabled,) + MISTAKES:
        raise  # the configuration's or the code's: a restart would not mend it
    except Exception as e:
        raise StartFailed(last_line(e)) from e


def handshake(conn: Connection) -> Dict[str, Any]:
    """The HELLO's JSON object."""
    while True:
        for kind, start, end in conn.frames():
            if kind != ord("H"):
                raise ValueError("expected HELLO, got frame type %r" % chr(kind))
            hello = json.loads(conn.data[start:end])
            if not isinstance(hello, dict):
                raise ValueError("HELLO is not a JSON object")
            return hello
        if not conn.read():
            raise EOFError("the hub closed the socket before HELLO")


def serve(conn: Connection, handle: Handler) -> int:
    """Answers messages until QUIT or end of file; returns the exit status."""
    halted = False
    read, message, answer = conn.read, conn.message, conn.answer
    while True:
        if not read():
            return 0
        quit_ = False
        for kind, start, end in conn.frames():
            if kind == 77:  # 'M'
                ticket, seq, attempt, received, msg_id, frames = message(start)
                if halted:
                    continue  # never answered: the hub keeps it
                topic = frames[0].decode("utf-8", "replace")
                headers = {"fanhub_seq": seq, "fanhub_attempt": attempt,
                           "fanhub_received_ns": received}
                try:
                    verdict, reason = handle(topic, msg_id, headers, frames)
                except fm.Halt as e:
                    halted = True
                    if e.done:
                        conn.answer(ticket, OK, "")
                    conn.send_json(b"X", {"reason": str(e)})
                    conn.flush()
                    continue
                answer(ticket, verdict, reason)
            elif kind == 81:  # 'Q'
                quit_ = True
            else:
                raise ValueError("unexpected frame type %r" % chr(kind))
        conn.flush()
        if quit_:
            return 0


def negotiate(hello: Dict[str, Any]) -> int:
    """The protocol READY speaks: the hub's, when this runner speaks it."""
    protocol = hello.get("protocol")
    if not isinstance(protocol, int) or isinstance(protocol, bool) or protocol < min(PROTOCOLS):
        raise ValueError("the hub speaks protocol %r, this runner %s"
                         % (protocol, " and ".join(map(str, PROTOCOLS))))
    return min(protocol, PROTOCOL)


def deployed_config(path: str) -> Dict[str, Any]:
    """A config.toml moved in unchanged (fedora_messaging: on the
    consumer): its log_config applied, FEDORA_MESSAGING_CONF naming it
    (the real package's conf loads it), its consumer_config returned."""
    settings = fm_config.load(path)
    if settings["errors"]:
        raise ValueError("%s: %s" % (path, "; ".join(settings["errors"])))
    os.environ["FEDORA_MESSAGING_CONF"] = path
    logging.config.dictConfig(settings["log_config"])
    config: Dict[str, Any] = settings["consumer_config"]
    return config


def start(conn: Connection, hello: Dict[str, Any]) -> Any:
    options = hello.get("options") or {}
    conn.protocol = negotiate(hello)
    fanhub_worker.config = options.get("config") or {}
    if options.get("fedora_messaging"):
        fanhub_worker.config = deployed_config(options["fedora_messaging"])
    add_paths(options.get("path"))  # before the stand-ins: a package there is the real one
    compat.install(fanhub_worker.config)
    fm.set_consumer_config(fanhub_worker.config)
    return make_handler(options, hello.get("consumer"))


def stop(consumer: Any) -> None:
    try:
        consumer.stop()
    except Exception as e:
        logging.getLogger("fanhub_worker").error(
            "stopping the consumer: %s", "".join(traceback.format_exception(
                type(e), e, e.__traceback__)).rstrip())


def main() -> int:
    # The socket moves to a descriptor that processes the consumer starts
    # do not inherit (os.dup's are not inheritable): one that outlived the
    # worker would keep its socket open.
    hub_fd = int(os.environ.get("FANHUB_WORKER_FD", "3"))
    fd = os.dup(hub_fd)
    os.close(hub_fd)
    conn = Connection(fd)
    # print() goes to the hub's log line by line; fd 1 is not the protocol's.
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None:
        reconfigure(line_buffering=True)
    logging.basicConfig(level=logging.INFO, handlers=[LogHandler(conn)], format="%(message)s")
    hello = handshake(conn)
    options = hello.get("options") or {}
    try:
        consumer = start(conn, hello)
    except BaseException as e:
        traceback.print_exc()  # before ERROR: the hub stops reading at it
        sys.stderr.flush()
        error: Dict[str, Any] = {"error": "%s: %s" % (options.get("callable"), last_line(e))}
        if isinstance(e, StartFailed):
            error = {"error": "%s: %s" % (options.get("callable"), e), "retry": True}
        conn.send_json(b"E", error)
        conn.flush()
        return 1
    conn.send_json(b"R", {"protocol": conn.protocol, "name": options.get("callable", "?"),
                          "version": "fanhub_worker %s, Python %s" % (
                              fanhub_worker.__version__, sys.version.split()[0])})
    conn.flush()
    fanhub_worker._connection = conn
    conn.start_flusher(FLUSH_S)
    try:
        return serve(conn, consumer)
    finally:
        stop(consumer)
        try:
            conn.flush()  # what stop() logged or published
        except OSError:
            pass  # the hub is gone
