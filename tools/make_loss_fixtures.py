#!/usr/bin/env python3
"""Writes tests/fixtures/loss/*.json: PyTorch reference values for core/reward_sum, advantage, loss,
schedule and clip.

The GRPO formulas are Hugging Face TRL's GRPOTrainer (trl/trainer/grpo_trainer.py, read at commit
f2cd57710ae3 of July 2026: _generate_and_score_completions for rewards/advantages, _compute_loss for
the loss and its metrics, its entropy bonus as of trl 1.16.0; trl/trainer/utils.py for
nanstd/nanmin/nanmax). Those formulas are
written below in PyTorch (in float64) and the gradient is taken by autograd, independently of the
analytic gradient in core/train/loss.c. MiniMind's options follow
jingyaogong/minimind trainer/train_grpo.py (7d877db for the clamp + batch re-normalisation,
current HEAD for the biased std) and trainer/trainer_utils.py get_lr.

LR schedules come from transformers' own schedulers and torch's CosineAnnealingLR (stepped
exactly as a trainer would), gradient clipping from torch.nn.utils.clip_grad_norm_.

The loss fixtures (loss_cases.json, loss_option_cases.json) are written by
tools/make_loss_fixtures_trl.py from TRL's own GRPOTrainer._compute_loss on the batch of
loss_cases() below; loss_ref, the transcription, is its cross-check (and what `python3
tools/make_loss_fixtures.py loss` writes when TRL cannot be installed: each case's "source" says
which produced it).

Inputs are rounded to float32 first (the C code reads float32), so both sides see the same numbers.
NaN is written as JSON null. Run from the repository root: python3 tools/make_loss_fixtures.py
[advantage|loss|schedule|clip ...] (default: all but loss)
"""
import json
import math
import os

import torch

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "loss")
torch.set_default_dtype(torch.float64)


def f32(t):
    return t.to(torch.float32).to(torch.float64)


def js(t):
    """A tensor or float as a JSON-able list/number, NaN as None, 9 significant digits for inputs
    (they are float32: 9 digits round-trip) and 17 for expected values."""
    if isinstance(t, torch.Tensor):
        t = t.detach().flatten().tolist()
        return [None if math.isnan(x) else float(x) for x in t]
    return None if t is None or math.isnan(t) else float(t)


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


# ---- rewards and advantages (TRL sum_then_normalize / normalize_then_sum) ----------------------
def nanstd(x, dim=None, unbiased=True):
    """TRL's nanstd (Bessel-corrected, NaN for fewer than 2 values); biased when unbiased=False."""
    if dim is None:
        x, dim = x.flatten(), 0
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True).to(x.dtype)
    if unbiased:
        var = var * torch.where(count > 1, count / (count - 1), torch.full_like(count, float("nan")))
    return torch.sqrt(var).squeeze(dim)


