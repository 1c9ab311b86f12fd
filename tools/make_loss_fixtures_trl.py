#!/usr/bin/env python3
"""Writes tests/fixtures/loss/loss_cases.json and loss_option_cases.json from TRL's own loss code:
GRPOTrainer._compute_loss (trl/trainer/grpo_trainer.py) run on CPU on the fixed batch of
tools/make_loss_fixtures.py (loss_cases(): its inputs, options and case names), its gradient
d loss / d logp (and d loss / d entropy) taken by autograd through TRL's code. Each case's "source"
names the trl and torch versions that produced it. Every grpo loss type (grpo, bnpo, dr_grpo, dapo,
cispo, sapo) and option (GSPO's importance_sampling_level = sequence, delta, top_entropy_quantile,
entropy_coef, the vLLM importance-sampling correction) is a TRL one, so every case comes from TRL;
TRL's vespo and luspo are not grpo's (refused by name).

How: the trainer is made with GRPOTrainer.__new__ (no model, no dataset), given a GRPOConfig and
the attributes GRPOTrainer.__init__ sets from it that _compute_loss reads, a single-process CPU
accelerate.Accelerator, and a _get_per_token_logps_and_entropies that returns the case's logp and
entropy as leaf tensors (what the policy's forward would give). compute_loss(model, inputs) then
runs TRL's code unchanged; the metrics are read from trainer._metrics["train"].

Not from TRL's code, and why:
  - is_w (the importance-sampling weights): TRL computes them in _generate_and_score_completions,
    which needs a vLLM generation; they come from make_loss_fixtures.is_weights (a transcription of
    that block, with no lower bound) and are passed to _compute_loss as
    inputs["importance_sampling_ratio"], [N,1] for the sequence modes as TRL makes them.
  - policy_loss: TRL logs it only when the entropy bonus is on; otherwise it is the returned loss
    times TRL's normaliser (current_gradient_accumulation_steps for grpo/bnpo/dr_grpo/sapo, 1 for
    dapo/cispo, whose normaliser holds steps_per_generation = gradient_accumulation_steps).
  - entropy_bonus: TRL does not log it; the bonus is linear in the entropies, so it is
    -sum(entropy * d loss / d entropy) / entropy_coef, from TRL's gradient.
  - n_tokens: the mask's sum (a count, not a TRL metric).
  - entropy: a case without entropies passes zeros (TRL always computes them); grpo logs NaN then.

Settings where grpo follows a TRL option that is not TRL 1.16's default:
  - use_bias_correction_kl = False (TRL 1.16 defaults to True: the KL term times the ratio); grpo
    has no such option and computes the plain k3 KL.
  - float64 throughout (torch's default dtype set by make_loss_fixtures), as core/train/loss.c
    computes in double; TRL takes the entropy quantile in float32 (.float()), as it does here.

Each case is also computed by make_loss_fixtures.loss_ref (the transcription of TRL f2cd57710ae3);
the largest difference per case is printed, and one above 1e-9 relative (1.2e-7 for the clip
ratios, which TRL takes in float32) stops the tool. The one change between the two TRLs that
this batch shows: the entropy bonus of dapo and cispo, sum(entropy M) / num_items_in_batch at
f2cd57710ae3, is the mean entropy, sum(entropy M) / sum(M) / grad accumulation steps, for every
loss type in TRL 1.16; the transcription and core/train/loss.c follow TRL 1.16.

Needs trl and torch (CPU is enough), e.g. python3 -m venv /tmp/venv-trl &&
/tmp/venv-trl/bin/pip install torch trl. Run from the repository root:
/tmp/venv-trl/bin/python tools/make_loss_fixtures_trl.py
"""
import math
import os
import sys
import tempfile
from collections import defaultdict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_loss_fixtures as mlf  # noqa: E402  (sets torch's default dtype to float64)

import trl  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

SOURCE = (f"trl {trl.__version__} GRPOTrainer._compute_loss, torch {torch.__version__} "
          "(tools/make_loss_fixtures_trl.py)")
