"""The worker case's consumer (tests/bench/bench_worker.py): a
fedora-messaging style callable that does nothing; the runner has parsed
the JSON body before the call, as for any consumer."""


def noop(message):
    pass
