"""Stand-ins for the packages a fedmsg, Moksha or fedora-messaging
consumer imports, installed only where the real package is not importable
(after the consumer's `path` is on sys.path), so that such a consumer runs
unchanged:

  moksha.hub.api.consumer.Consumer
      mirrors moksha.hub/moksha/hub/api/consumer.py of mokshaproject/moksha
      at 08b3f668a9a3ca45fe49174eaace7b89bb995a92: __init__ subscribes
      _consume_json (or _consume) through hub.subscribe for each topic and
      reads moksha.blocking_mode; _consume_json -> _consume -> _do_work
      run validate, pre_consume, consume, post_consume and return True
      (handled) or False (validate or consume raised, logged);
      send_message goes to hub.send_message; stop() calls hub.close().
      No SQLAlchemy `app`, no monitoring.
  fedmsg.consumers.FedmsgConsumer
      mirrors fedmsg/consumers/__init__.py of fedora-infra/fedmsg at
      6583d58b10a0e304f79991d247fad9048b01253e: config_key required and
      honoured (a consumer whose key is not true is left uninitialised);
      validate wraps a body that is no envelope and checks the topic
      against the envelope's; a message it refuses (RuntimeWarning) makes
      _consume return None. Signatures are not checked here: with
      validate_signatures true it refuses to start (the hub checks them:
      bus.validate_signatures). No replay, status file or datagrepper
      backlog.
  fedmsg.publish(topic=None, msg=None, modname=None, **kw)
      mirrors fedmsg/core.py's FedMsgContext.publish (same commit): the
      topic is topic_prefix.environment.modname.topic (fedmsg's defaults
      org.fedoraproject and dev, from options.config), the msg its JSON;
      the hub wraps the fedmsg envelope when the consumer's
      `publish: {envelope: fedmsg}` asks.
  fedora_messaging.exceptions: Nack, Drop, HaltConsumer (fanhub_worker's)
  fedora_messaging.config.conf: {"consumer_config": options.config}
  fedora_messaging.api: consume and twisted_consume are not offered: the
      hub is what calls the callable.

Nothing else of those packages is imitated.
"""
import inspect
import json
import logging
import queue
import sys
import threading
import time
import types
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional

import fanhub_worker
from fanhub_worker import Drop, HaltConsumer, Nack
from fanhub_worker.protocol import loads

log = logging.getLogger("moksha.hub")

# fedmsg.config's defaults (fedmsg/config.py, `defaults`) for what publish reads.
FEDMSG_DEFAULTS = {"topic_prefix": "org.fedoraproject", "environment": "dev"}


