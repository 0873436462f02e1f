"""The fedora-messaging side of the runner: a callback (a function, or a
class made once with no arguments) called with each message.

Where fedora_messaging.message is importable (the real package, or one on
the consumer's `path`), the message is that package's own, made by its
get_message(topic, properties, body) as its consumer makes it
(fedora_messaging/message.py and twisted/consumer.py of
fedora-infra/fedora-messaging at 48c5ccbc96cfbb12a73992d3a34699c87ef44db0):
a schema header picks the class, so str(message), .summary and .severity
are the schema's. The properties carry the headers the hub has (those of
the fedmsg envelope's `headers`, as bus.amqp's envelope puts the AMQP
ones), over those fedmsg-migration-tools' bridge set (base.message, INFO,
sent-at from the envelope's timestamp), and fanhub_seq, fanhub_attempt and
fanhub_received_ns; message_id is the msg_id. The body is the message's
JSON: on a fedmsg bus, the whole envelope, as that bridge sent it. A body
get_message refuses (not JSON) is DROP, as fedora-messaging nacks it
without requeue. Else the message is the runner's own Message.

fedora_messaging.config.conf["consumer_config"] is options.config: set into
the real LazyConfig as loaded (its DEFAULTS, or the file that
FEDORA_MESSAGING_CONF names when set), never reading
/etc/fedora-messaging/config.toml.

Nack is RETRY, Drop is DROP, HaltConsumer is HALT: fanhub_worker's own
classes and those of the fedora_messaging.exceptions the consumer sees.
"""
import copy
import datetime
import json
import os
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

import fanhub_worker
from fanhub_worker.protocol import DROP, OK, RETRY, loads
from fanhub_worker.reasons import failed, last_line

Answer = Tuple[int, str]


class Halt(Exception):
    """The consumer halts; `done`: the message in hand is answered OK
    first (a deployed consumer's HaltConsumer(requeue=False), which
    fedora-messaging acks)."""

    def __init__(self, reason: str, done: bool = False) -> None:
        super().__init__(reason)
        self.done = done


class Message:
    """A fedora-messaging style message, where fedora_messaging.message is
    not importable."""

    __slots__ = ("topic", "body", "id", "headers", "queue", "frames")
    severity = 20  # INFO

    def __init__(self, topic: str, body: Any, msg_id: Optional[str], headers: Dict[str, Any],
                 queue: Optional[str], frames: List[bytes]) -> None:
        self.topic = topic
        self.body = body
        self.id = msg_id
        self.headers = headers
        self.queue = queue
        self.frames = frames

    @property
    def summary(self) -> str:
        return self.topic

    def __repr__(self) -> str:
        return "Message(id=%r, topic=%r, body=%r)" % (self.id, self.topic, self.body)


class Properties:
    """pika.BasicProperties' fields that get_message and Message read,
    where pika is not importable."""

    def __init__(self, **fields: Any) -> None:
        self.content_type = fields.get("content_type")
        self.content_encoding = fields.get("content_encoding")
        self.headers = fields.get("headers")
        self.message_id = fields.get("message_id")
        self.delivery_mode = fields.get("delivery_mode")
        self.priority = fields.get("priority")


def parse_body(data: bytes) -> Any:
    try:
        return loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def set_consumer_config(config: Dict[str, Any]) -> None:
    """conf["consumer_config"] = options.config, in whatever
    fedora_messaging.config the consumer will import."""
    module = sys.modules.get("fedora_messaging.config")
    if module is None:
        return
    conf = getattr(module, "conf", None)
    if conf is None:
        return
    if type(conf) is dict:  # compat.py's stand-in
        conf["consumer_config"] = config
        return
    if not getattr(conf, "loaded", False):
        if os.environ.get("FEDORA_MESSAGING_CONF") and hasattr(conf, "load_config"):
            conf.load_config()
        else:
            conf.loaded = True
            dict.update(conf, copy.deepcopy(getattr(module, "DEFAULTS", {})))
    dict.__setitem__(conf, "consumer_config", config)


def _sent_at(envelope: Any) -> Optional[str]:
    stamp = envelope.get("timestamp") if isinstance(envelope, dict) else None
    if not isinstance(stamp, (int, float)):
        return None
    when = datetime.datetime.fromtimestamp(int(stamp), tz=datetime.timezone.utc)
    return when.isoformat()


def delivery_properties(frames: List[bytes]) -> Dict[str, Any]:
    """A deployed consumer's delivery (its own AMQP source): the AMQP
    properties, the hub's third frame (source_amqp.c)."""
    try:
        properties = json.loads(frames[2]) if len(frames) > 2 else {}
    except ValueError:
        properties = {}
    return properties if isinstance(properties, dict) else {}


