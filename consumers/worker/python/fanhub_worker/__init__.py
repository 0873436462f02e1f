"""fanhub_worker: runs a Python consumer in a worker process of fanhub's
`python` plugin, speaking docs/worker-protocol.md on the socket the hub
hands it (fd 3). Standard library only; Python 3.9 or later.

The exceptions a fedora-messaging style callable raises to say what became
of a message: where the real fedora_messaging package is importable, its
own classes are these (so `from fedora_messaging.exceptions import Nack`
and `from fanhub_worker import Nack` name one class); else the runner
offers these under fedora_messaging.exceptions too (see compat.py).
"""
__version__ = "1.0"

# The consumer's options.config, set by the runner before it imports the
# consumer (fedora-messaging style code reads it as
# fedora_messaging.config.conf["consumer_config"] where that is a stand-in).
config = {}

try:  # the real ones, when installed
    from fedora_messaging.exceptions import Drop, HaltConsumer, Nack  # noqa: F401
except ImportError:
    class Nack(Exception):
        """Not handled now: the hub tries the message again (RETRY)."""

    class Drop(Exception):
        """Done without handling it (DROP, counted in skipped)."""

    class HaltConsumer(Exception):
        """Stop the consumer (HALT): it takes no more messages until the
        hub starts again; the message is not answered."""

        def __init__(self, exit_code=0, requeue=False, reason=None, **kwargs):
            super().__init__(reason or "")
            self.exit_code = exit_code
            self.requeue = requeue
            self.reason = reason
