"""bench_grpo_step_all.py — `python3 bench/bench_grpo_step.py --all [--quick]`: issue 14's whole
GRPO-step benchmark in one run, written into BENCHMARKS.md (see bench/grpo_step.md).

Back to back on this machine, each case at 1 and 2 threads, every side that applies (grpo,
the PyTorch eager script, TRL's GRPOTrainer), one process per side, case and thread count:

  (a) the MiniMind2-small shape (bench/bench_grpo_step.ini: B=2 x G=8, beta 0.02, no EOS), 128
      and 512 new tokens;
  (b) the embedded default: the model of `grpo init-model` + `grpo sft examples/arith_sft.ini`
      (as scripts/arith.sh makes it; transformers loads the same directory and tokenizer) run
      with examples/arith.ini's settings (B=8 x G=16, <= 40 new tokens ending at EOS, dapo,
      beta 0, lr 1e-4);
  (c) the Qwen2.5-0.5B shape (issue 30: its config's sizes, random init, vocabulary 151936;
      bench/lora_memory.py makes it): LoRA r=16 on all linear layers, B=1 x G=4, 256 new tokens,
      grpo against TRL + peft (the PyTorch script has no LoRA), and one full fine-tuning step of
      grpo alone for its memory.

Targets include the fp32 floor (issue 30): grpo's 1-thread step against the sum of its phases'
floors (bench_grpo_step.phase_floors: decode reads at the streaming read, forward/backward
FLOPs at sgemm, AdamW's traffic), and the bf16 floor of the bf16 case (the same with decode
reading the bf16 weights and the products at bench_gemm's bf16 rate: bench_grpo_step.bf16_rate).

Then the busy-core slowdown (grpo at 2 threads next to a spinning process against the same
run alone) and the sgemm / streaming-read rooflines (build/bench/bench_dense, at the start and
at the end). The markdown tables replace the block between MARK_BEGIN and MARK_END in
BENCHMARKS.md and are printed. --quick: short completions, few steps, a 100-step SFT — the same
pipeline in a few minutes, to test it (its numbers are not the benchmark's).

Last, issue 31's long-tail case (bench/bench_grpo_step_tail.py, outside the budget above;
--continuous [ROWS] adds its continuous-decode arms, --pack-tokens K sets its pack size) into
its own block of BENCHMARKS.md.
"""
import argparse
import datetime
import os
import re
import subprocess
import sys
import time

import bench_grpo_step as g

MARK_BEGIN = "<!-- grpo_step:begin -->"
MARK_END = "<!-- grpo_step:end -->"
SIDES = ("c", "torch", "trl")
BUDGET_S = {True: 20 * 60, False: 75 * 60}  # the runs (--quick or not), see limit()
DEADLINE = [None]  # time.monotonic() after which no program starts
NAMES = {"c": "grpo (C)", "torch": "PyTorch eager", "trl": "TRL GRPOTrainer"}
MM = "MiniMind2-small"
FLOOR_TARGET = {False: "the fp32 floor: step ≤ 1.2× the sum of its phases' floors (grpo, 1 "
                       "thread, CPU s)",
                True: "the bf16 floor: step ≤ 1.2× the sum of its phases' bf16 floors (grpo, "
                      "every pass bf16, 1 thread, CPU s; products at the bf16 rate, decode "
                      "reading the bf16 weights)"}
QUIET_LOAD = 0.75  # load per core beyond a run's own threads at or under which it counts as quiet