GLOBAL_TYPES = ("dapo", "cispo")  # normalised by num_items_in_batch, not by grad accumulation
TMP = tempfile.mkdtemp(prefix="trl-loss-")


def config(c):
    """The GRPOConfig of a case (TRL's own defaults for everything the case does not set)."""
    delta = c["delta"]
    return GRPOConfig(
        output_dir=TMP, use_cpu=True, report_to=[], loss_type=c["type"], beta=c["beta"],
        epsilon=c["epsilon_low"], epsilon_high=c["epsilon_high"],
        delta=delta if delta > 0 else None,
        importance_sampling_level=c.get("importance_sampling_level", "token"),
        sapo_temperature_pos=c.get("sapo_temperature_pos", 1.0),
        sapo_temperature_neg=c.get("sapo_temperature_neg", 1.05),
        top_entropy_quantile=c.get("top_entropy_quantile", 1.0),
        entropy_coef=c.get("entropy_coef", 0.0),
        gradient_accumulation_steps=c["grad_accum_steps"],
        max_completion_length=c["max_completion_length"] or c["T"],
        per_device_train_batch_size=c["N"], num_generations=2,
        use_bias_correction_kl=False)


def trainer(c, logp, ent):
    """A GRPOTrainer with the state _compute_loss reads, set as GRPOTrainer.__init__ sets it."""
    args = config(c)  # (TrainingArguments resets accelerate's state: the Accelerator comes after)
    t = GRPOTrainer.__new__(GRPOTrainer)
    t.args = args
    for name in ("max_completion_length", "use_vllm", "vllm_importance_sampling_correction",
                 "vllm_importance_sampling_mode", "loss_type", "importance_sampling_level",
                 "off_policy_mask_threshold", "top_entropy_quantile", "entropy_coef",
                 "use_adaptive_entropy", "beta"):
        setattr(t, name, getattr(args, name))
    t.epsilon_low = args.epsilon
    t.epsilon_high = args.epsilon_high if args.epsilon_high is not None else args.epsilon
    t.router_aux_loss_coef, t.aux_loss_enabled = 0.0, False  # a dense model: no router
    t._entropy_bonus_enabled = t.entropy_coef != 0.0 or t.use_adaptive_entropy
    t._last_world_entropy, t._entropy_window_stats = float("inf"), None
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    t.accelerator = Accelerator(cpu=True)
    t.model = torch.nn.Module()  # .training is True: TRL's "train" mode
    t.current_gradient_accumulation_steps = c["grad_accum_steps"]
    if c.get("sampling_logp") is not None:  # samples drawn by another model (vLLM in TRL)
        t.use_vllm, t.vllm_importance_sampling_correction = True, True
        t.vllm_importance_sampling_mode = c["is_mode"]

    def per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep, **kw):
        assert logits_to_keep == logp.shape[1] and kw.get("compute_entropy"), kw
        return logp, ent, None

    t._get_per_token_logps_and_entropies = per_token_logps_and_entropies
    return t


