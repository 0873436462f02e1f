"""Stand-in (tests only) for fedmsg's FedmsgConsumer, following
fedora-infra/fedmsg fedmsg/consumers/__init__.py at
6583d58b10a0e304f79991d247fad9048b01253e in what the runner depends on:

- config_key must be set; when hub.config does not have it true,
  __init__ returns before moksha's (nothing subscribed, not initialised).
- validate_signatures, when the class leaves it None, is
  hub.config["validate_signatures"] (no default: fedmsg's configuration
  always has it).
- validate() wraps a body that is not an envelope, and with
  validate_signatures raises RuntimeWarning for a topic that is not the
  envelope's or a message fedmsg.crypto.validate refuses.
- _consume() returns None (no answer of "handled") for a message that
  validate refused, else what moksha's _consume returns."""
import logging

import fedmsg.crypto
import moksha.hub.api.consumer


class FedmsgConsumer(moksha.hub.api.consumer.Consumer):
    validate_signatures = None
    config_key = None

    def __init__(self, hub):
        self.log = logging.getLogger(__name__)
        if not self.config_key:
            raise ValueError("%s must declare a 'config_key'" % type(self).__name__)
        if not hub.config.get(self.config_key, False):
            self.log.info("* disabled by config - %s" % type(self).__name__)
            return
        super(FedmsgConsumer, self).__init__(hub)
        self.log = logging.getLogger(__name__)
        if self.validate_signatures is None:
            self.validate_signatures = self.hub.config["validate_signatures"]

    def validate(self, message):
        if hasattr(message, "__json__"):
            message = message.__json__()
        if not isinstance(message["body"], dict) or "topic" not in message["body"]:
            message["body"] = {"topic": message.get("topic"), "msg": message["body"]}
        if not self.validate_signatures:
            return
        if not message["topic"] == message["body"]["topic"]:
            raise RuntimeWarning("Topic envelope mismatch.")
        if not fedmsg.crypto.validate(message["body"], **self.hub.config):
            raise RuntimeWarning("Failed to authn message.")

    def _consume(self, message):
        try:
            self.validate(message)
        except RuntimeWarning as e:
            self.log.warning("Received invalid message {0}".format(e))
            return None
        return super(FedmsgConsumer, self)._consume(message)
