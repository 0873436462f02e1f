"""The hub a Moksha or fedmsg-hub consumer class is made with, as
moksha's MokshaHub (moksha.hub/moksha/hub/hub.py) and its ZeroMQ backend
(moksha.hub/moksha/hub/zeromq/zeromq.py, mokshaproject/moksha at
08b3f668a9a3ca45fe49174eaace7b89bb995a92) are to a consumer, whether the
consumer's base class is the real moksha one or compat.py's stand-in:

  hub.config        options.config over HUB_DEFAULTS (moksha.blocking_mode
                    true: consume runs as the message arrives, on the
                    runner's thread, and Consumer.__init__ starts no
                    reactor threads)
  hub.subscribe(topic, callback)
                    recorded; each message goes to every callback with a
                    subscription whose topic matches it (topic_matcher),
                    once, as moksha's ZeroMQ backend calls it: with an
                    object with .topic and .body (text), so moksha's own
                    _consume_json -> _consume -> _do_work run
  hub.send_message(topic, message, jsonify=True)
                    publishes through the hub (worker protocol 2)
  hub.close()       at the end; consumer.stop() calls it

What the callbacks return is the answer: True OK, False FAIL (moksha
logged the traceback; RETRY with on_exception: retry), None DROP (fedmsg's
FedmsgConsumer refused the message: a signature or topic check). A
message that matches no subscription is DROP too.
"""
import fnmatch
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

import fanhub_worker
from fanhub_worker.protocol import DROP, OK, loads
from fanhub_worker.reasons import failed, last_line

Callback = Callable[[Any], Any]
Answer = Tuple[int, str]

# What the runner adds to options.config for hub.config, where it does not
# say: moksha's blocking mode; validate_signatures, which fedmsg reads
# without a default (the hub checks signatures: bus.validate_signatures);
# fedmsg.config's topic_prefix and environment.
HUB_DEFAULTS = {"moksha.blocking_mode": True, "validate_signatures": False,
                "topic_prefix": "org.fedoraproject", "environment": "dev"}


class ConfigKeyDisabled(Exception):
    pass


class ZMQMessage:
    """What moksha's ZeroMQ backend hands a callback."""

    def __init__(self, topic: str, body: str) -> None:
        self.topic = topic
        self.body = body

    def __json__(self) -> Dict[str, Any]:
        return {"topic": self.topic, "body": self.body}

    def __repr__(self) -> str:
        return "<ZMQMessage; topic: %r, body: %r>" % (self.topic, self.body)


def topic_matcher(topics: List[str]) -> Callable[[str], bool]:
    """Moksha's ZeroMQ subscription: a prefix, '*' taken out; or a
    pattern (fnmatch, as moksha's STOMP hub matched)."""
    prefixes = [t.replace("*", "") for t in topics]
    return lambda topic: any(topic.startswith(p) for p in prefixes) or any(
        fnmatch.fnmatchcase(topic, t) for t in topics)


def _matches_all(topic: Any) -> bool:
    return topic is None or topic in ("", "*", "#")


class Hub:
    """What moksha's hub is to a consumer (see the module's text)."""

    CACHE_MAX = 10000  # topics whose callbacks are remembered

    def __init__(self, config: Dict[str, Any]) -> None:
        self.config = config
        self.subscriptions: List[Tuple[Any, Callback]] = []
        self.matchers: List[Tuple[Callable[[str], bool], Callback]] = []
        self.cache: Dict[str, List[Callback]] = {}
        self.closed = False

    def subscribe(self, topic: Any, callback: Callback) -> None:
        self.subscriptions.append((topic, callback))
        self._compile()

    def unsubscribe(self, callback: Callback) -> None:
        self.subscriptions = [s for s in self.subscriptions if s[1] != callback]
        self._compile()

    def _compile(self) -> None:
        self.matchers = [((lambda topic: True) if _matches_all(sub) else topic_matcher([str(sub)]),
                          callback) for sub, callback in self.subscriptions]
        self.cache = {}

    def send_message(self, topic: Any, message: Any, jsonify: bool = True) -> None:
        """MokshaHub.send_message: message JSON-encoded when jsonify (a
        string too, as moksha does), on each topic of a list."""
        if jsonify:
            message = json.dumps(message)
        for one in topic if isinstance(topic, list) else [topic]:
            if isinstance(one, bytes):
                one = one.decode("utf-8")
            fanhub_worker.publish(one, message)

    def close(self) -> None:
        self.closed = True

    def callbacks(self, topic: str) -> List[Callback]:
        """The callbacks a message on topic goes to, each once, in the
        order they subscribed."""
        found = self.cache.get(topic)
        if found is None:
            found = []
            for matches, callback in self.matchers:
                if callback not in found and matches(topic):
                    found.append(callback)
            if len(self.cache) >= self.CACHE_MAX:
                self.cache = {}
            self.cache[topic] = found
        return found