def deployed_maker(queue: Optional[str]) -> Callable[..., Any]:
    """make(...) for a consumer moved in with its config.toml: the message
    made from the delivery's own properties and body, as
    fedora-messaging's consumer makes it."""
    try:
        from fedora_messaging.message import get_message
    except ImportError:
        get_message = None
    try:
        from pika import BasicProperties as props
    except ImportError:
        props = Properties

    def make(topic: str, msg_id: Optional[str], headers: Dict[str, Any],
             frames: List[bytes]) -> Any:
        amqp = delivery_properties(frames)
        amqp_headers = amqp.get("headers") or {}
        msg_id = amqp.get("message_id", msg_id)
        source = amqp.get("queue", queue)
        if get_message is None:
            return Message(topic, parse_body(frames[1]), msg_id, amqp_headers, source, frames)
        properties = props(content_type=amqp.get("content_type"),
                           content_encoding=amqp.get("content_encoding"),
                           headers=amqp_headers, message_id=msg_id,
                           delivery_mode=amqp.get("delivery_mode"),
                           priority=amqp.get("priority"))
        message = get_message(topic, properties, frames[1])
        message.queue = source
        return message
    return make


def message_maker(queue: Optional[str], deployed: bool = False) -> Callable[..., Any]:
    """make(topic, msg_id, headers, frames) -> the message a callback gets."""
    if deployed:
        return deployed_maker(queue)
    try:
        from fedora_messaging.message import get_message
    except ImportError:
        def plain(topic: str, msg_id: Optional[str], headers: Dict[str, Any],
                  frames: List[bytes]) -> Any:
            return Message(topic, parse_body(frames[1]), msg_id, headers, queue, frames)
        return plain
    try:
        from pika import BasicProperties as props  # the class fedora-messaging uses
    except ImportError:
        props = Properties

    def real(topic: str, msg_id: Optional[str], headers: Dict[str, Any],
             frames: List[bytes]) -> Any:
        body = frames[1]
        try:
            envelope = loads(body)
        except ValueError:
            envelope = None
        amqp = {"fedora_messaging_schema": "base.message", "fedora_messaging_severity": 20,
                "priority": 0}
        sent_at = _sent_at(envelope)
        if sent_at:
            amqp["sent-at"] = sent_at
        if isinstance(envelope, dict) and isinstance(envelope.get("headers"), dict):
            amqp.update(envelope["headers"])
        amqp.update(headers)
        properties = props(content_type="application/json", content_encoding="utf-8",
                           headers=amqp, message_id=msg_id, delivery_mode=2)
        message = get_message(topic, properties, body)
        message.queue = queue
        for name, value in (("headers", amqp), ("frames", frames)):
            try:
                setattr(message, name, value)  # fanhub's, beside _headers
            except AttributeError:
                pass
        return message
    return real


Errors = Tuple[Type[BaseException], ...]


def _classes(name: str) -> Errors:
    """fanhub_worker's exception class `name`, and that of the
    fedora_messaging.exceptions the consumer sees when another."""
    found: List[Type[BaseException]] = [getattr(fanhub_worker, name)]
    module = sys.modules.get("fedora_messaging.exceptions")
    other = getattr(module, name, None) if module is not None else None
    if isinstance(other, type) and issubclass(other, BaseException) and other not in found:
        found.append(other)
    return tuple(found)


def _validation_errors() -> Errors:
    module = sys.modules.get("fedora_messaging.exceptions")
    error = getattr(module, "ValidationError", None) if module is not None else None
    return (error,) if isinstance(error, type) and issubclass(error, BaseException) else ()


class Callback:
    """A fedora-messaging callback and the answers of what it raises."""

    def __init__(self, obj: Any, fail: int, queue: Optional[str], deployed: bool = False,
                 halt_on_exception: bool = False) -> None:
        self.call = obj() if isinstance(obj, type) else obj
        self.fail = fail
        # Moved in with its config.toml (fedora_messaging:): HaltConsumer's
        # requeue and an exception's halt are fedora-messaging's.
        self.deployed = deployed
        self.halt_on_exception = halt_on_exception
        self.make = message_maker(queue, deployed)
        self.nack: Errors = _classes("Nack")
        self.drop: Errors = _classes("Drop")
        self.halt: Errors = _classes("HaltConsumer")
        self.invalid: Errors = _validation_errors()

    def __call__(self, topic: str, msg_id: Optional[str], headers: Dict[str, Any],
                 frames: List[bytes]) -> Answer:
        try:
            message = self.make(topic, msg_id, headers, frames)
        except self.invalid as e:
            return DROP, "did not pass validation: " + last_line(e)
        try:
            self.call(message)
        except self.nack as e:
            return RETRY, last_line(e)
        except self.drop as e:
            return DROP, last_line(e)
        except self.halt as e:
            reason = getattr(e, "reason", None) or str(e) or "HaltConsumer"
            raise Halt(reason, self.deployed and not getattr(e, "requeue", False))
        except Exception as e:
            if self.halt_on_exception:  # fedora-messaging: requeue all, stop
                raise Halt("unexpected exception: " + failed(e, msg_id))
            return self.fail, failed(e, msg_id)
        return OK, ""

    def stop(self) -> None:
        pass
