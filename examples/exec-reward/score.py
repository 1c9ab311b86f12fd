#!/usr/bin/env python3
"""An exec reward for grpo (protocol: sdk/EXEC_PROTOCOL.md).

Reward: 1.0 when the completion's <answer>...</answer> equals the row's "answer" field, 0.0 when
it differs, null (no opinion) when the row has no answer. Run under grpo with (from a run file
in the repository root; paths are relative to the run file's directory)
    [reward.exact]
    plugin = builtin.exec
    command = python3
    command = examples/exec-reward/score.py
"""
import json
import re
import sys

ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def score(sample):
    gold = sample.get("fields", {}).get("answer")
    if gold is None:
        return None
    found = ANSWER.findall(sample["completion"])
    return 1.0 if found and found[-1].strip() == str(gold).strip() else 0.0


for line in sys.stdin:
    request = json.loads(line)
    rewards = [score(s) for s in request["samples"]]
    # The reply echoes the request's id: grpo matches replies to requests by it.
    print(json.dumps({"id": request["id"], "rewards": rewards}), flush=True)
