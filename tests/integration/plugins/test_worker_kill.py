"""SIGKILL of a random worker process every second while the hub works
through a run of messages with `workers: 4`: nothing is lost, duplicates
stay within the README's bound (per death, at most the messages the dead
worker held: max_pending), and every death is counted in restarts
(and in the plugin's own crashes)."""
import os
import random
import signal
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # fanhublib
import fanhublib as fh
import workerlib as wl

N = int(os.environ.get("FANHUB_WORKER_KILL_N", "100000"))
MAX_PENDING = 64


def test_sigkill_every_second_loses_nothing():
    wd = fh.Workdir()
    out = wd.file("records.jsonl")
    pub = fh.Publisher()
    extra = ("    workers: 4\n    max_pending: %d\n    queue: {capacity: %d}\n"
             "    retry: {max_attempts: 1000, initial_ms: 1, max_ms: 10}\n" % (MAX_PENDING, N + 10))
    config = "bus:\n  connect: [%s]\nconsumers:\n%s" % (
        pub.endpoint, wl.consumer("python", "killed", out, extra=extra))
    hub = fh.Hub(wd, config, env=wl.hub_env(out))
    rng = random.Random(3)
    kills = []
    stop = threading.Event()

    def killer():
        """A random worker every second, from the first message on."""
        while not stop.wait(1.0):
            pids = wl.worker_pids(hub)
            if not pids:
                continue
            try:
                os.kill(pids[rng.choice(sorted(pids))], signal.SIGKILL)
                kills.append(1)
            except ProcessLookupError:
                pass  # that one is being restarted

    thread = threading.Thread(target=killer)
    try:
        pub.wait_subscribed(hub=hub)
        thread.start()
        # In 20 batches, and after every 5th the killer's next kill is
        # waited for: at least 4 kills land while the workers are busy,
        # however fast this machine drains the rest.
        for b in range(20):
            for i in range(b * N // 20, (b + 1) * N // 20):
                pub.send("org.test.kill", '{"i":%d}' % i)
            if b % 5 == 4:
                fh.wait_for(lambda: len(kills) >= (b + 1) // 5, "kill %d" % ((b + 1) // 5),
                            hub=hub)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "killed")["completed"] == N,
                    "every message completed", hub=hub)
        stop.set()
        thread.join()
        kills = len(kills)
        fh.wait_for(lambda: hub.consumer(hub.stats(), "killed")["restarts"] >= kills,
                    "every death counted", hub=hub)
        c = hub.consumer(hub.stats(), "killed")
        assert c["completed"] == N and c["failed"] == 0 and c["in_flight"] == 0, c
        # The plugin's own figures (ABI 1.6): each kill a crash, none a
        # hang, and nothing left unanswered once all is done.
        own = lambda: hub.consumer(hub.stats(), "killed")["plugin_metrics"]
        fh.wait_for(lambda: own()["crashes"]["value"] >= kills and
                    own()["answers_pending"]["value"] == 0, "the worker's figures", hub=hub)
        assert own()["hangs"]["value"] == 0, own()
        assert hub.stop() == 0, hub.log()
    finally:
        stop.set()
        if thread.is_alive():
            thread.join()
        hub.kill()
        pub.close()
    dups = wl.check_each_once(wl.records(out), range(1, N + 1))
    print("%d messages, %d kills, %d restarts, %d duplicates" % (N, kills, c["restarts"], dups))
    assert kills >= 4, kills
    assert dups <= kills * MAX_PENDING, (dups, kills)
    wd.cleanup()


if __name__ == "__main__":
    fh.main([test_sigkill_every_second_loses_nothing])