def cases(quick):
    """(key, title, shape, new tokens, steps, warm-up steps dropped, seconds one program may
    run, busy-core check) of the run. The steps are few because the machine is shared and the
    whole run should stay under ~40 minutes. Every timed step follows a dropped warm-up but the
    memory case's: a first step faults in all its memory (grpo at 512 tokens: ~3 GB, 4 of its
    30 CPU s in the kernel, on the main thread alone). The most expensive case runs last: when
    the run's budget is spent, what is left is reported as not run."""
    if quick:
        return [("mm16", f"{MM}, 16 new tokens (--quick)", "minimind", 16, 2, 1, 240, True),
                ("mm16bf16", f"{MM}, 16 new tokens, bf16 compute (--quick)", "minimind-bf16",
                 16, 2, 1, 240, False),
                ("mm32", f"{MM}, 32 new tokens (--quick)", "minimind", 32, 1, 0, 240, False),
                ("arith", "embedded default (--quick: 100-step SFT)", "arith", 40, 3, 1, 120,
                 True)]
    return [("mm128", f"{MM}, B=2 x G=8, 128 new tokens, beta 0.02", "minimind", 128, 2, 1, 240,
             True),
            ("mm128bf16", f"{MM}, B=2 x G=8, 128 new tokens, beta 0.02, bf16 compute (grpo: "
             "sampling.weights_dtype/compute_dtype, grpo.ref_compute_dtype and "
             "train.compute_dtype = bf16; PyTorch: "
             "autocast), 1 thread", "minimind-bf16", 128, 2, 1, 240, False),
            ("arith", "embedded default (arith.ini: B=8 x G=16, <= 40 new tokens, dapo, beta 0)",
             "arith", 40, 5, 1, 120, True),
            ("mm512", f"{MM}, B=2 x G=8, 512 new tokens, beta 0.02", "minimind", 512, 2, 1, 420,
             False),
            ("q05", "Qwen2.5-0.5B shape, LoRA r=16 on all linear layers, B=1 x G=4, 256 new "
             "tokens, beta 0.02 (TRL with peft)", "qwen05b", 256, 2, 1, 900, False),
            ("q05full", "Qwen2.5-0.5B shape, full fine-tuning (memory), B=1 x G=4, 256 new "
             "tokens, beta 0.02", "qwen05b-full", 256, 1, 0, 600, False)]


def has_bf16_dot():
    """Whether this CPU has avx512_bf16 (grpo refuses its bf16 compute keys without it)."""
    try:
        with open("/proc/cpuinfo") as f:
            return " avx512_bf16" in f.read()
    except OSError:
        return False


