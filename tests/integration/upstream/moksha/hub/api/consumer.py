"""Stand-in (tests only) for moksha's Consumer, following
mokshaproject/moksha moksha.hub/moksha/hub/api/consumer.py at
08b3f668a9a3ca45fe49174eaace7b89bb995a92 in what the runner depends on:

- __init__ calls hub.subscribe(topic, callback) once per topic (a string
  is one topic), the callback being _consume_json (jsonify) or _consume;
  it reads moksha.blocking_mode from hub.config (default false) and,
  when false, would start worker threads: here that is refused, as the
  runner must never leave it false.
- _consume_json parses message.body (text) as JSON and reads
  message.topic; _consume -> _do_work returns True when handled, False
  when validate or consume raised (logged with its traceback).
- send_message(topic, message) calls hub.send_message(topic, message),
  logging what it raises; stop() calls hub.close().

Each of those calls is recorded (upstream_record.py)."""
import json
import logging

from upstream_record import record

log = logging.getLogger("moksha.hub")


def _truthy(value):
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "on", "y", "t", "1")
    return bool(value)


class Consumer(object):
    topic = ""
    jsonify = True
    _initialized = False

    def __init__(self, hub):
        self.hub = hub
        self.log = log
        callback = self._consume_json if self.jsonify else self._consume
        topics = [self.topic] if isinstance(self.topic, str) else list(self.topic)
        for topic in topics:
            record("subscribe", topic=topic, cls=type(self).__name__)
            self.hub.subscribe(topic, callback)
        self.blocking_mode = _truthy(self.hub.config.get("moksha.blocking_mode", False))
        record("blocking_mode", value=self.blocking_mode)
        if not self.blocking_mode:
            raise RuntimeError("not in blocking mode: moksha would start reactor threads here")
        self._initialized = True

    def _consume_json(self, message):
        if not isinstance(message.body, str):
            raise TypeError("moksha's zeromq backend hands a text body, not %r"
                            % type(message.body).__name__)
        try:
            body = json.loads(message.body)
        except ValueError:
            body = message.body
        return self._consume({"body": body, "topic": message.topic})

    def _consume(self, message):
        return self._do_work(message)

    def _do_work(self, message):
        try:
            self.validate(message)
        except Exception as e:
            log.warning("Received invalid message %r" % e)
            return False
        handled = True
        try:
            self.pre_consume(message)
        except Exception:
            self.log.exception(message)
        try:
            self.consume(message)
        except Exception:
            handled = False
            self.log.exception(message)
        try:
            self.post_consume(message)
        except Exception:
            self.log.exception(message)
        return handled

    def validate(self, message):
        pass

    def pre_consume(self, message):
        pass

    def consume(self, message):
        raise NotImplementedError

    def post_consume(self, message):
        pass

    def send_message(self, topic, message):
        try:
            self.hub.send_message(topic, message)
        except Exception as e:
            log.error("Cannot send message: %s" % e)

    def stop(self):
        record("stop", cls=type(self).__name__)
        self.hub.close()
        record("hub.close returned")