def advantages_ref(R, w, G, scale, unbiased, clip, renorm, agg):
    N, K = R.shape
    unscorable = torch.isnan(R).all(dim=1)
    if agg == "sum_then_normalize":
        r = (R * w.unsqueeze(0)).nansum(dim=1)
        r[unscorable] = float("nan")
        mean = torch.nanmean(r.view(-1, G), dim=1).repeat_interleave(G)
        if scale in ("group", "none"):
            std = nanstd(r.view(-1, G), 1, unbiased).repeat_interleave(G) if G > 1 else torch.zeros_like(r)
        else:
            std = nanstd(r, None, unbiased).expand_as(r) if N > 1 else torch.zeros_like(r)
        adv = r - mean
        if scale != "none":
            adv = adv / (std + 1e-4)
        zero = torch.isclose(std, torch.zeros_like(std))
    else:
        g = R.view(-1, G, K)
        mk = torch.nanmean(g, dim=1, keepdim=True)
        sk = nanstd(g, 1, unbiased).unsqueeze(1) if G > 1 else torch.zeros_like(mk)
        rk = ((g - mk) / (sk + 1e-4)).view(-1, K)
        r2 = (rk * w.unsqueeze(0)).nansum(dim=1)
        r2[unscorable] = float("nan")
        std = nanstd(r2, None, unbiased).expand_as(r2) if N > 1 else torch.zeros_like(r2)
        adv = (r2 - torch.nanmean(r2)) / (std + 1e-4)
        zero = torch.isclose(std, torch.zeros_like(std))
    if clip > 0:  # MiniMind 7d877db: torch.clamp(A, -10, 10)
        adv = torch.clamp(adv, -clip, clip)
    if renorm:  # MiniMind 7d877db: (A - A.mean()) / (A.std() + 1e-8); NaN-aware here
        adv = (adv - torch.nanmean(adv)) / (nanstd(adv) + 1e-8)
    adv = torch.nan_to_num(adv, nan=0.0)
    r = (R * w.unsqueeze(0)).nansum(dim=1)
    r[unscorable] = float("nan")
    return {
        "r": js(r), "adv": js(adv),
        "reward": js(torch.nanmean(r).item()), "reward_std": js(nanstd(r).item()),
        "frac_reward_zero_std": zero.to(torch.float64).mean().item(),
        "n_unscorable": int(unscorable.sum().item()),
        "func_mean": [js(torch.nanmean(R[:, k]).item()) for k in range(K)],
        "func_std": [js(nanstd(R[:, k]).item()) for k in range(K)],
    }


def advantage_cases():
    g = torch.Generator().manual_seed(1)
    B, G, K = 4, 4, 2
    R = f32(torch.randn(B * G, K, generator=g))
    R[0:4, 0] = 1.0                       # group 0: function 0 constant ...
    R[0:4, 1] = float("nan")              # ... function 1 silent: zero-std group
    R[5, :] = float("nan")                # an unscorable completion in group 1
    R[6, 1] = float("nan")                # a partly scored one
    R[8:12, 0] = float("nan")             # group 2: only function 1 speaks ...
    R[9:12, 1] = float("nan")             # ... and only for one member: NaN group std
    w = f32(torch.tensor([1.0, 0.5]))
    cases = []
    for agg in ("sum_then_normalize", "normalize_then_sum"):
        for scale in (("group", "batch", "none") if agg == "sum_then_normalize" else ("group",)):
            for unbiased in (1, 0):
                cases.append(dict(name=f"{agg}/{scale}/{'unbiased' if unbiased else 'biased'}",
                                  B=B, G=G, K=K, R=js(R), w=js(w), agg=agg, scale=scale,
                                  unbiased=unbiased, clip=0.0, renorm=0))
    cases.append(dict(name="clip1_renorm_with_nan", B=B, G=G, K=K, R=js(R), w=js(w),
                      agg="sum_then_normalize", scale="group", unbiased=1, clip=1.0, renorm=1))
    # MiniMind exactly (no NaN rewards, one summed reward): legacy 2510 and current.
    Rm = f32(torch.randn(3 * 6, 1, generator=g) * 2.0)
    Rm[6:12, 0] = 0.25  # a zero-std group
    wm = torch.ones(1)
    cases.append(dict(name="minimind_2510_clamp10_renorm", B=3, G=6, K=1, R=js(Rm), w=js(wm),
                      agg="sum_then_normalize", scale="group", unbiased=1, clip=10.0, renorm=1))
    cases.append(dict(name="minimind_current_biased", B=3, G=6, K=1, R=js(Rm), w=js(wm),
                      agg="sum_then_normalize", scale="group", unbiased=0, clip=0.0, renorm=0))
    cases.append(dict(name="single_generation", B=3, G=1, K=1, R=js(Rm[:3]), w=js(wm),
                      agg="sum_then_normalize", scale="group", unbiased=1, clip=0.0, renorm=0))
    for c in cases:
        Rt = torch.tensor([float("nan") if v is None else v for v in c["R"]]).view(-1, c["K"])
        c["expect"] = advantages_ref(Rt, torch.tensor(c["w"]), c["G"], c["scale"], c["unbiased"],
                                     c["clip"], c["renorm"], c["agg"])
    # A hand-checkable MiniMind check: the literal 7d877db expression on the same rewards.
    r = torch.tensor(cases[-3]["R"])
    gr = r.view(-1, 6)
    a = torch.clamp((r - gr.mean(1).repeat_interleave(6)) / (gr.std(1).repeat_interleave(6) + 1e-4), -10, 10)
    a = (a - a.mean()) / (a.std() + 1e-8)
    assert torch.allclose(a, torch.tensor(cases[-3]["expect"]["adv"]), rtol=0, atol=1e-12)
    a = (r - gr.mean(1).repeat_interleave(6)) / (gr.std(1, unbiased=False).repeat_interleave(6) + 1e-4)
    assert torch.allclose(a, torch.tensor(cases[-2]["expect"]["adv"]), rtol=0, atol=1e-12)
    write("advantage_cases.json", cases)


