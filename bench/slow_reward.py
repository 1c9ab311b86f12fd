#!/usr/bin/env python3
"""slow_reward.py — an exec reward (sdk/EXEC_PROTOCOL.md) that waits SECONDS (default 0.05) per
sample before it answers: latency, not CPU (a remote judge's), for bench_grpo_step.py
--reward-latency. Every sample scores 0, so it changes no advantage."""
import json
import sys
import time

per = float(sys.argv[1]) if len(sys.argv) > 1 else 0.05
for line in sys.stdin:
    req = json.loads(line)
    n = len(req["samples"])
    time.sleep(per * n)
    sys.stdout.write(json.dumps({"id": req["id"], "rewards": [0.0] * n}) + "\n")
    sys.stdout.flush()
