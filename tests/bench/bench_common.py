"""bench_common.py - what bench.py and the modules of its report share:
the targets, the bound-by margin, the quiet-machine settings, the log.
"""
import sys
import time

# Targets (issues 16 and 12, and the earlier ones). Ratios are against the
# raw baseline of the same run, 100 B bodies, and count only when both the
# case and its baseline are receiver-bound.
TARGETS = {
    "k1_input": 0.95,         # K=1 sustained input >= 0.95x raw msg/s, zero loss (issue 30)
    "k4_deliveries": 0.45,    # K=4 deliveries/s >= 0.45x raw msg/s
    "k1_cpu": 1.05,           # hub CPU per delivery <= 1.05x raw CPU per msg (issue 30)
    "k4_cpu": 2.5,            # ... <= 2.5x at K=4
    "lat_p99": 1.2,           # 10k msg/s, K=8: p99 <= 1.2x raw p99
    "routing_cost": 1.3,      # 100 consumers, 3 match: CPU/delivery <= 1.3x 3 unrouted
    "scale_cost": 1.5,        # 1,000 consumers, 3 match: <= 1.5x 3 unrouted (issue 30)
    "idle_rss": 200 * 2**20,  # 1,000 idle consumers
    "check_rss": 2**30,       # fanhub check of 20,000 consumers: < 1 GiB ...
    "check_s": 10.0,          # ... and < 10 s
    "neighbour": 0.9,         # log consumer beside a spilling neighbour >= 0.9x alone
    "spill_vs_floor": 2.0,    # the spill's added hub CPU a message <= 2x spill_floor (issue 30)
    "metrics_cost": 0.03,     # scraping at 10 Hz costs <= 3 % throughput
    "mem_factor": 1.3,        # RSS <= 1.3x unique payload + 64 MiB
    "mem_slack": 64 * 2**20,
    "moksha_k1": 1.2e6,       # >= 30x Moksha's 40,000 msg/s (1 consumer)
    "moksha_k4": 0.92e6,      # >= 40x Moksha's 23,000 msg/s (4 consumers)
}

# A case is receiver-bound (its ratio means something) when the publisher
# offered at least this much more than the receiver took (issue 16).
BOUND_MARGIN = 1.2

# Waiting for an idle machine before each run (bench.wait_quiet): the
# longest wait, the budget for all of them, what counts as busy, and the
# busy fractions seen (for the report).
QUIET = {"max_wait": 10.0, "budget": 900.0, "threshold": 0.10, "samples": []}


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)
