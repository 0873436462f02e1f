"""The Perl worker of consumers/worker/examples/ (written from
docs/worker-protocol.md alone) passes the tests the Python runner passes:
ordering across four worker processes, and a poison message that kills
its worker (dead-lettered after max_crashes, the rest finished, another
consumer working throughout)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl

N_ORDERED = int(os.environ.get("FANHUB_WORKER_ORDERED", "100000"))


def test_ordering_across_four_perl_workers():
    wl.ordering("perl", N_ORDERED)


def test_a_poison_message_kills_a_perl_worker():
    wl.segfault("perl")


if __name__ == "__main__":
    fh.main([test_ordering_across_four_perl_workers, test_a_poison_message_kills_a_perl_worker])
