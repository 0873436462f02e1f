"""Runs moksha-hub (moksha.hub.main, the real package, from a path given
on the command line) with one consumer, bench_moksha_consumer.Counter,
subscribed on a bound ZeroMQ endpoint, until SIGINT: the worker case's
moksha-hub rows (bench_worker.py).

usage: bench_moksha_hub.py MOKSHA_PATH BUS PUB_ENDPOINT REPORT COUNT MODE
  MOKSHA_PATH  a folder (or several, ':'-separated) where moksha.hub,
               moksha.common and their dependencies import from
  MODE         threads (moksha's default: the reactor thread queues each
               message for a worker thread) or blocking
               (moksha.blocking_mode: consume runs on the reactor thread)
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    path, bus, pub, report, count, mode = sys.argv[1:7]
    sys.path[:0] = [p for p in path.split(":") if p] + [HERE]
    import moksha.hub
    import bench_moksha_consumer
    config = {"zmq_enabled": True, "zmq_subscribe_method": "bind",
              "zmq_subscribe_endpoints": bus, "zmq_publish_endpoints": pub,
              "high_water_mark": 0, "zmq_strict": False,
              "moksha.blocking_mode": mode == "blocking",
              "moksha.workers_per_consumer": 1,
              "bench.count": int(count), "bench.report": report}
    moksha.hub.main(options=config, consumers=[bench_moksha_consumer.Counter],
                    framework=False)


if __name__ == "__main__":
    main()
