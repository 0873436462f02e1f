# A Moksha consumer as Moksha's documentation shows one ("Consumers",
# moksha.readthedocs.io/en/latest/main/Consumers/), for
# tests/integration/plugins/test_worker_styles.py: it runs unchanged.
from moksha.hub.api.consumer import Consumer


class MyConsumer(Consumer):
    topic = 'org.fedoraproject.*.buildsys.build.state.change'

    def consume(self, message):
        self.log.info("%s: build %s" % (message['topic'], message['body']['msg']['build_id']))
