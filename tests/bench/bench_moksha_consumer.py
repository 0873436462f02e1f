"""The worker case's Moksha consumer (tests/bench/bench_worker.py): one
class, run unchanged under moksha-hub (bench_moksha_hub.py) and under
fanhub's runner (`plugin: python`). Its base class is moksha's
Consumer: the real one where moksha is importable, the runner's
stand-in otherwise (fanhub_worker/compat.py).

Each body is bench_pub's --json --seq object, {"i": N, "pad": "..."};
the consumer counts messages and checks that i goes up by one each
time (the order of a single publisher). Its hub config says
bench.count (messages to expect) and bench.report (a file): after the
last one it writes there one JSON object: count, out_of_order, t_first
and t_last (time.monotonic of the first and last message) and cpu_first
and cpu_last (getrusage of its own process, user + system seconds).
"""
import json
import os
import resource
import time

from moksha.hub.api.consumer import Consumer


def _cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Counter(Consumer):
    topic = "org.fanhub.bench"
    config_key = None

    def __init__(self, hub):
        super().__init__(hub)
        self.expect = int(hub.config.get("bench.count", 0))
        self.report = hub.config.get("bench.report")
        self.count = 0
        self.out_of_order = 0
        self.next = 0
        self.first = None

    def consume(self, message):
        i = message["body"]["i"]
        if self.count == 0:
            self.first = (time.monotonic(), _cpu())
        if i != self.next:
            self.out_of_order += 1
        self.next = i + 1
        self.count += 1
        if self.count == self.expect and self.report:
            with open(self.report + ".tmp", "w") as f:
                json.dump({"count": self.count, "out_of_order": self.out_of_order,
                           "t_first": self.first[0], "cpu_first": self.first[1],
                           "t_last": time.monotonic(), "cpu_last": _cpu()}, f)
            os.rename(self.report + ".tmp", self.report)