def asbool(value: Any) -> bool:
    """moksha.common.lib.converters.asbool: "true", "yes", "on", "y",
    "t", "1" are true, "false", "no", "off", "n", "f", "0", "" false."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "yes", "on", "y", "t", "1"):
            return True
        if text in ("false", "no", "off", "n", "f", "0", ""):
            return False
        raise ValueError("String is not true/false: %r" % value)
    return bool(value)


def iterate(obj: Any) -> Iterable[Any]:
    """kitchen.iterutils.iterate: a string (or anything not iterable) is
    one item."""
    if isinstance(obj, (str, bytes)) or not hasattr(obj, "__iter__"):
        return [obj]
    items: Iterable[Any] = obj
    return items


class Consumer:
    """moksha.hub.api.consumer.Consumer, as far as a consumer run by
    fanhub needs one (see the module's text)."""

    topic: Any = ""
    jsonify = True
    _initialized = False
    _exception_count = 0

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.log = log
        self.incoming: "queue.Queue[Any]" = queue.Queue()
        self.headcount_in = self.headcount_out = 0
        self._times: Deque[float] = deque(maxlen=1024)
        callback = self._consume_json if self.jsonify else self._consume
        for topic in iterate(self.topic):
            log.debug("Subscribing to consumer topic %s", topic)
            self.hub.subscribe(topic, callback)
        self.engine = self.DBSession = None
        self.blocking_mode = asbool(self.hub.config.get("moksha.blocking_mode", False))
        if not self.blocking_mode:
            self.N = int(self.hub.config.get("moksha.workers_per_consumer", 1))
            for _ in range(self.N):
                threading.Thread(target=self._work_loop, daemon=True).start()
        self._initialized = True

    def _consume_json(self, message: Any) -> Optional[bool]:
        try:
            body = loads(message.body)
        except Exception:
            log.debug("Unable to decode message body to JSON: %r", message.body)
            body = message.body
        return self._consume({"body": body, "topic": getattr(message, "topic", None)})

    def _consume(self, message: Any) -> Optional[bool]:
        self.headcount_in += 1
        if self.blocking_mode:
            return self._do_work(message)
        self.incoming.put(message)
        return None

    def _work_loop(self) -> None:
        while True:
            message = self.incoming.get()
            if message is StopIteration:
                break
            self._do_work(message)

    def _do_work(self, message: Any) -> bool:
        self.headcount_out += 1
        start = time.time()
        handled = True
        try:
            self.validate(message)
        except Exception as e:
            log.warning("Received invalid message %r", e)
            return False
        try:
            self.pre_consume(message)
        except Exception:
            self.log.exception(message)
        try:
            self.consume(message)
        except Exception:
            handled = False
            self.log.exception(message)
            self._exception_count += 1
        try:
            self.post_consume(message)
        except Exception:
            self.log.exception(message)
        self._times.append(time.time() - start)
        return handled

    def validate(self, message: Any) -> None:
        pass

    def pre_consume(self, message: Any) -> None:
        pass

    def consume(self, message: Any) -> None:
        raise NotImplementedError

    def post_consume(self, message: Any) -> None:
        pass

    def send_message(self, topic: str, message: Any) -> None:
        try:
            self.hub.send_message(topic, message)
        except Exception as e:
            log.error("Cannot send message: %s", e)

    def stop(self) -> None:
        for _ in range(getattr(self, "N", 0)):
            self.incoming.put(StopIteration)
        if hasattr(self, "hub"):
            self.hub.close()


class FedmsgConsumer(Consumer):
    """fedmsg.consumers.FedmsgConsumer, as far as a consumer run by fanhub
    needs one (see the module's text)."""

    validate_signatures: Optional[bool] = None
    config_key: Optional[str] = None

    def __init__(self, hub: Any) -> None:
        module = inspect.getmodule(self)
        name = "%s:%s" % (module.__name__ if module else "?", type(self).__name__)
        self.log = logging.getLogger("fedmsg.consumers")
        if not self.config_key:
            raise ValueError("%s must declare a 'config_key'" % name)
        if not hub.config.get(self.config_key, False):
            self.log.info("* disabled by config - %s", name)
            return
        super().__init__(hub)
        self.log = logging.getLogger("fedmsg.consumers")
        if self.validate_signatures is None:
            self.validate_signatures = self.hub.config["validate_signatures"]
        if self.validate_signatures:
            raise ValueError(
                "%s: validate_signatures is true, and checking fedmsg signatures needs the real "
                "fedmsg package: let the hub check them (bus.validate_signatures) and set "
                "validate_signatures: false in options.config" % name)

    def validate(self, message: Any) -> None:
        if hasattr(message, "__json__"):
            message = message.__json__()
            if isinstance(message["body"], str):
                message["body"] = loads(message["body"])
        if not isinstance(message["body"], dict) or "topic" not in message["body"]:
            message["body"] = {"topic": message.get("topic"), "msg": message["body"]}
        if not self.validate_signatures:
            return
        if not message["topic"] == message["body"]["topic"]:
            raise RuntimeWarning("Topic envelope mismatch.")

    def _consume(self, message: Any) -> Optional[bool]:
        try:
            self.validate(message)
        except RuntimeWarning as e:
            self.log.warning("Received invalid message %s", e)
            return None
        if isinstance(message, dict) and "headers" in message and "body" in message:
            message["body"]["headers"] = message["headers"]
        return super()._consume(message)


def fedmsg_publish(topic: Optional[str] = None, msg: Any = None, modname: Optional[str] = None,
                   **kw: Any) -> None:
    """fedmsg.publish: msg (a dict, JSON-encoded) on
    topic_prefix.environment.modname.topic; modname guessed from the
    caller's top-level package, as fedmsg does."""
    conf = dict(FEDMSG_DEFAULTS)
    conf.update(fanhub_worker.config)
    topic = topic or "unspecified"
    msg = msg or {}
    if not modname:
        modname = "fedmsg"
        for frame in (f[0] for f in inspect.stack()[1:]):
            name = str(frame.f_globals.get("__name__", "")).split(".")[0]
            if name not in ("fedmsg", "fanhub_worker"):
                modname = name
                break
    full = ".".join([modname, topic])
    prefix = str(conf["topic_prefix"])
    if full[:len(prefix)] != prefix:
        full = ".".join([prefix, str(conf["environment"]), full])
    fanhub_worker.publish(full, json.dumps(msg))


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    setattr(module, "__fanhub_stand_in__", True)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    return module


def _missing(name: str) -> bool:
    try:
        __import__(name)
        return False
    except ImportError:
        return True


def _parents(names: List[str]) -> None:
    for name in names:
        if name not in sys.modules:
            _module(name)


def install(config: Dict[str, Any]) -> Dict[str, bool]:
    """Installs what is missing; says which package is the real one."""
    real = {"moksha": True, "fedmsg": True, "fedora_messaging": True}
    if _missing("moksha.hub.api.consumer"):
        real["moksha"] = False
        _parents(["moksha", "moksha.hub", "moksha.hub.api"])
        _module("moksha.hub.api.consumer", Consumer=Consumer)
        setattr(sys.modules["moksha.hub.api"], "Consumer", Consumer)
    if _missing("fedmsg.consumers"):
        real["fedmsg"] = False
        _parents(["fedmsg"])
        setattr(sys.modules["fedmsg"], "publish", fedmsg_publish)
        setattr(sys.modules["fedmsg"], "send_message", fedmsg_publish)
        _module("fedmsg.consumers", FedmsgConsumer=FedmsgConsumer)
    if _missing("fedora_messaging.exceptions"):
        real["fedora_messaging"] = False
        _parents(["fedora_messaging"])
        _module("fedora_messaging.exceptions", Nack=Nack, Drop=Drop, HaltConsumer=HaltConsumer)
    if _missing("fedora_messaging.config"):
        _module("fedora_messaging.config", conf={"consumer_config": config})
    return real

