"""Consumers for tests/integration/plugins/test_worker_upstream.py, on the
upstream stand-ins of tests/integration/upstream (on their `path:` too):
each records what it saw through upstream_record.record."""
import threading

import fanhub_worker
import fedmsg.consumers
from fedora_messaging import config
from fedora_messaging.exceptions import Drop, Nack
from moksha.hub.api.consumer import Consumer
from upstream_record import record


class Recorder(Consumer):
    """A bare Moksha consumer on two topics."""

    topic = ["org.test.a", "org.test.b*"]

    def validate(self, message):
        if isinstance(message["body"], dict) and message["body"].get("invalid"):
            raise ValueError("invalid on purpose")

    def consume(self, message):
        record("consume", topic=message["topic"], body=message["body"])
        if isinstance(message["body"], dict) and message["body"].get("fail"):
            raise RuntimeError("failed on purpose: %s" % message["body"]["i"])


class Signed(fedmsg.consumers.FedmsgConsumer):
    """A fedmsg consumer with signature checks (validate_signatures from
    hub.config)."""

    topic = "org.test.signed"
    config_key = "signed.enabled"

    def consume(self, message):
        record("consume", topic=message["topic"], msg_id=message["body"]["msg_id"])
        if message["body"]["msg"].get("fail"):
            raise RuntimeError("failed on purpose")


class Relay(fedmsg.consumers.FedmsgConsumer):
    """fedmsg's relay: every message sent on as it came, through
    send_message; "thread": true publishes from a thread of its own too."""

    topic = ""
    config_key = "relay.enabled"
    validate_signatures = False

    def consume(self, message):
        self.send_message("relayed." + message["topic"], message["body"])
        if message["body"].get("msg", {}).get("thread"):
            done = threading.Event()

            def publish():
                fanhub_worker.publish("from.thread", b"\xffraw")
                done.set()
            threading.Thread(target=publish).start()
            done.wait(10)


def fm_record(message):
    """A fedora-messaging callback."""
    record("fm", cls="%s.%s" % (type(message).__module__, type(message).__name__),
           summary=message.summary, severity=message.severity, text=str(message),
           id=message.id, queue=message.queue, consumer_config=config.conf["consumer_config"])
    if message.body.get("msg", {}).get("nack"):
        raise Nack()
    if message.body.get("msg", {}).get("drop"):
        raise Drop()