def make_models(quick):
    """The benchmark model (bench_grpo_step_torch.py --make) and the embedded default's
    (grpo init-model, then grpo sft with examples/arith_sft.ini: 1500 steps, or 100 with
    --quick), each made once under build/bench_grpo_step/."""
    if not os.path.exists(os.path.join(g.OUT, "model", "model.safetensors")):
        subprocess.run(["python3", os.path.join(g.ROOT, "bench", "bench_grpo_step_torch.py"),
                        "--make", os.path.join(g.OUT, "model")], check=True)
    if not quick:
        g.make_qwen()
    grpo = os.path.join(g.ROOT, "build", "grpo")
    init = os.path.join(g.ARITH, "init")
    if not os.path.exists(os.path.join(init, "model.safetensors")):
        subprocess.run([grpo, "init-model", init], check=True)
    sft = os.path.join(g.ARITH, "sft_quick" if quick else "sft")
    g.ARITH_MODEL[0] = sft
    if not os.path.exists(os.path.join(sft, "model.safetensors")):
        cmd = [grpo, "sft", os.path.join(g.ROOT, "examples", "arith_sft.ini"), "--out", sft,
               "--set", f"model.path={init}", "--set", f"log.dir={sft}_run",
               "--set", f"checkpoint.dir={sft}_run/checkpoints"]
        if quick:
            cmd += ["--set", "train.steps=100"]
        print("making the embedded default's SFT model:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=g.env_of(2))


def limit(case_limit):
    """Sets the time limit of the next program: its case's, cut to what is left of the run's
    budget; False when less than 20 s is left (the program is not started)."""
    left = DEADLINE[0] - time.monotonic()
    g.TIME_LIMIT[0] = min(case_limit, left)
    return left >= 20


def run_case(key, shape, new, steps, warmup, threads, order, case_limit):
    """Every side of one case at `threads` threads, in `order`: {side: result}; a side that ran
    past its time limit (or was not started: the budget was spent) is {"overtime": seconds}."""
    full = shape.endswith("-full")  # the Qwen shape without LoRA: grpo's memory, 1 thread only
    bf16 = shape.endswith("-bf16")  # grpo's bf16 compute against PyTorch's autocast, 1 thread
    a = argparse.Namespace(shape=shape.replace("-full", "").replace("-bf16", ""),
                           new_tokens=new, steps=steps, warmup=warmup, micro_batch=0,
                           gradient_checkpointing=False, threads=threads, full_finetune=full,
                           bf16=bf16)
    out = {}
    if bf16:
        if threads != 1:
            return out
        order = [x for x in order if x != "trl"]  # TRL has no CPU autocast switch: fp32 only
    if g.is_qwen(a):  # no LoRA in the PyTorch script: grpo against TRL + peft
        order = ["c"] if full else [x for x in order if x != "torch"]
        if full and threads != 1:
            return out
    for side in order:
        run = {"c": g.run_c, "torch": g.run_torch, "trl": g.run_trl}[side]
        if not limit(case_limit):
            out[side] = {"overtime": 0, "args": a}
            continue
        try:
            res = out[side] = run(a, f"all_{key}_t{threads}_{side}")
        except g.Overtime as e:
            print(e, flush=True)
            out[side] = {"overtime": g.TIME_LIMIT[0], "args": a}
            continue
        res["args"] = a
        print(f"{key} t{threads} {side:5s}: CPU {res['cpu_median']:.2f} s/step, wall "
              f"{res['median']:.2f} s/step, peak RSS {res['rss_mib']:.0f} MiB, phases "
              + " ".join(f"{k} {v:.2f}" for k, v in res["phases"].items())
              + f", load {res['load']:.1f}", flush=True)
    return out


def busy(key, shape, new, steps, warmup):
    """grpo at 2 threads next to a process spinning on a core: its result (None: overtime)."""
    a = argparse.Namespace(shape=shape, new_tokens=new, steps=steps, warmup=warmup,
                           micro_batch=0, gradient_checkpointing=False, threads=2)
    spin = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        res = g.run_c(a, f"all_{key}_t2_c_busy")
    except g.Overtime as e:
        print(e, flush=True)
        return None
    finally:
        spin.kill()
        spin.wait()
    print(f"{key} busy core: grpo 2 threads {res['median']:.2f} s/step wall", flush=True)
    return res


def phases5(res):
    """(rollout, reference, policy fwd, policy bwd, optimizer) CPU s; grpo's policy phase is
    forward + loss + backward in one (bwd None)."""
    p = res["phases"]
    if "policy" in p:  # grpo's time/cpu/... metrics
        return p.get("rollout"), p.get("reference"), p["policy"], None, p.get("optimizer")
    roll = p.get("rollout", p.get("generate", 0.0) + p.get("rewards", 0.0))
    return (roll, p.get("reference"), p.get("policy_fwd"), p.get("policy_bwd"),
            p.get("optimizer", p.get("clip_adamw")))


def prompt_tokens(shape):
    """Real prompt tokens of one step's rows: 8 x 16 rows of 6 (`ab+cd=`) on the embedded
    default; 8 rows each of the 87- and 82-token prompts on the MiniMind2-small shape."""
    if shape.startswith("qwen05b"):  # 4 rows of the first prompt
        return 4 * 87
    return 128 * 6 if shape == "arith" else 8 * (87 + 82)


def fmt(v, f="{:.2f}"):
    return "—" if v is None else f.format(v)


def case_table(title, runs, roof):
    """The markdown table of one case: every side at 1 and 2 threads."""
    sgemm, read = roof
    lines = [f"#### {title}", "",
             "| program | threads | CPU s/step | wall s/step | cores used | completion tokens "
             "/ step | tokens / CPU s | peak RSS MiB | rollout | reference | policy fwd | "
             "policy bwd | optimizer | rollout: % stream read | reference: % sgemm | policy: % "
             "sgemm | load |", "|" + "---|" * 17]
    for threads in (1, 2):
        for side in SIDES:
            res = runs.get(threads, {}).get(side)
            if not res:
                continue
            if "overtime" in res:
                lines.append(f"| {NAMES[side]} | {threads} | {why(res)} |" + " |" * 14)
                continue
            a = res["args"]
            ph = phases5(res)
            toks = prompt_tokens(a.shape) + res["completion_tokens"]
            sh = g.roofline_shares(a, res, toks, sgemm, read)
            fwd = fmt(ph[2]) + (" (fwd + bwd)" if ph[3] is None else "")
            lines.append(
                f"| {NAMES[side]} | {threads} | **{res['cpu_median']:.2f}** | "
                f"{res['median']:.2f} | {res['cpu_median'] / res['median']:.2f} | "
                f"{res['completion_tokens']:.0f} | "
                f"{res['completion_tokens'] / res['cpu_median']:.0f} | {res['rss_mib']:.0f} | "
                f"{fmt(ph[0])} | {fmt(ph[1])} | {fwd} | {fmt(ph[3])} | {fmt(ph[4])} | "
                f"{fmt(sh.get('rollout % of stream read'), '{:.0f} %')} | "
                f"{fmt(sh.get('reference % of sgemm'), '{:.0f} %')} | "
                f"{fmt(sh.get('policy % of sgemm'), '{:.0f} %')} | {res['load']:.1f} |")
    return lines


def done(res):
    """res is a finished side's result (not missing, not killed)."""
    return bool(res) and "overtime" not in res


def why(res):
    """What happened to a side that has no numbers."""
    if not res["overtime"]:
        return "not run: the run's time budget was spent"
    return f"killed after {res['overtime']:.0f} s wall"


def killed(where, res):
    return (where, f"not measured ({why(res)})", "—")


def verdict(ok):
    return "met" if ok else "**NOT met**"


def target_rows(allruns, busy_res, roof, rate, quick):
    """The issue's targets, one row per case and thread count: (target, where, value, verdict)."""
    rows = []
    mm = [(k, t, r) for k, t, r in allruns if r["shape"] == "minimind"]
    for key, title, r in mm:
        for th in (1, 2):
            x = r["runs"].get(th, {})
            c, where = x.get("c"), f"{key}, {th} thr"
            for side, target, want in (("torch", "grpo ≥ 2.2× PyTorch eager (CPU s/step, "
                                        "fp32)", 2.2),
                                       ("trl", "grpo ≥ 2.5× TRL GRPOTrainer (CPU s/step, fp32)",
                                        2.5)):
                o = x.get(side)
                if not c or not o:
                    continue
                if not done(c) or not done(o):
                    rows.append((target,) + killed(where, c if not done(c) else o))
                    continue
                q = o["cpu_median"] / c["cpu_median"]
                spun = ""  # at 2 threads: did the other side's CPU time blow up (OpenMP spin)?
                one = r["runs"].get(1, {}).get(side)
                if th == 2 and done(one) and o["cpu_median"] > 1.5 * one["cpu_median"]:
                    spun = (f" ({NAMES[side]} took {o['cpu_median'] / one['cpu_median']:.1f}× "
                            "its 1-thread CPU time: its spin on a busy core, see above)")
                rows.append((target, where, f"{q:.2f}×{spun}", verdict(q >= want)))
                if side == "torch":
                    m = c["rss_mib"] / o["rss_mib"]
                    rows.append(("peak RSS ≤ 0.5× PyTorch eager", where, f"{m:.2f}×",
                                 verdict(m <= 0.5)))
    for key, title, r in allruns:
        c1, c2 = r["runs"].get(1, {}).get("c"), r["runs"].get(2, {}).get("c")
        if done(c1) and done(c2):  # issue 30: >= 1.8x on MiniMind2-small, never slower elsewhere
            q, want = c1["median"] / c2["median"], 1.8 if r["shape"] == "minimind" else 1.0
            rows.append((f"2-thread speed-up ≥ {want:g}× (grpo, wall s/step)", key,
                         f"{q:.2f}× ({c1['median']:.2f} → {c2['median']:.2f} s)",
                         verdict(q >= want)))
    rows += bf16_rows(allruns)
    for key, title, r in mm:
        c1 = r["runs"].get(1, {}).get("c")
        if done(c1):
            a = c1["args"]
            sh = g.roofline_shares(a, c1, prompt_tokens(a.shape) + c1["completion_tokens"],
                                   *roof)["rollout % of stream read"]
            rows.append(("decode ≥ 80 % of the streaming read (grpo's rollout, 1 thread; "
                         "prefill and rewards counted in its time)", key, f"{sh:.0f} %",
                         verdict(sh >= 80)))
    for key, title, r in allruns:
        if r["shape"] != "qwen05b":
            continue
        for th in (1, 2):
            c, o = r["runs"].get(th, {}).get("c"), r["runs"].get(th, {}).get("trl")
            where = f"{key}, {th} thr"
            if not c or not o:
                continue
            if not done(c) or not done(o):
                rows.append(("grpo ≥ 2× TRL + peft (CPU s/step)",) +
                            killed(where, c if not done(c) else o))
                continue
            q, m = o["cpu_median"] / c["cpu_median"], c["rss_mib"] / o["rss_mib"]
            rows.append(("grpo ≥ 2× TRL + peft (CPU s/step)", where, f"{q:.2f}×",
                         verdict(q >= 2)))
            rows.append(("peak RSS ≤ 0.5× TRL + peft", where,
                         f"{m:.2f}× ({c['rss_mib']:.0f} / {o['rss_mib']:.0f} MiB)",
                         verdict(m <= 0.5)))
    for key, title, r in allruns:  # the fp32 floor (fp32 cases), the bf16 floor (bf16 case)
        c1, bf16 = r["runs"].get(1, {}).get("c"), r["shape"] == "minimind-bf16"
        if r["shape"] not in ("minimind", "minimind-bf16") or not done(c1) or bf16 and not rate:
            continue
        a = c1["args"]
        q, text = g.against_floor(a, c1, prompt_tokens(a.shape) + c1["completion_tokens"], *roof,
                                  bf16=rate if bf16 else None)
        rows.append((FLOOR_TARGET[bf16], key, f"{q:.2f}× ({text})", verdict(q <= 1.2)))
    for key, (idle, hot) in busy_res.items():
        target = "busy core: 2-thread step next to a spinning process ≤ 2.5× alone (wall)"
        if hot is None:
            rows.append((target, key, "not measured (killed: time limit)", "—"))
            continue
        q = hot["median"] / idle["median"]
        rows.append((target, key, f"{q:.2f}× ({idle['median']:.2f} → {hot['median']:.2f} s)",
                     verdict(q <= 2.5)))
    return rows


def bf16_rows(allruns):
    """Issue 30's bf16 targets: grpo with bf16 compute against PyTorch eager and TRL at their fp32
    CPU defaults (the fp32 case at the same shape and length) and against PyTorch's autocast."""
    shape = {r["shape"]: (key, r["runs"].get(1, {})) for key, _, r in reversed(allruns)}
    key, bf = shape.get("minimind-bf16", ("", {}))
    fp = shape.get("minimind", ("", {}))[1]  # the first (shortest) fp32 case, same length
    c, rows, where = bf.get("c"), [], f"{key}, 1 thr"
    for other, target, want in ((fp.get("torch"), "PyTorch eager fp32", 3),
                                (fp.get("trl"), "TRL GRPOTrainer fp32", 4),
                                (bf.get("torch"), "PyTorch eager bf16 autocast", 2)):
        name = f"grpo bf16 ≥ {want}× {target} (CPU s/step)"
        if not c or not other:
            continue
        if not done(c) or not done(other):
            rows.append((name,) + killed(where, c if not done(c) else other))
            continue
        q = other["cpu_median"] / c["cpu_median"]
        rows.append((name, where, f"{q:.2f}×", verdict(q >= want)))
    return rows


def info_rows(allruns):
    """Ratios that are not targets: the embedded default, the other sides' 2-thread speed-up."""
    out = []
    for key, title, r in allruns:
        for th in (1, 2):
            x = r["runs"].get(th, {})
            c = x.get("c")
            if not done(c):
                continue
            for side in ("torch", "trl"):
                if done(x.get(side)) and r["shape"] == "arith":
                    out.append(f"{key}, {th} thr: {NAMES[side]} / grpo CPU s/step "
                               f"{x[side]['cpu_median'] / c['cpu_median']:.2f}×, grpo / "
                               f"{NAMES[side]} peak RSS {c['rss_mib'] / x[side]['rss_mib']:.2f}×")
        for side in ("torch", "trl"):
            s1, s2 = r["runs"].get(1, {}).get(side), r["runs"].get(2, {}).get(side)
            if done(s1) and done(s2):
                out.append(f"{key}: {NAMES[side]} 2-thread speed-up (wall) "
                           f"{s1['median'] / s2['median']:.2f}×")
    return out


def sh(cmd):
    try:
        return subprocess.run(cmd, cwd=g.ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def header(command, started, roofs, rates, loads, around, quick):
    """loads: (1-minute load average at the end of a run, that run's threads) for each run;
    the machine counts as quiet when no run ended with more than QUIET_LOAD per core beyond its
    own threads. around: the 1-minute load average before the command's first program and
    after its last."""
    others = max(load - threads for load, threads in loads)
    model = re.search(r"(?m)^Model name:\s*(.*)$", sh(["lscpu"]))
    versions = sh(["python3", "-c", "import torch, transformers, trl; print(f'PyTorch "
                   "{torch.__version__}, transformers {transformers.__version__}, TRL "
                   "{trl.__version__}')"])
    (s1, r1), (s2, r2) = roofs
    what = " (--quick: a pipeline test, not the benchmark)" if quick else ""
    lines = [f"### All cases in one run{what}", "",
             "Written by the command below (do not edit by hand: the next run replaces "
             "everything between the two markers).", "",
             "```", command, "```", "",
             f"- {started:%Y-%m-%d %H:%M} – {datetime.datetime.now(datetime.timezone.utc):%H:%M}"
             f" UTC; `lscpu` model name: {model.group(1) if model else '?'}, {os.cpu_count()} "
             f"cores; git {sh(['git', 'describe', '--always', '--dirty'])}; grpo "
             f"RelWithDebInfo; {versions}.",
             f"- Rooflines (build/bench/bench_dense, 1 thread, CPU time), at the start / the "
             f"end: sgemm {s1:.1f} / {s2:.1f} GFLOP/s, streaming read (vector loads, a buffer of "
             f"each size) {g.reads_text(r1)} / {g.reads_text(r2)}; the shares below use the "
             f"higher of each, each phase at the size that holds what it reads."
             + (f" bf16 products (build/bench/bench_gemm with BENCH_GEMM_BF16=1: on the path grpo "
                f"takes, AMX, fp32 fmas or VDPBF16PS; one forward's layer and head products): {rates[0]:.1f} / "
                f"{rates[1]:.1f} GFLOP/s, the bf16 floor at the higher." if all(rates) else ""),
             (f"- **The machine's {os.cpu_count()} cores were shared with other jobs** "
              if others > QUIET_LOAD * os.cpu_count() else
              f"- Quiet machine: nothing else ran beside the benchmark's own programs ")
             + f"(1-minute load average {min(l for l, _ in loads):.1f}–"
             f"{max(l for l, _ in loads):.1f} at the end of the runs, column `load`, which "
             f"counts the run's own threads; beyond them at most {max(others, 0):.1f}, the "
             "average lagging after the 2-thread runs and the busy-core check's spinner; "
             f"{around[0]:.2f} before the first program, {around[1]:.2f} after the last). The "
             "speed and "
             "memory ratios are on **CPU seconds per step** (all threads of the process; a "
             "spinning OpenMP wait counts too). The 2-thread speed-up and the busy-core "
             "slowdown can only be wall-time ratios and carry any noise; `cores used` = CPU s / "
             "wall s.",
             "- At 2 threads on a loaded machine PyTorch and TRL (their OpenMP pool spins while "
             "it waits for a busy core) burn far more CPU time than at 1 thread: their 2-thread "
             "rows and ratios measure that cliff, not their kernels; the 1-thread rows compare "
             "the work.",
             "- One process per program, case and thread count; the first step is a dropped "
             "warm-up where the case says so, the median of the rest is shown (one round, no "
             "repeats). Phases are CPU "
             "seconds: grpo's `time/cpu/...` metrics (policy = forward + loss + backward), the "
             "PyTorch script's own clocks (rollout = generate + rewards), TRL's methods wrapped "
             "(bench/bench_grpo_step_trl.py). tokens / CPU s = completion tokens per CPU second "
             "of the whole step. Roofline shares: rollout = weights + KV cache read per decode "
             "step against the streaming read of a buffer that holds them (L2 for the embedded "
             "default's 3 MB, L3 for MiniMind2-small, memory for Qwen2.5-0.5B); reference / policy = 2 FLOPs per "
             "weight per token + attention (× 3 for forward + backward) against sgemm.", ""]
    return lines


def write_block(lines):
    path = os.path.join(g.ROOT, "BENCHMARKS.md")
    text = open(path, encoding="utf-8").read()
    i, j = text.find(MARK_BEGIN), text.find(MARK_END)
    if i < 0 or j < i:
        sys.exit(f"{path}: expected the markers {MARK_BEGIN} and {MARK_END} (in this order) "
                 "around the generated block")
    block = MARK_BEGIN + "\n" + "\n".join(lines).rstrip() + "\n" + MARK_END
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:i] + block + text[j + len(MARK_END):])
    print(f"wrote the table into {path}")


