"""bench_grpo_step_tail.py — the long-tail case of the GRPO-step benchmark (issue 31, item 4):
`python3 bench/bench_grpo_step.py --long-tail [--quick] [--continuous [ROWS]] [--pack-tokens K]`,
and its own block of `--all` in BENCHMARKS.md. Method and numbers: bench/grpo_step.md.

The case: the MiniMind2-small shape (bench_grpo_step_torch.py --make: random init), B = 4 prompts
x G = 8 completions x train.grad_accum = 2 chunks per optimizer step (64 rows; while the first
chunk's longest row decodes, the second chunk's prompts wait), beta 0.02, loss_type grpo, lr 1e-6,
one thread, at most 512 new tokens. A random model stops nowhere on its own, so both sides follow
one length schedule: row j of every group ends with an EOS at length L_j, the quantiles
(k + 0.5) / G of a Pareto distribution whose shape (~0.90) puts the group's median at 10 % of
the longest row, scaled so that the longest row is the max. G = 8, max 512:
L = 512 150 85 58 44 35 29 25 (median 51, mean 117.25: 938 of a padded group's 4096 completion
positions are real). grpo follows it through its benchmark hook GRPO_BENCH_END_AT
(core/train/train_setup.c -> grpo_sampler_opts.end_at), TRL through a LogitsProcessor
(bench_grpo_step_trl.py --end-at). Both get the same EOS id: build/bench_grpo_step/model_eos is
the benchmark model whose renamed end token <|bench_no_eos|> is named <|bench_eos|> and made the
tokenizer's eos_token (the same weights, hard-linked). The prompts are the benchmark's two,
four times over (8 prompts: one step's 2 x 4; TRL's sampler needs 8 distinct dataset rows).

Arms, one process each, STEPS steps (3; --quick 1), the first WARMUP (1; --quick 0) dropped,
medians of the rest:
  grpo padded + static      the defaults: a micro-batch (here a chunk, train.micro_batch = 0)
                            padded to its longest row; the decode batch shrinks as rows end
  grpo packed + static      train.max_tokens_per_microbatch = K (--pack-tokens, default 1024)
  grpo padded / packed + continuous   the default sampling.continuous = true (the static arms
                            set it false); --continuous ROWS caps the rows decoded together
                            (sampling.max_live_rows = ROWS; default one chunk's B x G = 32)
  TRL GRPOTrainer           per_device_train_batch_size 32, gradient_accumulation_steps 2 (its
                            default steps_per_generation = 2: one generate call of 64 rows),
                            the same lengths
  grpo uniform padded / packed   the same B, G and grad_accum on the model without EOS, every
                            row 128 new tokens (--quick 16), packed with K = 32 x (87 + 128):
                            one pack holds the padded chunk's rows, so the ratio is what
                            packing costs where there is no padding to save; and the padded
                            arm with train.shared_prefix = false: a padded micro-batch computes
                            each group's prompt once (the default), and so does a pack (its
                            rows of one prompt share it: parent and child segments, seqbatch.h),
                            so this arm shows what the sharing saves either way
Each arm's lengths are checked: grpo's completions/{min,mean,max}_length against the schedule;
TRL's script checks every row of every generate call and its logged lengths are compared here.
Per arm: CPU and wall s/step, completion tokens per step, train/padding_frac (grpo), and
completion tokens per CPU second of each phase (rollout, reference, policy, optimizer: grpo's
time/cpu/* metrics, TRL's wrapped methods; one numerator for all phases and sides).
Targets: packed + continuous >= 2x padded + static; uniform packed <= 1.03x padded; grpo (packed
+ continuous, else packed + static, named) >= 4x TRL; all on CPU s/step.
--quick: max 64 new tokens (the schedule scaled: 64 19 11 7 6 4 4 3), uniform 16, one step per
arm: the pipeline end to end in a few minutes, not the benchmark's numbers.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess

import bench_grpo_step as g
from bench_grpo_step_all import phases5, sh

G, B, ACCUM = 8, 4, 2
ROWS = B * G * ACCUM  # completion rows per optimizer step
MARK_BEGIN = "<!-- grpo_step_tail:begin -->"
MARK_END = "<!-- grpo_step_tail:end -->"
EOS_DIR = os.path.join(g.OUT, "model_eos")
PROMPTS = os.path.join(g.OUT, "tail_prompts.jsonl")
PROMPT_TOKENS = (87, 82)  # the benchmark's two prompts, tokenized (bench_grpo_step_all)
LIMIT_S = {True: 300, False: 1800}  # seconds one program may run (--quick or not)


def tail_lengths(top, groups=G, share=0.1):
    """Row j's length, longest first: the quantiles (k + 0.5) / groups of a Pareto distribution
    whose shape is found (bisection) so that their median is `share` of their maximum, scaled so
    that the maximum is `top`, rounded (at least 1)."""
    q = [(k + 0.5) / groups for k in range(groups)]
    lo, hi = 0.05, 20.0
    for _ in range(200):
        alpha = (lo + hi) / 2
        raw = [(1 - x) ** (-1 / alpha) for x in q]
        if statistics.median(raw) / raw[-1] > share:
            hi = alpha  # the tail is not heavy enough: a smaller shape
        else:
            lo = alpha
    return [max(1, round(top * x / raw[-1])) for x in reversed(raw)]


def make_inputs():
    """The benchmark model (once), its copy with an EOS (EOS_DIR) and the 8 prompts; returns the
    EOS id."""
    if not os.path.exists(os.path.join(g.OUT, "model", "model.safetensors")):
        subprocess.run(["python3", os.path.join(g.ROOT, "bench", "bench_grpo_step_torch.py"),
                          "--make", os.path.join(g.OUT, "model")], check=True)
    src = os.path.join(g.OUT, "model")
    os.makedirs(EOS_DIR, exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        dst = os.path.join(EOS_DIR, name)
        if os.path.exists(dst):
            os.remove(dst)
        try:
            os.link(os.path.join(src, name), dst)
        except OSError:
            shutil.copyfile(os.path.join(src, name), dst)
    tok = json.load(open(os.path.join(src, "tokenizer.json"), encoding="utf-8"))
    eos = None
    for t in tok["added_tokens"]:
        if t["content"] == "<|bench_no_eos|>":
            t["content"], eos = "<|bench_eos|>", t["id"]
    assert eos is not None, f"{src}/tokenizer.json: no <|bench_no_eos|> token"
    tok["model"]["vocab"]["<|bench_eos|>"] = tok["model"]["vocab"].pop("<|bench_no_eos|>")
    with open(os.path.join(EOS_DIR, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    tc = json.load(open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8"))
    tc["eos_token"] = "<|bench_eos|>"
    with open(os.path.join(EOS_DIR, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    lines = open(os.path.join(g.ROOT, "bench", "bench_grpo_step_prompts.jsonl"),
                 encoding="utf-8").read().splitlines()
    with open(PROMPTS, "w", encoding="utf-8") as f:
        f.write("\n".join([x for x in lines if x.strip()] * 4) + "\n")
    return eos


def arms(o):
    """(key, name, tail, packed, continuous, shared prefix) of the run. The uniform arms compare
    the long tail's best setting (packed + continuous) with the old default (padded + static)
    where there is nothing to save; the uniform padded arm without train.shared_prefix shows
    what computing every row's prompt costs (padded micro-batches and packs compute each
    group's prompt once: seqbatch.h)."""
    out = [("padded_static", "grpo padded + static", True, False, False, True),
           ("packed_static", "grpo packed + static", True, True, False, True),
           ("padded_cont", "grpo padded + continuous", True, False, True, True),
           ("packed_cont", "grpo packed + continuous", True, True, True, True)]
    out += [("trl", "TRL GRPOTrainer", True, False, False, True),
            ("uni_padded", "grpo uniform, padded + static", False, False, False, True),
            ("uni_packed", "grpo uniform, packed + continuous", False, True, True, True),
            ("uni_padded_nosp", "grpo uniform, padded, train.shared_prefix = false", False,
             False, False, False)]
    return out


