"""fanhub_worker: runs a Python consumer in a worker process of fanhub's
`python` plugin, speaking docs/worker-protocol.md on the socket the hub
hands it (fd 3). Standard library only; Python 3.9 or later.

What a consumer may use of it:

  publish(topic, body)   puts a message on the hub's `publish:` endpoints
                         (worker protocol 2; PublishError on a hub of 1)
  Nack, Drop, HaltConsumer
                         the exceptions a fedora-messaging style callable
                         raises to say what became of a message: where the
                         real fedora_messaging package is importable, its
                         own classes are these (so `from
                         fedora_messaging.exceptions import Nack` and `from
                         fanhub_worker import Nack` name one class); else
                         the runner offers these under
                         fedora_messaging.exceptions too (see compat.py).
  config                 the consumer's options.config
"""
import json
from typing import Any, Dict, Optional

from fanhub_worker.protocol import Connection, PublishError

__version__ = "2.0"
__all__ = ["Drop", "HaltConsumer", "Nack", "PublishError", "config", "publish"]

# The consumer's options.config, set by the runner before it imports the
# consumer (fedora-messaging style code reads it as
# fedora_messaging.config.conf["consumer_config"]).
config: Dict[str, Any] = {}

# The hub's socket, once the runner answered READY (None before, and in a
# process that is not a worker).
_connection: Optional[Connection] = None

try:  # the real ones, when installed
    from fedora_messaging.exceptions import Drop, HaltConsumer, Nack
except ImportError:
    class Nack(Exception):  # type: ignore[no-redef]
        """Not handled now: the hub tries the message again (RETRY)."""

    class Drop(Exception):  # type: ignore[no-redef]
        """Done without handling it (DROP, counted in skipped)."""

    class HaltConsumer(Exception):  # type: ignore[no-redef]
        """Stop the consumer (HALT): it takes no more messages until the
        hub starts again; the message is not answered."""

        def __init__(self, exit_code: int = 0, requeue: bool = False,
                     reason: Optional[str] = None, **kwargs: Any) -> None:
            super().__init__(reason or "")
            self.exit_code = exit_code
            self.requeue = requeue
            self.reason = reason


def encode_body(body: Any) -> bytes:
    """A body as publish() sends it: bytes as they are, text as UTF-8,
    anything else as its JSON."""
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def publish(topic: str, body: Any) -> None:
    """Publishes body on topic through the hub: the hub puts it on the
    consumer's `publish:` endpoints (wrapped in a fedmsg envelope when
    they ask for one) and counts it. Safe from any thread of the
    consumer. body: bytes, str, or any JSON-able object (json.dumps).
    Raises PublishError where there is no hub to publish through (a hub
    of worker protocol 1, a forked process, no worker at all) and
    ValueError for an empty topic or a message over 1 MiB."""
    if isinstance(topic, bytes):
        topic_bytes = topic
    elif isinstance(topic, str):
        topic_bytes = topic.encode("utf-8")
    else:
        raise TypeError("a topic is a str, not %s" % type(topic).__name__)
    conn = _connection
    if conn is None:
        raise PublishError("fanhub_worker.publish: not in a worker of a fanhub hub")
    conn.publish(topic_bytes, encode_body(body))
