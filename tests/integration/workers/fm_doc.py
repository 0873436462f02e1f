# The consumer of fedora-messaging's documentation ("Consumers" tutorial,
# fedora-messaging.readthedocs.io/en/stable/tutorial/consuming.html), as
# written there, for tests/integration/plugins/test_worker_styles.py: it runs
# unchanged, reading its settings from consumer_config.
import os

from fedora_messaging import config


class SaveMessage:
    """
    A fedora-messaging consumer that saves the message to a file.

    A single configuration key is used from fedora-messaging's
    "consumer_config" key, "path", which is where the consumer will
    save the messages::

        [consumer_config]
        path = "/tmp/fedora-messaging/messages.txt"
    """

    def __init__(self):
        """Perform some one-time initialization for the consumer."""
        self.path = config.conf["consumer_config"]["path"]

        # Ensure the path exists before the consumer starts
        if not os.path.exists(os.path.dirname(self.path)):
            os.mkdir(os.path.dirname(self.path))

    def __call__(self, message):
        """
        Invoked when a message is received by the consumer.

        Args:
            message (fedora_messaging.api.Message): The message from AMQP.
        """
        with open(self.path, "a") as fd:
            fd.write(str(message))


def printer_callback(message):
    # The callback of fedora-messaging's quick start: print the message.
    print(message)
