# For tests/integration/plugins/test_worker_upstream.py: publishing through the
# runner's own fedmsg stand-in (no fedmsg on the path) and
# fanhub_worker.publish.
import fedmsg

import fanhub_worker


def publisher(message):
    fedmsg.publish(topic="done", msg={"seen": message.body})
    fedmsg.publish(topic="named", msg="text", modname="mod")
    fanhub_worker.publish("org.test.raw", {"k": 1})