# ---- the loss (TRL _compute_loss) ------------------------------------------------------------
def high_entropy_mask(ent, mask, quantile):
    """TRL's get_high_entropy_mask with threshold 1 - top_entropy_quantile, one process. TRL runs
    torch.quantile on float32 entropies; here on float64, as core/train/loss.c computes it."""
    vals = ent[mask.bool()]
    if vals.numel() == 0:
        return torch.zeros_like(ent, dtype=torch.bool)
    thr = torch.quantile(vals, 1 - quantile)
    return ((ent * mask) >= thr) & mask.bool()


def is_weights(c, old, mask):
    """TRL's vllm_importance_sampling_correction weights (_generate_and_score_completions, no
    lower bound), [N,T] (a sequence mode's row weight repeated); None when the case has none."""
    if c.get("sampling_logp") is None:
        return None
    N, T = c["N"], c["T"]
    d = old - torch.tensor(c["sampling_logp"]).view(N, T)
    if c["is_mode"].startswith("sequence"):
        is_w = torch.exp((d * mask).sum(-1, keepdim=True)).expand(N, T)
    else:
        is_w = torch.exp(d)
    cap = c["is_cap"]
    if c["is_mode"].endswith("truncate"):
        return torch.clamp(is_w, max=cap)
    return torch.where(is_w <= cap, is_w, torch.zeros_like(is_w))