def hub_config(options: Dict[str, Any]) -> Dict[str, Any]:
    config = dict(HUB_DEFAULTS)
    config.update(options.get("config") or {})
    blocking = config["moksha.blocking_mode"]
    if blocking in (False, 0) or (isinstance(blocking, str) and blocking.strip().lower() in (
            "false", "no", "off", "n", "f", "0", "")):
        raise ValueError("moksha.blocking_mode is false in options.config: fanhub runs a Moksha "
                         "consumer in blocking mode (workers: N for more at once)")
    return config


class MokshaConsumer:
    """A Moksha or fedmsg-hub consumer class, made once with a Hub, and
    the answers of what its callbacks return."""

    def __init__(self, cls: type, options: Dict[str, Any], fail: int) -> None:
        self.fail = fail
        self.hub = Hub(hub_config(options))
        key = getattr(cls, "config_key", None)
        if key is not None and not self.hub.config.get(key, False):
            raise ConfigKeyDisabled(
                "config_key %r is not true in the consumer's options.config, so the consumer "
                "is disabled (as fedmsg-hub would leave it)" % key)
        self.consumer = cls(self.hub)
        if getattr(self.consumer, "_initialized", True) is False:
            raise ConfigKeyDisabled("%s.%s did not initialise (fedmsg-hub would leave it out)"
                                    % (cls.__module__, cls.__name__))
        self.errors: Dict[str, BaseException] = {}
        for name in ("validate", "consume"):
            method = getattr(self.consumer, name, None)
            if callable(method):
                setattr(self.consumer, name, self._recording(name, method))
        if not self.hub.subscriptions:  # a class of its own, with consume()
            topics = getattr(self.consumer, "topic", None)
            for topic in [topics] if not isinstance(topics, (list, tuple)) else topics:
                self.hub.subscribe(topic, self._plain)

    def _recording(self, name: str, method: Callable[[Any], Any]) -> Callable[[Any], Any]:
        def call(message: Any) -> Any:
            try:
                return method(message)
            except Exception as e:
                self.errors[name] = e
                raise
        return call

    def _plain(self, message: ZMQMessage) -> Optional[bool]:
        """The callback of a class that subscribed nothing itself: as
        moksha's Consumer runs it, with its own validate, pre_consume and
        post_consume when it has them."""
        try:
            body = loads(message.body)
        except ValueError:
            body = message.body
        msg = {"topic": message.topic, "body": body}
        consumer = self.consumer
        try:
            if hasattr(consumer, "validate"):
                consumer.validate(msg)
        except Exception:
            return None
        try:
            if hasattr(consumer, "pre_consume"):
                consumer.pre_consume(msg)
            consumer.consume(msg)
            if hasattr(consumer, "post_consume"):
                consumer.post_consume(msg)
        except Exception as e:
            failed(e, None)
            return False
        return True

    def __call__(self, topic: str, msg_id: Optional[str], headers: Dict[str, Any],
                 frames: List[bytes]) -> Answer:
        callbacks = self.hub.callbacks(topic)
        if not callbacks:
            return DROP, "topic not in the class's topic"
        try:
            body = frames[1].decode("utf-8")
        except UnicodeDecodeError:
            return DROP, "the body is not UTF-8 text, which a Moksha consumer takes"
        self.errors = {}
        results = []
        for callback in callbacks:
            try:
                results.append(callback(ZMQMessage(topic, body)))
            except Exception as e:
                return self.fail, failed(e, msg_id)
        return self._answer(results)

    def _answer(self, results: List[Any]) -> Answer:
        if any(r is False for r in results):
            if "consume" in self.errors:
                return self.fail, last_line(self.errors["consume"])
            if "validate" in self.errors:
                return self.fail, "failed validation: " + last_line(self.errors["validate"])
            return self.fail, "not handled"
        if all(r is True for r in results):
            return OK, ""
        if "validate" in self.errors:
            return DROP, "refused: " + last_line(self.errors["validate"])
        return DROP, "not handled: the consumer's callback returned %r" % (
            next(r for r in results if r is not True),)

    def stop(self) -> None:
        """consumer.stop() (moksha's calls hub.close()), then hub.close()."""
        stop = getattr(self.consumer, "stop", None)
        if callable(stop):
            stop()
        if not self.hub.closed:
            self.hub.close()

