#!/usr/bin/env python3
"""Reference logits processing from transformers' own LogitsProcessors, in generate's order.

For random logit rows and previous-token lists, applies RepetitionPenaltyLogitsProcessor,
TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper and MinPLogitsWarper (each only when
enabled, as GenerationConfig does) and writes the processed logits (-inf for removed tokens) to
tests/fixtures/sampling/processors.json. Usage: python3 tools/make_sampling_fixtures.py
"""
import json
import math
import os

import torch
from transformers.generation.logits_process import (MinPLogitsWarper, RepetitionPenaltyLogitsProcessor,
                                                    TemperatureLogitsWarper, TopKLogitsWarper,
                                                    TopPLogitsWarper)

V = 50
CASES = [
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0),
    dict(temperature=0.7, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0),
    dict(temperature=1.0, top_k=5, top_p=1.0, min_p=0.0, repetition_penalty=1.0),
    dict(temperature=1.0, top_k=0, top_p=0.9, min_p=0.0, repetition_penalty=1.0),
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.1, repetition_penalty=1.0),
    dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.3),
    dict(temperature=0.8, top_k=20, top_p=0.95, min_p=0.05, repetition_penalty=1.1),
    dict(temperature=1.3, top_k=10, top_p=0.5, min_p=0.0, repetition_penalty=1.5),
    dict(temperature=0.5, top_k=3, top_p=0.99, min_p=0.2, repetition_penalty=1.0),
]


def process(case, logits, prev):
    ids = torch.tensor([prev], dtype=torch.long)
    x = logits.clone().unsqueeze(0)
    if case["repetition_penalty"] != 1.0:
        x = RepetitionPenaltyLogitsProcessor(case["repetition_penalty"])(ids, x)
    if case["temperature"] != 1.0:
        x = TemperatureLogitsWarper(case["temperature"])(ids, x)
    if case["top_k"] > 0:
        x = TopKLogitsWarper(case["top_k"])(ids, x)
    if case["top_p"] < 1.0:
        x = TopPLogitsWarper(case["top_p"])(ids, x)
    if case["min_p"] > 0.0:
        x = MinPLogitsWarper(case["min_p"])(ids, x)
    return x[0]


def main():
    g = torch.Generator().manual_seed(1234)
    out = []
    for case in CASES:
        logits = torch.randn(V, generator=g) * 3
        prev = torch.randint(0, V, (12,), generator=g).tolist()  # repeats included on purpose
        y = process(case, logits, prev)
        out.append(dict(case, logits=logits.tolist(), prev=prev,
                        processed=[None if math.isinf(v) else v for v in y.tolist()]))
    path = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "sampling", "processors.json")
    with open(path, "w") as f:
        json.dump({"vocab": V, "cases": out}, f)
    print(f"wrote {len(out)} cases to {os.path.normpath(path)}")


if __name__ == "__main__":
    main()