def loss_ref(c):
    N, T = c["N"], c["T"]
    logp = torch.tensor(c["logp"]).view(N, T).requires_grad_(True)
    old = logp.detach() if c["old_logp"] is None else torch.tensor(c["old_logp"]).view(N, T)
    mask = torch.tensor(c["mask"]).view(N, T)
    A = torch.tensor(c["adv"]).unsqueeze(1)
    el, eh, beta = c["epsilon_low"], c["epsilon_high"], c["beta"]
    seq = c.get("importance_sampling_level", "token") == "sequence"
    quantile, ent_coef = c.get("top_entropy_quantile", 1.0), c.get("entropy_coef", 0.0)
    ent = torch.tensor(c["entropy"]).view(N, T) if c["entropy"] else None
    if ent is not None and ent_coef != 0.0:  # the bonus's gradient: d loss / d entropy
        ent.requires_grad_(True)
    log_w = logp - old
    if seq:  # GSPO: the row's masked mean log-ratio, shape (N, 1)
        log_w = ((log_w * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1)
    coef_1 = torch.exp(log_w)
    if beta != 0.0:
        ref = torch.tensor(c["ref_logp"]).view(N, T)
        kl = torch.exp(ref - logp) - (ref - logp) - 1
    if c["type"] == "cispo":
        per_tok = -torch.clamp(coef_1, max=eh).detach() * A * logp
    elif c["type"] == "sapo":
        tau = torch.where(A > 0, c["sapo_temperature_pos"], c["sapo_temperature_neg"])
        per_tok = -(torch.sigmoid(tau * (coef_1 - 1)) * 4 / tau) * A
    else:
        coef_2 = torch.clamp(coef_1, 1 - el, 1 + eh)
        if c["delta"] > 0:
            coef_1 = torch.clamp(coef_1, max=c["delta"])
        per_tok = -torch.min(coef_1 * A, coef_2 * A)
    ent_mask = high_entropy_mask(ent.detach(), mask, quantile) if quantile < 1.0 else None
    if ent_mask is not None:
        per_tok = per_tok * ent_mask
    is_w = is_weights(c, old, mask)
    if is_w is not None:
        per_tok = per_tok * is_w
    if beta != 0.0:
        per_tok = per_tok + beta * kl
    accum = c["grad_accum_steps"]
    t = c["type"]
    if t in ("grpo", "sapo"):
        policy = ((per_tok * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
        loss = policy / accum
    elif t == "bnpo":
        policy = (per_tok * mask).sum() / mask.sum().clamp(min=1.0)
        loss = policy / accum
    elif t == "dr_grpo":
        policy = (per_tok * mask).sum() / (per_tok.size(0) * c["max_completion_length"])
        loss = policy / accum
    else:
        policy = loss = (per_tok * mask).sum() / max(c["num_items_in_batch"], 1.0)
    bonus = 0.0
    if ent_coef != 0.0:  # the entropy adds to the loss, not to dlogp: its own gradient
        # the mean entropy for every loss type, as in TRL 1.16 (at f2cd57710ae3, dapo's and
        # cispo's was sum(ent * eff) / num_items_in_batch)
        eff = mask if ent_mask is None else mask * ent_mask
        bonus = (ent * eff).sum() / eff.sum().clamp(min=1.0) / accum
        loss = loss - ent_coef * bonus
        bonus = bonus.item()
    loss.backward()

    def gmean(x):
        if x.shape[1] == 1:  # sequence level: one value per row, TRL averages over the rows
            return (x.sum() / x.shape[0]).item()
        return ((x * mask).sum() / mask.sum().clamp(min=1.0)).item()

    def seqmean(x):
        if x.shape[1] == 1:
            return x.squeeze(1)
        return (x * mask).sum(-1) / mask.sum(-1)

    def nanmin(x):
        x = x[~torch.isnan(x)]
        return float("nan") if x.numel() == 0 else x.min().item()

    def nanmax(x):
        x = x[~torch.isnan(x)]
        return float("nan") if x.numel() == 0 else x.max().item()

    nan = float("nan")
    e = dict(loss=loss.item(), policy_loss=policy.item(), dlogp=js(logp.grad),
             kl=gmean(kl.detach()) if beta != 0.0 else nan,
             entropy=gmean(torch.tensor(c["entropy"]).view(N, T)) if c["entropy"] else nan,
             clip_low_mean=nan, clip_high_mean=nan, clip_region_mean=nan, clip_low_min=nan,
             clip_high_max=nan, cispo_clip_ratio=nan, n_tokens=mask.sum().item())
    if is_w is not None:
        e["is_w"] = js(is_w * mask)
    if ent_coef != 0.0:
        e["entropy_bonus"] = bonus
        e["dentropy"] = js(ent.grad)
    c1 = coef_1.detach()
    if t == "sapo":
        pass  # TRL logs no clip ratio for sapo
    elif t != "cispo":
        lo = ((c1 < 1 - el) & (A < 0)).double()
        hi = ((c1 > 1 + eh) & (A > 0)).double()
        e.update(clip_low_mean=gmean(lo), clip_high_mean=gmean(hi),
                 clip_region_mean=gmean(((lo > 0) | (hi > 0)).double()),
                 clip_low_min=nanmin(seqmean(lo)), clip_high_max=nanmax(seqmean(hi)))
    else:
        e.update(cispo_clip_ratio=gmean(((c1 > eh) & (A > 0)).double()))
    return {k: js(v) if not isinstance(v, list) else v for k, v in e.items()}


def loss_cases():
    """The fixed batch (N=6 rows of T=7 tokens) and the cases on it, without expected values:
    {file name: [case]}."""
    g = torch.Generator().manual_seed(2)
    N, T = 6, 7
    lengths = torch.tensor([7, 5, 1, 3, 6, 4])
    base_mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).double()
    logp = f32(-torch.exp(torch.rand(N, T, generator=g) * 5.5 - 4.0))   # log-probs in (-4.5, -0.02)
    old = f32(logp + 0.35 * torch.randn(N, T, generator=g))
    wide_old = f32(logp + 0.9 * torch.randn(N, T, generator=g))
    ref = f32(logp + 0.3 * torch.randn(N, T, generator=g))
    ent = f32(torch.rand(N, T, generator=g) * 3.0)
    adv = f32(torch.randn(N, generator=g))
    adv[3] = 0.0  # a sequence of a zero-std group: min(a, b) ties everywhere
    pad = base_mask == 0
    logp[pad] = -17.0   # garbage in the padding: must not matter
    truncated_mask = base_mask.clone()
    truncated_mask[0] = 0.0  # mask_truncated_completions: row 0 ran to T without EOS
    total = base_mask.sum().item()

    def case(name, type_, old_=None, beta=0.0, el=0.2, eh=0.2, delta=0.0, max_len=0,
             num_items=0.0, accum=1, mask=base_mask, entropy=None):
        return dict(name=name, type=type_, N=N, T=T, logp=js(logp),
                    old_logp=None if old_ is None else js(old_), ref_logp=js(ref) if beta else None,
                    mask=js(mask), adv=js(adv), entropy=None if entropy is None else js(entropy),
                    epsilon_low=el, epsilon_high=eh, delta=delta, beta=beta,
                    max_completion_length=max_len, num_items_in_batch=num_items,
                    grad_accum_steps=accum)

    cases = [
        case("grpo_onpolicy_beta0", "grpo", entropy=ent),
        case("grpo_offpolicy_beta_asym_eps", "grpo", old, beta=0.04, eh=0.28),
        case("grpo_delta_two_sided", "grpo", wide_old, el=0.2, eh=0.2, delta=1.4),
        case("grpo_truncated_row_masked", "grpo", old, beta=0.04, mask=truncated_mask, accum=2),
        case("bnpo_offpolicy_beta_accum2", "bnpo", old, beta=0.1, accum=2, entropy=ent),
        case("dr_grpo_offpolicy_beta", "dr_grpo", old, beta=0.04, max_len=T + 3),
        case("dr_grpo_onpolicy", "dr_grpo", max_len=T),
        case("dapo_onpolicy_beta0", "dapo", num_items=total),
        case("dapo_offpolicy_asym_eps_global_norm", "dapo", wide_old, beta=0.02, eh=0.28,
             num_items=total * 2.5),
        case("dapo_delta_truncated", "dapo", wide_old, delta=1.5, eh=0.28, mask=truncated_mask,
             num_items=truncated_mask.sum().item() * 2),
        case("cispo_offpolicy_clamped", "cispo", wide_old, beta=0.05, eh=1.3, num_items=total * 2),
        case("cispo_onpolicy_eps5", "cispo", eh=5.0, num_items=total),
    ]
    # the sampling model's log-probs: close to the policy's (as a bf16 copy's are), padding finite
    g2 = torch.Generator().manual_seed(3)
    samp = f32(logp + 0.15 * torch.randn(N, T, generator=g2))
    return {"loss_cases.json": cases,
            "loss_option_cases.json": option_cases(case, old, wide_old, ent, total,
                                                   truncated_mask, T, samp)}


def option_cases(case, old, wide_old, ent, total, truncated_mask, T, samp):
    """The options of issue 16 on the same inputs: GSPO (importance_sampling_level = sequence),
    sapo, the top-entropy mask and the entropy bonus (its value and d loss / d entropy); and
    the importance-sampling correction of off-policy samples (issue 14: bf16 rollout weights)."""

    def opt(c, **kw):
        c.update(kw)
        return c

    seq = dict(importance_sampling_level="sequence")
    cases = [
        opt(case("gspo_grpo_offpolicy", "grpo", wide_old, entropy=ent), **seq),
        opt(case("gspo_grpo_onpolicy_beta", "grpo", beta=0.04, entropy=ent), **seq),
        opt(case("gspo_grpo_delta_asym", "grpo", wide_old, eh=0.28, delta=1.3), **seq),
        opt(case("gspo_dapo_truncated", "dapo", old, mask=truncated_mask,
                 num_items=truncated_mask.sum().item() * 2), **seq),
        opt(case("gspo_cispo", "cispo", wide_old, eh=1.2, num_items=total), **seq),
        opt(case("gspo_bnpo_accum2", "bnpo", old, beta=0.1, accum=2), **seq),
        opt(case("sapo_offpolicy", "sapo", wide_old, entropy=ent),
            sapo_temperature_pos=1.0, sapo_temperature_neg=1.05),
        opt(case("sapo_onpolicy_beta_accum2", "sapo", beta=0.04, accum=2),
            sapo_temperature_pos=2.0, sapo_temperature_neg=0.5),
        opt(case("sapo_gspo_truncated", "sapo", old, mask=truncated_mask),
            sapo_temperature_pos=1.0, sapo_temperature_neg=1.05, **seq),
        opt(case("top_entropy_grpo_q0.2", "grpo", old, beta=0.04, entropy=ent),
            top_entropy_quantile=0.2),
        opt(case("top_entropy_dapo_q0.5", "dapo", wide_old, entropy=ent, num_items=total),
            top_entropy_quantile=0.5),
        opt(case("top_entropy_gspo_q0.3", "grpo", wide_old, entropy=ent),
            top_entropy_quantile=0.3, **seq),
        opt(case("entropy_bonus_grpo", "grpo", old, entropy=ent, accum=2), entropy_coef=0.01),
        opt(case("entropy_bonus_dapo_top_q0.4", "dapo", old, entropy=ent, num_items=total * 2),
            entropy_coef=0.05, top_entropy_quantile=0.4),
        opt(case("entropy_bonus_cispo", "cispo", wide_old, entropy=ent, eh=2.0, num_items=total),
            entropy_coef=0.02),
        # importance-sampling correction of samples drawn by another model (bf16 rollout)
        opt(case("is_token_truncate_grpo_onpolicy", "grpo", entropy=ent),
            sampling_logp=js(samp), is_mode="token_truncate", is_cap=1.5),
        opt(case("is_token_mask_bnpo_beta", "bnpo", old, beta=0.04, accum=2),
            sampling_logp=js(samp), is_mode="token_mask", is_cap=1.3),
        opt(case("is_sequence_mask_dapo", "dapo", old, num_items=total),
            sampling_logp=js(samp), is_mode="sequence_mask", is_cap=2.0),
        opt(case("is_sequence_truncate_gspo", "grpo", wide_old, beta=0.02),
            sampling_logp=js(samp), is_mode="sequence_truncate", is_cap=1.2, **seq),
    ]
    for c in cases:
        c.setdefault("sapo_temperature_pos", 1.0)
        c.setdefault("sapo_temperature_neg", 1.05)
    return cases


TRANSCRIPTION = ("transcription of TRL f2cd57710ae3's formulas, entropy bonus of TRL 1.16 "
                 "(tools/make_loss_fixtures.py loss_ref)")


def loss_fixtures(expect=loss_ref, source=lambda c: TRANSCRIPTION):
    """Writes loss_cases.json and loss_option_cases.json: each case of loss_cases() with its
    "expect" (expect(case)) and its "source" (source(case): what produced the expected values).
    tools/make_loss_fixtures_trl.py passes TRL's own _compute_loss; the default is loss_ref."""
    for name, cases in loss_cases().items():
        for c in cases:
            c["expect"] = expect(c)
            c["source"] = source(c)
        write(name, cases)


# ---- LR schedules (transformers + torch schedulers, stepped like a trainer) ------------------
def schedule_cases():
    from transformers import get_scheduler
    from torch.optim.lr_scheduler import CosineAnnealingLR

    def run(make, lr, steps):
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.SGD([p], lr=lr)
        sched = make(opt)
        out = []
        for _ in range(steps):
            out.append(opt.param_groups[0]["lr"])  # the lr the next optimizer step uses
            opt.step()
            sched.step()
        return out

    cases = []
    S, lr = 40, 3e-4
    for kind, warm, extra in [("constant", 0, {}), ("constant_with_warmup", 7, {}),
                              ("linear", 5, {}), ("linear", 0, {}), ("cosine", 6, {}),
                              ("cosine", 0, {}), ("cosine_with_min_lr", 4, {"min_lr_rate": 0.1})]:
        vals = run(lambda o: get_scheduler(kind, o, num_warmup_steps=warm, num_training_steps=S,
                                           scheduler_specific_kwargs=extra or None), lr, S + 3)
        cases.append(dict(kind=kind, lr=lr, warmup_steps=warm, total_steps=S, num_cycles=0.5,
                          min_lr_rate=extra.get("min_lr_rate", 0.0), lrs=vals))
    # MiniMind now: CosineAnnealingLR(T_max=S, eta_min=lr/10), stepped after each optimizer step.
    vals = run(lambda o: CosineAnnealingLR(o, T_max=S, eta_min=lr / 10), lr, S + 1)
    cases.append(dict(kind="minimind", lr=lr, warmup_steps=0, total_steps=S, num_cycles=0.5,
                      min_lr_rate=0.0, lrs=vals))
    # MiniMind before 2025-12-06: get_lr(step, total, lr) = lr/10 + 0.5 lr (1 + cos(pi step/total)).
    vals = [lr / 10 + 0.5 * lr * (1 + math.cos(math.pi * s / S)) for s in range(S + 1)]
    cases.append(dict(kind="minimind_legacy", lr=lr, warmup_steps=0, total_steps=S, num_cycles=0.5,
                      min_lr_rate=0.0, lrs=vals))
    write("schedule_cases.json", cases)


# ---- gradient clipping (torch.nn.utils.clip_grad_norm_) --------------------------------------
def clip_cases():
    g = torch.Generator().manual_seed(3)
    cases = []
    for max_norm, scale in [(1.0, 1.0), (100.0, 1.0), (0.5, 0.01)]:
        grads = [torch.randn(n, generator=g, dtype=torch.float32) * scale for n in (5, 12, 1, 30)]
        params = [torch.nn.Parameter(torch.zeros_like(x)) for x in grads]
        for p, x in zip(params, grads):
            p.grad = x.clone()
        total = torch.nn.utils.clip_grad_norm_(params, max_norm)
        cases.append(dict(max_norm=max_norm, grads=[js(x) for x in grads], total_norm=total.item(),
                          clipped=[js(p.grad) for p in params]))
    write("clip_cases.json", cases)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    import sys
    # e.g. "clip": regenerate only those (schedule needs transformers). The loss fixtures come from
    # TRL's own code (tools/make_loss_fixtures_trl.py); "loss" here writes the transcription
    # instead, and only when named.
    only = set(sys.argv[1:]) or {"advantage", "schedule", "clip"}
    for name, make in (("advantage", advantage_cases), ("loss", loss_fixtures),
                       ("schedule", schedule_cases), ("clip", clip_cases)):
        if name in only:
            make()
    if "loss" not in only:
        print("loss_cases.json, loss_option_cases.json: run tools/make_loss_fixtures_trl.py")