def main(argv, quick, a=None):
    started = datetime.datetime.now(datetime.timezone.utc)
    load_before = os.getloadavg()[0]
    command = " ".join(["python3", "bench/bench_grpo_step.py"] + argv)
    os.makedirs(g.OUT, exist_ok=True)
    make_models(quick)
    roofs = [g.machine_rooflines()]
    rates = [g.bf16_rate() if has_bf16_dot() else None]
    print(f"rooflines: sgemm {roofs[0][0]:.1f} GFLOP/s, stream read "
          f"{g.reads_text(roofs[0][1])}", flush=True)
    allruns, busy_res = [], {}
    DEADLINE[0] = time.monotonic() + BUDGET_S[quick]
    for key, title, shape, new, steps, warmup, case_limit, check_busy in cases(quick):
        if shape.endswith("-bf16") and not has_bf16_dot():
            print(f"{key}: not run: this CPU has no avx512_bf16", flush=True)
            continue
        runs = {t: run_case(key, shape, new, steps, warmup, t, order, case_limit)
                for t, order in ((1, ["c", "torch", "trl"]), (2, ["c", "trl", "torch"]))}
        allruns.append((key, title, {"shape": shape, "runs": runs}))
        if check_busy and done(runs[2]["c"]) and limit(case_limit):
            busy_res[key] = (runs[2]["c"], busy(key, shape, new, steps, warmup))
    g.TIME_LIMIT[0] = None
    roofs.append(g.machine_rooflines())
    rates.append(g.bf16_rate() if has_bf16_dot() else None)
    roof = (max(r[0] for r in roofs), g.best_reads(roofs[0][1], roofs[1][1]))
    loads = [(res["load"], res["args"].threads) for _, _, r in allruns
             for x in r["runs"].values() for res in x.values() if "load" in res] \
        or [(os.getloadavg()[0], 0)]
    lines = header(command, started, roofs, rates, loads, (load_before, os.getloadavg()[0]),
                   quick)
    for key, title, r in allruns:
        a = next(iter(r["runs"][1].values()))["args"]
        timed = (f"{a.steps - a.warmup} timed step(s) after {a.warmup} warm-up" if a.warmup
                 else f"{a.steps} step, no warm-up")
        lines += case_table(f"{title} (`{key}`; {timed})", r["runs"], roof) + [""]
    lines += ["#### Targets (issues 14 and 30)", "", "| target | case | measured | |",
              "|---|---|---|---|"]
    lines += [f"| {t} | {w} | {v} | {ok} |" for t, w, v, ok in
              target_rows(allruns, busy_res, roof, max(rates) if all(rates) else None,
                          quick)]
    lines += [""] + [f"- {x}" for x in info_rows(allruns)]
    print("\n".join(lines))
    write_block(lines)
    import bench_grpo_step_tail
    bench_grpo_step_tail.main(argv, quick, getattr(a, "continuous", None),
                              getattr(a, "pack_tokens", 1024))
