#!/usr/bin/env python3
"""Reference for core/train/optimizer.c: torch.optim.AdamW + clip_grad_norm_ + an LR schedule.

Writes tests/fixtures/optimizer/adamw.safetensors. Three tensors in two parameter groups (as a
trainer builds them: weights with weight decay, norms/biases without), three optimizer steps of
two accumulated micro-batch gradients each (grads summed, as loss.backward() twice does),
clip_grad_norm_(max_norm) over all parameters, and transformers' cosine schedule with warmup
(LambdaLR stepped after optimizer.step(), as HF Trainer does).

Tensors (float32):
  init.NAME            initial parameters
  grad.S.M.NAME        gradient of micro-batch M of step S
  after.S.NAME         parameters after step S
  grad_norm            (STEPS) total norm returned by clip_grad_norm_ (before clipping)
  lr                   (STEPS) learning rate used by step S
Metadata (exact decimal text): lr beta1 beta2 eps weight_decay max_grad_norm warmup total steps
micro.
"""
import os

import torch
from safetensors.torch import save_file
from transformers import get_cosine_schedule_with_warmup

STEPS, MICRO = 3, 2
LR, B1, B2, EPS, WD, MAX_NORM, WARMUP, TOTAL = 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.5, 1, 4

torch.manual_seed(0)
shapes = {"w1": (3, 4), "w2": (5,), "b": (4,)}
params = {k: torch.nn.Parameter(torch.randn(s)) for k, s in shapes.items()}
ref = {f"init.{k}": p.detach().clone() for k, p in params.items()}

opt = torch.optim.AdamW(
    [{"params": [params["w1"], params["w2"]], "weight_decay": WD},
     {"params": [params["b"]], "weight_decay": 0.0}],
    lr=LR, betas=(B1, B2), eps=EPS, foreach=False)
sched = get_cosine_schedule_with_warmup(opt, WARMUP, TOTAL)

norms, lrs = [], []
for s in range(STEPS):
    for p in params.values():
        p.grad = None
    for m in range(MICRO):
        scale = 3.0 if s == 1 else 0.3  # step 1 is clipped hard, the others barely or not
        for k, p in params.items():
            g = torch.randn(shapes[k]) * scale
            ref[f"grad.{s}.{m}.{k}"] = g.clone()
            p.grad = g if p.grad is None else p.grad + g
    norms.append(torch.nn.utils.clip_grad_norm_(list(params.values()), MAX_NORM).item())
    lrs.append(opt.param_groups[0]["lr"])
    opt.step()
    sched.step()
    for k, p in params.items():
        ref[f"after.{s}.{k}"] = p.detach().clone()

ref["grad_norm"] = torch.tensor(norms, dtype=torch.float64).float()
ref["lr"] = torch.tensor(lrs, dtype=torch.float64).float()
out = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "optimizer")
os.makedirs(out, exist_ok=True)
meta = {"lr": repr(LR), "beta1": repr(B1), "beta2": repr(B2), "eps": repr(EPS),
        "weight_decay": repr(WD), "max_grad_norm": repr(MAX_NORM), "warmup": str(WARMUP),
        "total": str(TOTAL), "steps": str(STEPS), "micro": str(MICRO)}
save_file({k: v.contiguous() for k, v in ref.items()}, os.path.join(out, "adamw.safetensors"),
          metadata=meta)
print("norms", norms, "lrs", lrs)
