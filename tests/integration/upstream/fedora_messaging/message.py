"""Stand-in (tests only) for fedora_messaging.message
(fedora-infra/fedora-messaging fedora_messaging/message.py at
48c5ccbc96cfbb12a73992d3a34699c87ef44db0) in what the runner depends on:
get_message(routing_key, properties, body) picks the Message class by the
fedora_messaging_schema header (a registry here, entry points upstream),
decodes the body with the content encoding and parses it as JSON
(ValidationError if it cannot), takes the severity header; Message keeps
its properties (id is message_id, _headers the headers) and has
str(message) (id, topic, headers, body), summary (the topic) and
severity."""
import json

from fedora_messaging.exceptions import ValidationError

INFO = 20


class Message:
    severity = INFO
    topic = ""

    def __init__(self, body=None, headers=None, topic=None, properties=None, severity=None):
        self.body = body or {}
        if topic:
            self.topic = topic
        if severity:
            self.severity = severity
        self._properties = properties
        self.queue = None

    @property
    def _headers(self):
        return self._properties.headers

    @property
    def id(self):
        return self._properties.message_id

    @property
    def summary(self):
        return self.topic

    def __repr__(self):
        return "%s(id=%r, topic=%r, body=%r)" % (type(self).__name__, self.id, self.topic,
                                                 self.body)

    def __str__(self):
        return "Id: %s\nTopic: %s\nHeaders: %s\nBody: %s" % (
            self.id, self.topic, json.dumps(self._headers, sort_keys=True),
            json.dumps(self.body, sort_keys=True))


class BuildMessage(Message):
    """A schema of the test's own: "upstream.build"."""

    @property
    def summary(self):
        return "build %s of %s" % (self.body["msg"]["build_id"], self.body["msg"]["owner"])


_classes = {"base.message": Message, "upstream.build": BuildMessage}


def get_message(routing_key, properties, body):
    if properties.headers is None:
        properties.headers = {}
    cls = _classes.get(properties.headers.get("fedora_messaging_schema"), Message)
    severity = properties.headers.get("fedora_messaging_severity", INFO)
    try:
        body = json.loads(body.decode(properties.content_encoding or "utf-8"))
    except ValueError as e:
        raise ValidationError(e) from e
    return cls(body=body, topic=routing_key, properties=properties, severity=severity)