def trl_expect(c):
    """The case's expected values from TRL's compute_loss (see the module's docstring)."""
    N, T = c["N"], c["T"]
    logp = torch.tensor(c["logp"]).view(N, T).requires_grad_(True)
    ent = torch.tensor(c["entropy"] or [0.0] * (N * T)).view(N, T)
    coef = c.get("entropy_coef", 0.0)
    if coef != 0.0:
        ent.requires_grad_(True)
    mask_f = torch.tensor(c["mask"]).view(N, T)
    mask = mask_f.to(torch.int32)  # TRL's completion_mask is an int tensor
    inputs = dict(prompt_ids=torch.zeros(N, 1, dtype=torch.long),
                  prompt_mask=torch.ones(N, 1, dtype=torch.int32),
                  completion_ids=torch.zeros(N, T, dtype=torch.long), completion_mask=mask,
                  advantages=torch.tensor(c["adv"]),
                  num_items_in_batch=torch.tensor(float(c["num_items_in_batch"])))
    old = None if c["old_logp"] is None else torch.tensor(c["old_logp"]).view(N, T)
    if old is not None:
        inputs["old_per_token_logps"] = old
    if c["ref_logp"] is not None:
        inputs["ref_per_token_logps"] = torch.tensor(c["ref_logp"]).view(N, T)
    is_w = mlf.is_weights(c, logp.detach() if old is None else old, mask_f)
    if is_w is not None:
        seq = c["is_mode"].startswith("sequence")
        inputs["importance_sampling_ratio"] = is_w[:, :1].clone() if seq else is_w
    t = trainer(c, logp, ent)
    loss = t.compute_loss(t.model, inputs)
    loss.backward()
    m = {k: v[-1] for k, v in t._metrics["train"].items()}
    nan = float("nan")
    e = dict(loss=loss.item())
    if "policy_loss" in m:
        e["policy_loss"] = m["policy_loss"]
    else:
        accum = t.current_gradient_accumulation_steps
        e["policy_loss"] = loss.item() * (1 if c["type"] in GLOBAL_TYPES else accum)
    e["dlogp"] = mlf.js(logp.grad)
    e["kl"] = m.get("kl", nan)
    e["entropy"] = m["entropy"] if c["entropy"] else nan
    for key, trl_key in (("clip_low_mean", "clip_ratio/low_mean"),
                         ("clip_high_mean", "clip_ratio/high_mean"),
                         ("clip_region_mean", "clip_ratio/region_mean"),
                         ("clip_low_min", "clip_ratio/low_min"),
                         ("clip_high_max", "clip_ratio/high_max"),
                         ("cispo_clip_ratio", "cispo_clip_ratio")):
        e[key] = m.get(trl_key, nan)
    e["n_tokens"] = mask_f.sum().item()
    if is_w is not None:
        e["is_w"] = mlf.js(is_w * mask_f)
    if coef != 0.0:
        e["entropy_bonus"] = (-(ent.detach() * ent.grad).sum() / coef).item()
        e["dentropy"] = mlf.js(ent.grad)
    return {k: v if isinstance(v, list) else mlf.js(v) for k, v in e.items()}


FLOAT32_KEYS = ("clip_low_mean", "clip_high_mean", "clip_region_mean", "clip_low_min",
                "clip_high_max", "cispo_clip_ratio")


def max_difference(a, b, keys):
    """The largest |a - b| / max(|b|, 1e-12) over keys (NaN equal to NaN; differences under
    1e-15 count as 0), and the key where it is."""
    worst, where = 0.0, ""
    for k in keys:
        xs = a[k] if isinstance(a[k], list) else [a[k]]
        ys = b[k] if isinstance(b[k], list) else [b[k]]
        for x, y in zip(xs, ys):
            if x is None or y is None:
                d = 0.0 if x is None and y is None else math.inf
            else:
                d = abs(x - y) / max(abs(y), 1e-12) if abs(x - y) > 1e-15 else 0.0
            if d > worst:
                worst, where = d, k
    return worst, where


def expect_and_compare(c):
    """TRL's expected values, checked against the transcription's: 1e-9 relative, 1.2e-7 for the
    clip ratios TRL takes in float32."""
    e = trl_expect(c)
    ref = mlf.loss_ref(dict(c))
    keys = e.keys() & ref.keys()
    d64, k64 = max_difference(e, ref, [k for k in keys if k not in FLOAT32_KEYS])
    d32, k32 = max_difference(e, ref, [k for k in keys if k in FLOAT32_KEYS])
    print(f"  {c['name']:36s} vs transcription: {d64:.1e} ({k64 or '-'}), "
          f"clip ratios {d32:.1e}")
    if d64 > 1e-9 or d32 > 1.2e-7:
        sys.exit(f"{c['name']}: TRL and the transcription differ: {k64 or k32}")
    return e


if __name__ == "__main__":
    print(SOURCE)
    mlf.loss_fixtures(expect=expect_and_compare, source=lambda c: SOURCE)
