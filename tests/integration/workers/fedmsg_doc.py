# The consumer of fedmsg's documentation ("Writing a consumer",
# fedmsg.readthedocs.io/en/stable/consuming.html), as written there, for
# tests/integration/plugins/test_worker_styles.py: it runs unchanged.
import fedmsg.consumers


class MyConsumer(fedmsg.consumers.FedmsgConsumer):
    # Set the topic to the fully qualified name of the topic you're interested in.
    topic = 'org.fedoraproject.prod.compose.rawhide.complete'
    config_key = 'myconsumer.enabled'

    def __init__(self, hub):
        super(MyConsumer, self).__init__(hub)
        # Now do any setup you need to, like connect to a database

    def consume(self, msg):
        # Do something with the message
        print(msg)