def namespace(o, tail):
    """The arguments bench_grpo_step's runners read, for this case."""
    return argparse.Namespace(shape="minimind", new_tokens=o.max_new if tail else o.uniform,
                              steps=o.steps, warmup=o.warmup, micro_batch=0,
                              gradient_checkpointing=False, threads=1, rows=ROWS,
                              lengths_free=tail)


def run_grpo(o, key, tail, packed, cont, prefix):
    """One grpo arm: its result (bench_grpo_step.c_result), or {"absent": why}."""
    a = namespace(o, tail)
    runs = os.path.join(g.OUT, f"runs_tail_{key}")
    K = o.pack_tokens if tail else B * G * (max(PROMPT_TOKENS) + o.uniform)
    sets = {"model.path": EOS_DIR if tail else os.path.join(g.OUT, "model"),
            "data.path": PROMPTS, "train.steps": o.steps, "train.batch_prompts": B,
            "train.grad_accum": ACCUM, "train.micro_batch": 0, "train.threads": 1,
            "sampling.max_completion_length": a.new_tokens, "log.dir": runs,
            "checkpoint.dir": os.path.join(runs, "checkpoints"), "checkpoint.every": 0}
    if packed:
        sets["train.max_tokens_per_microbatch"] = K
    if not prefix:
        sets["train.shared_prefix"] = "false"
    if not cont:  # continuous decode is the default since issue 31
        sets["sampling.continuous"] = "false"
    elif o.continuous:
        sets["sampling.max_live_rows"] = o.continuous
    cmd = [os.path.join(g.ROOT, "build", "grpo"), "train",
           os.path.join(g.ROOT, "bench", "bench_grpo_step.ini")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    env = g.env_of(1)
    env.pop("GRPO_BENCH_END_AT", None)
    if tail:
        env["GRPO_BENCH_END_AT"] = ",".join(map(str, o.lengths))
    res = g.c_result(a, cmd, os.path.join(runs, "metrics.jsonl"), f"tail_{key}", env)
    want = o.lengths if tail else [a.new_tokens]
    res["lengths_ok"] = all(
        r["completions/min_length"] == min(want) and r["completions/max_length"] == max(want)
        and abs(r["completions/mean_length"] - statistics.mean(want)) < 1e-6
        for r in res["rows"])
    res["padding_frac"] = statistics.median(r.get("train/padding_frac", float("nan"))
                                            for r in res["rows"][a.warmup:] or res["rows"])
    return res


def run_trl(o):
    """TRL's arm on the same lengths: its result (bench_grpo_step.run_trl)."""
    a = namespace(o, True)
    a.trl_args = ["--model", EOS_DIR, "--data", PROMPTS, "--B", str(B), "--G", str(G),
                  "--grad-accum", str(ACCUM), "--end-at", ",".join(map(str, o.lengths))]
    res = g.run_trl(a, "tail_trl")
    text = res["text"]
    calls = text.count("  forced lengths ok: ")
    means = [float(x) for x in re.findall(r"(?m)^  tokens .* mean ([0-9.]+)", text)]
    res["lengths_ok"] = calls >= o.steps and all(
        abs(m - statistics.mean(o.lengths)) < 1e-3 for m in means) and len(means) >= o.steps
    res["padding_frac"] = None
    return res


def run_all(o):
    """Every arm: {key: result}; an arm killed at its time limit is {"absent": why}."""
    out = {}
    g.TIME_LIMIT[0] = LIMIT_S[o.quick]
    for key, name, tail, packed, cont, prefix in arms(o):
        try:
            out[key] = run_trl(o) if key == "trl" else run_grpo(o, key, tail, packed, cont,
                                                                 prefix)
        except g.Overtime as e:
            print(e, flush=True)
            out[key] = {"absent": f"killed after {g.TIME_LIMIT[0]:.0f} s wall"}
        r = out[key]
        print(f"tail {key}: " + (r["absent"] if "absent" in r else
                                 f"CPU {r['cpu_median']:.2f} s/step, wall {r['median']:.2f} "
                                 f"s/step, lengths {'ok' if r['lengths_ok'] else 'WRONG'}"),
              flush=True)
    g.TIME_LIMIT[0] = None
    return out


def fmt(v, f="{:.0f}"):
    return "—" if v is None or v != v else f.format(v)


def arm_rows(o, runs):
    """The markdown rows of the arms' table."""
    lines = []
    for key, name, tail, packed, cont, prefix in arms(o):
        r = runs[key]
        if "absent" in r:
            lines.append(f"| {name} | {r['absent']} |" + " |" * 10)
            continue
        toks = r["completion_tokens"]
        roll, ref, pol, bwd, opt = phases5(r)
        pol = (pol or 0) + (bwd or 0)
        per = [toks / x if x else None for x in (roll, ref, pol, opt)]
        lines.append(
            f"| {name} | **{r['cpu_median']:.2f}** | {r['median']:.2f} | {toks:.0f} | "
            f"{'ok' if r['lengths_ok'] else '**WRONG**'} | {fmt(r['padding_frac'], '{:.2f}')} | "
            + " | ".join(fmt(x) for x in per)
            + f" | {r['rss_mib']:.0f} | {r['load']:.1f} |")
    return lines


def ratio_row(target, runs, slow, fast, want, cmp=">="):
    """(target, measured, verdict) of runs[slow] / runs[fast] CPU s/step against want (None:
    not a target, no verdict)."""
    a, b = runs.get(slow, {}), runs.get(fast, {})
    if "cpu_median" not in a or "cpu_median" not in b:
        why = a.get("absent") or b.get("absent") or "not run"
        return (target, f"not measured: {why}", "—")
    q = a["cpu_median"] / b["cpu_median"]
    ok = want is not None and (q >= want if cmp == ">=" else q <= want)
    return (target, f"{q:.2f}× ({a['cpu_median']:.2f} / {b['cpu_median']:.2f} s)",
            "—" if want is None else "met" if ok else "**NOT met**")


def targets(runs):
    """Issue 31's targets on the case: (target, measured, verdict)."""
    best = "packed_cont" if "cpu_median" in runs.get("packed_cont", {}) else "packed_static"
    label = "packed + continuous" if best == "packed_cont" else "packed + static"
    return [ratio_row("step ≥ 2× faster packed + continuous than padded + static (CPU s/step)",
                      runs, "padded_static", "packed_cont", 2),
            ratio_row("(not a target) packed + static against padded + static: padded / "
                      "packed", runs, "padded_static", "packed_static", None),
            ratio_row("uniform lengths: packed no more than 3 % slower than padded (packed / "
                      "padded CPU s/step ≤ 1.03)", runs, "uni_packed", "uni_padded", 1.03, "<="),
            ratio_row("(not a target) uniform: packed / padded without the shared prefix",
                      runs, "uni_packed", "uni_padded_nosp", None),
            ratio_row(f"grpo ({label}) ≥ 4× TRL GRPOTrainer (CPU s/step)", runs, "trl", best, 4)]


def block(o, runs, command, started):
    """The markdown block of the case (BENCHMARKS.md, between MARK_BEGIN and MARK_END)."""
    what = " (--quick: a pipeline test, not the benchmark)" if o.quick else ""
    model = re.search(r"(?m)^Model name:\s*(.*)$", sh(["lscpu"]))
    lines = [f"### The long tail (issue 31){what}", "",
             "Written by the command below (the next run replaces everything between the "
             "markers); method in [bench/grpo_step.md](bench/grpo_step.md#the-long-tail).", "",
             "```", command, "```", "",
             f"- {started:%Y-%m-%d %H:%M} – {datetime.datetime.now(datetime.timezone.utc):%H:%M}"
             f" UTC; `lscpu` model name: {model.group(1) if model else '?'}, {os.cpu_count()} "
             f"cores; git {sh(['git', 'describe', '--always', '--dirty'])}; 1 thread.",
             f"- MiniMind2-small shape, B={B} × G={G} × train.grad_accum = {ACCUM} ({ROWS} rows "
             f"per optimizer step), beta 0.02, at most {o.max_new} new tokens. Row j of every "
             f"group ends with an EOS at L_j = {' '.join(map(str, o.lengths))} (median "
             f"{statistics.median(o.lengths):g}, mean {statistics.mean(o.lengths):g}; grpo: "
             "GRPO_BENCH_END_AT, TRL: a LogitsProcessor; `lengths` = checked against the "
             f"schedule). Packed: train.max_tokens_per_microbatch = {o.pack_tokens}; uniform "
             f"rows: {o.uniform} new tokens each, one pack per chunk. "
             f"{o.steps - o.warmup} timed step(s) after {o.warmup} warm-up per arm.",
             "- tokens / CPU s: completion tokens of the step per CPU second of the phase "
             "(policy = forward + loss + backward).", "",
             "| arm | CPU s/step | wall s/step | completion tokens / step | lengths | "
             "padding_frac | tokens / CPU s: rollout | reference | policy | optimizer | "
             "peak RSS MiB | load |", "|" + "---|" * 12]
    lines += arm_rows(o, runs)
    lines += ["", "| target | measured | |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {ok} |" for t, v, ok in targets(runs)]
    return lines


def write_block(lines):
    """Replaces the case's block in BENCHMARKS.md; the first run puts it right after the
    grpo_step block (or at the end)."""
    path = os.path.join(g.ROOT, "BENCHMARKS.md")
    text = open(path, encoding="utf-8").read()
    blk = MARK_BEGIN + "\n" + "\n".join(lines).rstrip() + "\n" + MARK_END
    i, j = text.find(MARK_BEGIN), text.find(MARK_END)
    if i >= 0 and j > i:
        text = text[:i] + blk + text[j + len(MARK_END):]
    else:
        k = text.find("<!-- grpo_step:end -->")
        k = k + len("<!-- grpo_step:end -->") if k >= 0 else len(text)
        text = text[:k] + "\n\n" + blk + text[k:]
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote the long-tail block into {path}")


def options(quick, continuous=None, pack_tokens=1024):
    """The case's settings: quick or not, --continuous ROWS (None: not asked; 0: B x G)."""
    top = 64 if quick else 512
    return argparse.Namespace(quick=quick, max_new=top, uniform=16 if quick else 128,
                              lengths=tail_lengths(top), steps=1 if quick else 3,
                              warmup=0 if quick else 1, continuous=continuous,
                              pack_tokens=pack_tokens)


def main(argv, quick, continuous=None, pack_tokens=1024):
    """--long-tail: every arm, the table printed and written into BENCHMARKS.md."""
    started = datetime.datetime.now(datetime.timezone.utc)
    os.makedirs(g.OUT, exist_ok=True)
    make_inputs()
    o = options(quick, continuous, pack_tokens)
    print(f"long tail: lengths {o.lengths}, max {o.max_new}, packed K = {o.pack_tokens}, "
          f"continuous arms' sampling.max_live_rows {o.continuous or f'default ({B * G})'}",
          flush=True)
    runs = run_all(o)
    lines = block(o, runs, " ".join(["python3", "bench/bench_grpo_step.py"] + argv), started)
    print("\n".join(lines))
    write_block(lines)
