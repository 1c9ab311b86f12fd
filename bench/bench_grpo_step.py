#!/usr/bin/env python3
"""bench_grpo_step.py — runs the one-GRPO-step benchmark side by side and prints the table of
bench/grpo_step.md: `grpo train` (C, the real trainer, timed by its metrics' step_time) and
bench/bench_grpo_step_torch.py (PyTorch eager, MiniMind train_grpo.py style), back to back,
ROUNDS times, alternating which side goes first, each under /usr/bin/time -v for the peak RSS.

Both sides: MiniMind2-small shape (random init, written once by --make), B=2 prompts, G=8,
exactly 128 new tokens per row (no EOS id), temperature 1, beta 0.02 (reference model),
loss_type grpo, AdamW, one thread (train.threads = 1, torch.set_num_threads(1),
OMP/OPENBLAS/MKL_NUM_THREADS=1). Each process runs STEPS steps; the first WARMUP are dropped
(first-touch of the activation memory, allocator warm-up) and the median of the rest is its time.

Per round it prints each side's CPU seconds per phase (C: the time/cpu/... metrics of
metrics.jsonl: rollout, reference, policy, optimizer; torch: its own phases).
--new-tokens N (default 128) sets the completion length of both sides; --gradient-checkpointing
runs both with activation recomputation (train.gradient_checkpointing = true; the torch side
model.gradient_checkpointing_enable(), TRL's GRPO default).

--rooflines also runs build/bench/bench_dense briefly for this machine's sgemm and streaming-read
rates (CPU time, 1 thread) and prints each side's phases as shares of them; --busy-core also
times the C step at train.threads = 2 alone and next to a spinning process (the slowdown).

--sides c,torch,trl adds TRL's GRPOTrainer (bench/bench_grpo_step_trl.py; pip install trl) on
the same model, prompts and settings: CPU seconds per optimizer step and peak RSS.

--reward-latency runs only the C side three times on the same step: as is, then with an exec
reward that waits 50 ms per sample (bench/slow_reward.py: latency, not CPU) scored by 1 and by 8
workers ([reward.slow] workers = N, rows_independent = true: the program scores each row alone,
one row per call), and prints each one's median step wall time and what the slow reward adds to
it (issue 33: with workers = 8 at most 10 %). The bench model has no EOS, so every row ends at
the last decode step and scoring cannot overlap decoding: what it measures is the workers'
parallelism (16 rows / 8 workers x 50 ms), the worst case for scoring while decoding.

--long-tail runs issue 31's long-tail case instead (bench/bench_grpo_step_tail.py: B=4 x G=8 x
grad_accum 2, completion lengths forced to a heavy-tailed schedule on both sides, grpo padded vs
packed, static vs continuous decode, TRL on the same lengths; its block in BENCHMARKS.md);
--continuous ROWS caps the continuous-decode arms' rows (sampling.max_live_rows = ROWS; default
one chunk's B x G), --pack-tokens K sets train.max_tokens_per_microbatch (1024), --quick its pipeline test.

--all runs issue 14's whole benchmark in one go and writes its tables into BENCHMARKS.md
(bench/bench_grpo_step_all.py: MiniMind2-small at 128 and 512 new tokens and the embedded
default, 1 and 2 threads, all three sides, rooflines, busy core); --all --quick is the same
pipeline with short completions and few steps, to test it in minutes.

Usage (from the repository root, after building):
  python3 bench/bench_grpo_step.py [--rounds 3] [--steps 4] [--warmup 1] [--micro-batch 0]
                                   [--new-tokens 128] [--gradient-checkpointing] [--rooflines]
                                   [--busy-core] [--sides c,torch,trl]
  python3 bench/bench_grpo_step.py --reward-latency [--steps 4] [--warmup 1] [--rounds 3]
  python3 bench/bench_grpo_step.py --all [--quick] [--continuous [ROWS]]
  python3 bench/bench_grpo_step.py --long-tail [--quick] [--continuous [ROWS]] [--pack-tokens K]
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "build", "bench_grpo_step")
ARITH = os.path.join(OUT, "arith")  # the embedded default's models (grpo init-model + sft)
ARITH_MODEL = [os.path.join(ARITH, "sft")]  # the one its runs load (--all --quick: a short SFT)


def env_of(threads):
    """The environment of every side at `threads` threads (BLAS and OpenMP pools)."""
    n = str(threads)
    return dict(os.environ, OMP_NUM_THREADS=n, OPENBLAS_NUM_THREADS=n, MKL_NUM_THREADS=n)


ENV = env_of(1)


def cpu_seconds(pid):
    """utime + stime of a process from /proc (clock ticks, 10 ms), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError):
        return None


def child_pid(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


class Overtime(Exception):
    """A side ran past its time limit (TIME_LIMIT[0] seconds) and was killed."""


TIME_LIMIT = [None]  # seconds one program may run (--all sets it per case), None = no limit


def timed(cmd, tag, watch=None, env=None):
    """Runs cmd under /usr/bin/time -v; returns (stdout+stderr text, {rss_mib, cpu_pct}).
    watch: a file the program appends one line to per step; then res["cpu_marks"] holds the
    program's CPU seconds each time a line appeared (polled every 20 ms). Past TIME_LIMIT[0]
    seconds the program is killed and Overtime raised."""
    tfile = os.path.join(OUT, f"time_{tag}.txt")
    log = open(os.path.join(OUT, f"out_{tag}.txt"), "w+")
    p = subprocess.Popen(["/usr/bin/time", "-v", "-o", tfile] + cmd, cwd=ROOT, env=env or ENV,
                         stdout=log, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    marks, seen, prog, start = [], 0, None, time.monotonic()
    while p.poll() is None:
        time.sleep(0.02)
        if TIME_LIMIT[0] and time.monotonic() - start > TIME_LIMIT[0]:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            log.close()
            raise Overtime(f"{tag}: killed after {TIME_LIMIT[0]:.0f} s")
        if not watch:
            continue
        prog = prog or child_pid(p.pid)
        try:
            with open(watch) as f:
                n = sum(1 for _ in f)
        except OSError:
            n = 0
        if n > seen and prog:
            c = cpu_seconds(prog)
            if c is not None:
                marks += [c] * (n - seen)
                seen = n
    log.seek(0)
    out = log.read()
    log.close()
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{out[-3000:]}")
    t = open(tfile).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1)) / 1024
    cpu = int(re.search(r"Percent of CPU this job got: (\d+)%", t).group(1))
    return out, {"rss_mib": rss, "cpu_pct": cpu, "cpu_marks": marks,
                 "load": os.getloadavg()[0]}


def threads_of(a):
    return getattr(a, "threads", 1)


def is_arith(a):
    return getattr(a, "shape", "minimind") == "arith"


def is_qwen(a):
    return getattr(a, "shape", "minimind") == "qwen05b"


QWEN_DIR = os.path.join(ROOT, "build", "bench_lora", "qwen2.5-0.5b")  # bench/lora_memory.py's
QWEN_LORA = "\n[lora]\nr = 16\nalpha = 32\ntarget_modules = all-linear\n"


def rows_of(a):
    """Completion rows of a step: 2 x 8 on the MiniMind2-small shape, 8 x 16 on the embedded
    default, 1 x 4 on the Qwen2.5-0.5B shape; a.rows where a case sets it (the long tail)."""
    if getattr(a, "rows", None):
        return a.rows
    return 128 if is_arith(a) else 4 if is_qwen(a) else 16


def make_qwen():
    """The Qwen2.5-0.5B-shaped model (its config's sizes, random init, vocabulary 151936, tied;
    the tokenizer of the MiniMind2-small benchmark model, without EOS), made once by
    bench/lora_memory.py under build/bench_lora/."""
    if not os.path.exists(os.path.join(QWEN_DIR, "model.safetensors")):
        import lora_memory
        lora_memory.make("qwen2.5-0.5b", lora_memory.SHAPES["qwen2.5-0.5b"],
                         os.path.join(OUT, "model"))


def setting(a):
    """The tag of a's settings in file names: micro-batch, new tokens, recomputation, threads."""
    return (("arith_" if is_arith(a) else "q05_" if is_qwen(a) else "")
            + ("full_" if getattr(a, "full_finetune", False) else "")
            + getattr(a, "reward_tag", "") + f"mb{a.micro_batch}"
            + (f"_n{a.new_tokens}" if a.new_tokens != 128 else "")
            + ("_gc" if a.gradient_checkpointing else "")
            + (f"_t{a.threads}" if getattr(a, "threads", 1) != 1 else "")
            + ("_bf16" if getattr(a, "bf16", False) else "")
            + ("frozen" if getattr(a, "bf16", False) and getattr(a, "frozen_bf16_only", False)
               else ""))


def run_file(a):
    """The committed run file with a's steps, micro_batch, completion length and recomputation
    (and a's extra reward section, if any), written under OUT."""
    steps, micro_batch, tag = a.steps, a.micro_batch, setting(a)
    src = open(os.path.join(ROOT, "bench", "bench_grpo_step.ini")).read()
    src = src.replace("path = ../build/bench_grpo_step/model", "path = model")
    src = src.replace("path = bench_grpo_step_prompts.jsonl",
                      "path = ../../bench/bench_grpo_step_prompts.jsonl")
    src = re.sub(r"(?m)^steps = .*$", f"steps = {steps}", src)
    src = re.sub(r"(?m)^micro_batch = .*$", f"micro_batch = {micro_batch}", src)
    src = re.sub(r"(?m)^max_completion_length = .*$", f"max_completion_length = {a.new_tokens}",
                 src)
    src = re.sub(r"(?m)^threads = .*$", f"threads = {getattr(a, 'threads', 1)}", src)
    if a.gradient_checkpointing:
        src = src.replace("micro_batch = ", "gradient_checkpointing = true\nmicro_batch = ")
    if getattr(a, "bf16", False):  # bf16 dot products in every pass (issue 30)
        src = src.replace("[sampling]\n", "[sampling]\nweights_dtype = bf16\n"
                          "compute_dtype = bf16\n", 1)
        src = src.replace("[grpo]\n", "[grpo]\nref_compute_dtype = bf16\n", 1)
        if not getattr(a, "frozen_bf16_only", False):  # the policy's forward and backward too
            src = src.replace("[train]\n", "[train]\ncompute_dtype = bf16\n", 1)
    src = re.sub(r"(?m)^dir = build/bench_grpo_step/runs", f"dir = {OUT}/runs_{tag}", src)
    if is_qwen(a):  # B = 1 x G = 4, LoRA r = 16 on every linear layer unless --full-finetune
        src = src.replace("path = model", f"path = {QWEN_DIR}")
        src = re.sub(r"(?m)^num_generations = .*$", "num_generations = 4", src)
        src = re.sub(r"(?m)^batch_prompts = .*$", "batch_prompts = 1", src)
        src += "" if getattr(a, "full_finetune", False) else QWEN_LORA
    src += getattr(a, "extra_reward", "")
    path = os.path.join(OUT, f"run_{tag}.ini")
    with open(path, "w") as f:
        f.write(src)
    return path


def arith_command(a):
    """`grpo train examples/arith.ini` on the SFT model under ARITH with a's steps, threads and
    completion length, its logs under OUT (checkpoints off); and its metrics file."""
    runs = os.path.join(OUT, f"runs_{setting(a)}")
    sets = {"model.path": ARITH_MODEL[0], "train.steps": a.steps,
            "train.threads": threads_of(a), "sampling.max_completion_length": a.new_tokens,
            "train.micro_batch": a.micro_batch, "log.dir": runs, "log.completions_every": 0,
            "checkpoint.dir": os.path.join(runs, "checkpoints"), "checkpoint.every": 0}
    if a.gradient_checkpointing:
        sets["train.gradient_checkpointing"] = "true"
    cmd = [os.path.join(ROOT, "build", "grpo"), "train",
           os.path.join(ROOT, "examples", "arith.ini")]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    return cmd, os.path.join(runs, "metrics.jsonl")


def run_c(a, tag):
    if is_arith(a):
        cmd, metrics = arith_command(a)
    else:
        cmd = [os.path.join(ROOT, "build", "grpo"), "train", run_file(a)]
        metrics = os.path.join(OUT, f"runs_{setting(a)}", "metrics.jsonl")
    return c_result(a, cmd, metrics, tag, env_of(threads_of(a)))


def c_result(a, cmd, metrics, tag, env):
    """Runs grpo's cmd (its metrics file: metrics) under timed() and reads its steps: wall and
    CPU seconds per step (medians after a.warmup), tokens, CPU seconds per phase; res["rows"] the
    metrics lines. Rows must run to a.new_tokens unless a.lengths_free (EOS: the embedded
    default; the long tail's forced lengths, checked by its caller)."""
    # a fresh log.dir each time: grpo refuses to overwrite another run's logs
    shutil.rmtree(os.path.dirname(metrics), ignore_errors=True)
    _, res = timed(cmd, tag, watch=metrics, env=env)
    with open(metrics) as f:
        rows = [json.loads(line) for line in f]
    steps = [r["step_time"] for r in rows]
    assert is_arith(a) or getattr(a, "lengths_free", False) or all(
        r["completions/mean_length"] == a.new_tokens for r in rows), "a row stopped early"
    res["rows"] = rows
    res["steps"] = steps
    res["median"] = statistics.median(steps[a.warmup:])
    m = res["cpu_marks"]  # CPU time between metrics lines = CPU time of steps 2..
    # (with no warm-up step, step 1's CPU time includes the start: loading the model)
    res["cpu_steps"] = [m[i] - m[i - 1] for i in range(max(a.warmup, 1), len(m))] or m[:1]
    res["cpu_median"] = statistics.median(res["cpu_steps"])
    res["tokens"] = rows[-1]["num_tokens"] / len(rows)  # real tokens of one step's rows
    res["completion_tokens"] = statistics.median(
        r["completions/mean_length"] * rows_of(a) for r in (rows[a.warmup:] or rows))
    res["decode_steps"] = statistics.median(r.get("completions/max_length", a.new_tokens)
                                            for r in (rows[a.warmup:] or rows))
    timed_rows = rows[a.warmup:] or rows  # the phases' CPU seconds (time/cpu/... metrics)
    res["phases"] = {k[len("time/cpu/"):]: statistics.median(r[k] for r in timed_rows)
                     for k in rows[0] if k.startswith("time/cpu/")}
    return res


def run_torch(a, tag):
    cmd = ["python3", os.path.join(ROOT, "bench", "bench_grpo_step_torch.py"), "--model",
           os.path.join(OUT, "model"), "--steps", str(a.steps), "--warmup", str(a.warmup),
           "--threads", str(threads_of(a)), "--micro-batch", str(a.micro_batch),
           "--max-new-tokens", str(a.new_tokens)] + (
               ["--gradient-checkpointing"] if a.gradient_checkpointing else []) + (
               ["--autocast"] if getattr(a, "bf16", False) else [])
    if is_arith(a):  # examples/arith.ini's settings on the same SFT model
        cmd[3] = ARITH_MODEL[0]
        cmd += ["--data", os.path.join(ROOT, "examples", "arith", "train.jsonl"), "--B", "8",
                "--G", "16", "--beta", "0", "--lr", "1e-4", "--loss-type", "dapo", "--rewards",
                "arith", "--stop-at-eos"]
    text, res = timed(cmd, tag, env=env_of(threads_of(a)))
    res["steps"] = [float(x) for x in re.findall(r"(?m)^step \d+: ([0-9.]+) s", text)]
    res["median"] = statistics.median(res["steps"][a.warmup:])
    res["cpu_steps"] = [float(x) for x in re.findall(r"(?m)^step \d+: .*?\(cpu ([0-9.]+) s\)",
                                                     text)][a.warmup:]
    res["cpu_median"] = statistics.median(res["cpu_steps"])
    phases = [dict((k, float(v)) for k, v in re.findall(r"(\w+) ([0-9.]+)", line))
              for line in re.findall(r"(?m)^  phases \(cpu s\) (.*)$", text)][a.warmup:]
    res["phases"] = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    toks = [int(x) for x in re.findall(r"(?m)^step \d+: .* tokens=(\d+)", text)]
    res["completion_tokens"] = statistics.median(toks[a.warmup:] or toks)
    widths = [int(x) for x in re.findall(r"(?m)^step \d+: .* T=(\d+)", text)]
    res["decode_steps"] = statistics.median(widths[a.warmup:] or widths)
    return res


def run_trl(a, tag):
    """bench/bench_grpo_step_trl.py: TRL's GRPOTrainer on the same model, prompts and settings
    (pip install trl first); CPU seconds per optimizer step (one thread: also its wall time)."""
    cmd = ["python3", os.path.join(ROOT, "bench", "bench_grpo_step_trl.py"), "--model",
           os.path.join(OUT, "model"), "--data",
           os.path.join(ROOT, "bench", "bench_grpo_step_prompts.jsonl"), "--steps", str(a.steps),
           "--warmup", str(a.warmup), "--threads", str(threads_of(a)), "--new-tokens",
           str(a.new_tokens)] + (["--gradient-checkpointing"] if a.gradient_checkpointing else [])
    if is_arith(a):
        cmd[3] = ARITH_MODEL[0]
        cmd[5] = os.path.join(ROOT, "examples", "arith", "train.jsonl")
        cmd.append("--arith")
    if is_qwen(a):  # the same B, G and adapters through peft (pip install peft)
        cmd[3] = QWEN_DIR
        cmd += ["--B", "1", "--G", "4"] + ([] if getattr(a, "full_finetune", False)
                                            else ["--lora", "16"])
    cmd += getattr(a, "trl_args", [])  # the long tail: its model, data, batch and lengths
    text, res = timed(cmd, tag, env=env_of(threads_of(a)))
    res["text"] = text
    cpu = [float(x) for x in re.findall(r"(?m)^step \d+ cpu ([0-9.]+)", text)]
    wall = [float(x) for x in re.findall(r"(?m)^step \d+ cpu [0-9.]+ wall ([0-9.]+)", text)]
    res["cpu_steps"] = cpu[a.warmup:] or cpu
    res["steps"] = wall[a.warmup:] or wall
    res["median"] = statistics.median(res["steps"])
    res["cpu_median"] = statistics.median(res["cpu_steps"])
    phases = [dict((k, float(v)) for k, v in re.findall(r"(\w+) ([0-9.]+)", line))
              for line in re.findall(r"(?m)^  phases \(cpu s\) (.*)$", text)]
    phases = phases[a.warmup:] or phases
    res["phases"] = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
    toks = [float(x) for x in re.findall(r"(?m)^  tokens ([0-9.]+)", text)]
    res["completion_tokens"] = statistics.median(toks[a.warmup:] or toks)
    widths = [float(x) for x in re.findall(r"(?m)^  tokens [0-9.]+ longest ([0-9.]+)", text)]
    res["decode_steps"] = statistics.median(widths[a.warmup:] or widths)
    return res


# Buffer sizes (MB) of the streaming-read probe: a decode step reads each model's weights
# (3 MB arith, 52 / 104 MB MiniMind2-small bf16 / fp32, 2 GB Qwen2.5-0.5B) from L2, L3 (480 MB
# here) or memory, and the rate differs by 2x between them (30 / 20 / 15 GB/s on this machine).
STREAM_MB = (4, 16, 64, 128, 256, 2048)


def machine_rooflines():
    """This machine's sgemm GFLOP/s and 1-thread streaming read right now, both by CPU time,
    from build/bench/bench_dense: (sgemm, {MB: GB/s}), the read of a buffer of each of
    STREAM_MB (read_rate picks one for a working set)."""
    exe = os.path.join(ROOT, "build", "bench", "bench_dense")
    out = subprocess.run([exe, "--threads", "1", "--steps", "1", "--rows", "2", "--new", "2"],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, check=True).stdout
    sgemm = float(re.search(r"(?m)^sgemm .*cpu time: ([0-9.]+) GFLOP/s", out).group(1))
    out = subprocess.run([exe, "--stream-mb", ",".join(str(m) for m in STREAM_MB)], cwd=ROOT,
                         env=ENV, capture_output=True, text=True, check=True).stdout
    reads = {int(mb): float(r) for mb, r in re.findall(
        r"(?m)^stream read of ([0-9]+) MB, 1 thread: .*cpu time: ([0-9.]+) GB/s", out)}
    return sgemm, reads


def read_rate(reads, nbytes):
    """The streaming read (GB/s) of a working set of nbytes: the probe's rate at the smallest
    buffer that holds it (the largest probe past them all)."""
    fits = [mb for mb in sorted(reads) if mb * 2 ** 20 >= nbytes]
    return reads[fits[0] if fits else max(reads)]


def reads_text(reads):
    """'4 MB 29.4, 64 MB 24.0, ... GB/s'"""
    return ", ".join(f"{mb} MB {r:.1f}" for mb, r in sorted(reads.items())) + " GB/s"


def best_reads(a, b):
    """The higher rate of two probes at each size."""
    return {mb: max(a[mb], b.get(mb, 0.0)) for mb in a}


def bf16_rate():
    """This machine's bf16 product rate right now (GFLOP/s, 1 thread, CPU time) at the
    MiniMind2-small shapes, from build/bench/bench_gemm with BENCH_GEMM_BF16=1: AMX tiles where
    grpo uses them, else its chain on fp32 fmas (Intel cores) or VDPBF16PS. One forward's products (per layer q, k, v, o, gate, up,
    down; the head in the blocks head.c runs) over the sum of their times at each shape's rate;
    None where bench_gemm prints no bf16 rate (a CPU without avx512_bf16)."""
    env = dict(ENV, BENCH_CLOCK="cpu", BENCH_GEMM_BF16="1")
    out = subprocess.run([os.path.join(ROOT, "build", "bench", "bench_gemm"), "3008", "1"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True).stdout
    c = json.load(open(os.path.join(OUT, "model", "config.json")))
    L, V = c["num_hidden_layers"], c["vocab_size"]
    count = {"q/o": 2 * L, "k/v": 2 * L, "gate/up": 2 * L, "down": L, "headblk": V / 512}
    flops = secs = 0.0
    for line in out.splitlines():
        m = re.match(r"(\S+)\s+N\s+\d+ IC\s+(\d+) OC\s+(\d+) .*?gemm_nt bf16\s+([0-9.]+) "
                     r"GFLOP/s(?:.*?AMX\s+([0-9.]+) GFLOP/s)?", line)
        if m and m.group(1) in count:
            f = count[m.group(1)] * 2.0 * int(m.group(2)) * int(m.group(3))
            flops += f
            secs += f / float(m.group(5) or m.group(4))
    return flops / secs if secs > 0 else None


def speed_targets(a):
    """Issue 30's speed targets of this case, (PyTorch eager, TRL) as grpo's CPU s/step ratios,
    None where the case has none: the Qwen2.5-0.5B shape 2x TRL + peft; bf16 2x PyTorch with
    autocast and 4x TRL (fp32); fp32 2.2x PyTorch eager and 2.5x TRL."""
    if is_qwen(a):
        return None, 2.0
    return (2.0, 4.0) if getattr(a, "bf16", False) else (2.2, 2.5)


def target_text(ratio, target):
    """'target >= Tx: met' / 'NOT met', or 'no target' for a case without one."""
    if target is None:
        return "no target at this shape"
    return f"target >= {target:g}x: {'met' if ratio >= target else 'NOT met'}"


def against_floor(a, res, tokens, sgemm, read, bf16=None):
    """grpo's step (res's median CPU s) over the sum of its phases' floors (phase_floors; bf16:
    the bf16 floor) and that sum written out: (ratio, "T s against rollout r + ... = S s")."""
    fl = phase_floors(a, res, tokens, sgemm, read, bf16)
    total = sum(fl.values())
    return res["cpu_median"] / total, (f"{res['cpu_median']:.2f} s against " + " + ".join(
        f"{k} {v:.2f}" for k, v in fl.items()) + f" = {total:.2f} s")


def model_cost(model_dir=None):
    """From the benchmark model's config.json: weight bytes a decode step reads (every matmul
    weight once), KV-cache bytes per cached position of one row (keys and values of every
    layer), and forward FLOPs per token at sequence length T (2 per matmul weight, plus causal
    attention: q.k and p.v over T/2 keys on average; bench_dense's count)."""
    c = json.load(open(os.path.join(model_dir or os.path.join(OUT, "model"), "config.json")))
    C, L, I, V = c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"], c["vocab_size"]
    NH, NKV = c["num_attention_heads"], c["num_key_value_heads"]
    HD = c.get("head_dim") or C // NH
    mm = L * (2 * C * NH * HD + 2 * C * NKV * HD + 3 * C * I) + C * V
    return 4.0 * mm, 4.0 * L * 2 * NKV * HD, lambda T: 2.0 * mm + 2.0 * L * T * NH * HD


def phase_floors(a, res, tokens, sgemm, read, bf16=None):
    """The fp32 floor of each phase on this machine, in seconds (issue 30): the rollout's reads
    (per decode step one pass over the weights and the rows' KV caches) at the streaming read,
    the reference forward's and the policy's forward + backward (x3; x4 with recomputation)
    FLOPs at sgemm, AdamW's traffic (weights, gradients, two moments read, three written) at the
    streaming read. read: machine_rooflines' {MB: GB/s}, each phase at its working set's.
    tokens: real tokens of the step's rows; the decode steps are res's
    (default a.new_tokens; the longest row where rows end at EOS). Phases that did not run (a
    reference under a millisecond: beta 0) have no floor. bf16 (GFLOP/s, bf16_rate): the floor
    of a step with every pass in bf16 instead: decode reads the weights' bf16 copy (half the
    bytes; the KV cache stays fp32), the products run at that rate, AdamW is fp32 as before."""
    wbytes, kvbytes, fwd = model_cost(ARITH_MODEL[0] if is_arith(a) else
                                      QWEN_DIR if is_qwen(a) else None)
    wread = wbytes / 2 if bf16 else wbytes
    sgemm = bf16 or sgemm
    R = rows_of(a)
    T = tokens / R  # mean row length
    new = res.get("decode_steps", a.new_tokens)
    cached = T - new / 2  # mean cache length over the decode steps
    ph = res.get("phases", {})
    roll = ph.get("rollout", ph.get("generate"))
    pol = ph.get("policy", ph.get("policy_fwd", 0) + ph.get("policy_bwd", 0))
    ref = ph.get("reference")
    passes = 4 if a.gradient_checkpointing else 3
    out = {}
    if roll and roll > 1e-3:
        step = wread + R * kvbytes * cached  # bytes one decode step reads
        out["rollout"] = new * step / 1e9 / read_rate(read, step)
    if ref and ref > 1e-3:
        out["reference"] = fwd(T) * tokens / 1e9 / sgemm
    if pol and pol > 1e-3:
        out["policy"] = passes * fwd(T) * tokens / 1e9 / sgemm
    if not is_qwen(a):  # full fine-tuning: AdamW reads 4 and writes 3 arrays of the weights
        out["optimizer"] = 7 * wbytes / 1e9 / read_rate(read, 4 * wbytes)
    return out


def roofline_shares(a, res, tokens, sgemm, read):
    """res's phases as shares of their floors (phase_floors): the rollout against the streaming
    read (prefill and rewards counted in its time), the reference and policy against sgemm."""
    ph = res.get("phases", {})
    got = {"rollout": ph.get("rollout", ph.get("generate")), "reference": ph.get("reference"),
           "policy": ph.get("policy", ph.get("policy_fwd", 0) + ph.get("policy_bwd", 0))}
    names = {"rollout": "rollout % of stream read", "reference": "reference % of sgemm",
             "policy": "policy % of sgemm"}
    return {names[k]: 100 * f / got[k] for k, f in phase_floors(a, res, tokens, sgemm, read).items()
            if k in names}


SLOW_REWARD = """
[reward.slow]
plugin = builtin.exec
command = python3
command = {script}
command = 0.05
weight = 0.0
rows_independent = true
workers = {workers}
"""


def reward_latency(a):
    """--reward-latency: the C step as is, and with bench/slow_reward.py (50 ms per sample) at
    workers = 1 and 8; median wall s/step of each round, then the medians and the added share."""
    script = os.path.join(ROOT, "bench", "slow_reward.py")
    cases = [("none", ""), ("workers=1", SLOW_REWARD.format(script=script, workers=1)),
             ("workers=8", SLOW_REWARD.format(script=script, workers=8))]
    times = {name: [] for name, _ in cases}
    for r in range(a.rounds):
        for name, extra in (cases if r % 2 == 0 else cases[::-1]):
            b = argparse.Namespace(**vars(a))
            b.extra_reward, b.reward_tag = extra, "slow_" + name.replace("=", "") + "_"
            res = run_c(b, f"c_{setting(b)}_r{r}")
            times[name].append(res["median"])
            print(f"round {r + 1} {name:9s}: steps {' '.join(f'{s:.3f}' for s in res['steps'])} s"
                  f" -> median {res['median']:.3f} s", flush=True)
    base = statistics.median(times["none"])
    print(f"\nno slow reward: {base:.3f} s/step wall")
    for name in ("workers=1", "workers=8"):
        t = statistics.median(times[name])
        print(f"exec reward, 50 ms per sample, {name}: {t:.3f} s/step wall, adds "
              f"{t - base:+.3f} s = {100 * (t - base) / base:+.1f} %"
              + (" (target <= 10 %: " + ("met" if t - base <= 0.1 * base else "NOT met") + ")"
                 if name == "workers=8" else ""))


def busy_core_slowdown(a):
    """The C step at train.threads = 2, alone and with another process spinning on one of the
    cores: median wall s/step of each and their ratio (issue 14: at most ~2.5x)."""
    b = argparse.Namespace(**vars(a))
    b.threads = 2
    idle = run_c(b, f"c_{setting(b)}_idle")["median"]
    spin = subprocess.Popen(["python3", "-c", "while True: pass"])
    try:
        busy = run_c(b, f"c_{setting(b)}_busy")["median"]
    finally:
        spin.kill()
        spin.wait()
    return idle, busy


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--micro-batch", type=int, default=0)
    p.add_argument("--sides", default="c,torch",
                   help="which programs to run, comma-separated: c, torch, trl (TRL's "
                        "GRPOTrainer: pip install trl)")
    p.add_argument("--new-tokens", type=int, default=128, help="completion length of every row")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="activation recomputation on both sides")
    p.add_argument("--rooflines", action="store_true",
                   help="measure sgemm and the streaming read (bench_dense) and print each "
                        "phase's share of them")
    p.add_argument("--busy-core", action="store_true",
                   help="also time the C step at 2 threads alone and next to a spinning process")
    p.add_argument("--reward-latency", action="store_true",
                   help="the C step alone, then with an exec reward that waits 50 ms per sample "
                        "at workers = 1 and 8: the wall time each adds (issue 33)")
    p.add_argument("--all", action="store_true",
                   help="issue 14's whole benchmark in one run (bench/bench_grpo_step_all.py): "
                        "MiniMind2-small at 128 and 512 new tokens and the embedded default, "
                        "1 and 2 threads, grpo / PyTorch / TRL, rooflines, busy core; writes "
                        "the tables into BENCHMARKS.md (the other options are ignored)")
    p.add_argument("--shape", choices=("minimind", "qwen05b"), default="minimind",
                   help="qwen05b: the Qwen2.5-0.5B shape (its config's sizes, random init, "
                        "vocabulary 151936), B=1 x G=4, LoRA r=16 on all linear layers (TRL with "
                        "peft: pip install peft); sides c and trl")
    p.add_argument("--full-finetune", action="store_true",
                   help="with --shape qwen05b: no LoRA (the full fine-tune step, for memory)")
    p.add_argument("--quick", action="store_true",
                   help="with --all: short completions, few steps, a 100-step SFT (tests the "
                        "pipeline in minutes; not the benchmark's numbers)")
    p.add_argument("--threads", type=int, default=1, help="train.threads (and the other sides')")
    p.add_argument("--bf16", action="store_true",
                   help="bf16 compute where each side offers it (the CPU needs avx512_bf16): "
                        "grpo's sampling.weights_dtype/compute_dtype = bf16, "
                        "grpo.ref_compute_dtype = bf16 and train.compute_dtype = bf16 (the "
                        "policy's forward and backward; not with --bf16-frozen-only); "
                        "PyTorch's torch.autocast('cpu', bf16) around generate and both "
                        "forwards (sides c and torch)")
    p.add_argument("--bf16-frozen-only", dest="frozen_bf16_only", action="store_true",
                   help="with --bf16: grpo's frozen passes only (the rollout and the "
                        "reference), the policy's forward and backward in fp32")
    p.add_argument("--long-tail", action="store_true",
                   help="issue 31's long-tail case (bench/bench_grpo_step_tail.py): forced "
                        "heavy-tailed lengths, grpo padded/packed x static/continuous, TRL; "
                        "writes its block into BENCHMARKS.md (the other options but --quick, "
                        "--continuous and --pack-tokens are ignored)")
    p.add_argument("--continuous", type=int, nargs="?", const=0, default=None, metavar="ROWS",
                   help="with --long-tail or --all: the continuous-decode arms' cap "
                        "(sampling.max_live_rows = ROWS; default one chunk's B x G)")
    p.add_argument("--pack-tokens", type=int, default=1024, metavar="K",
                   help="with --long-tail or --all: the packed arms' "
                        "train.max_tokens_per_microbatch")
    a = p.parse_args()
    if a.long_tail:
        import bench_grpo_step_tail
        bench_grpo_step_tail.main(sys.argv[1:], a.quick, a.continuous, a.pack_tokens)
        return
    if a.all or a.quick:
        import bench_grpo_step_all
        bench_grpo_step_all.main(sys.argv[1:], a.quick, a)
        return
    os.makedirs(OUT, exist_ok=True)
    if not os.path.exists(os.path.join(OUT, "model", "model.safetensors")):
        subprocess.run(["python3", os.path.join(ROOT, "bench", "bench_grpo_step_torch.py"),
                        "--make", os.path.join(OUT, "model")], check=True)
    if is_qwen(a):
        make_qwen()
    if a.reward_latency:
        reward_latency(a)
        return
    c_all, t_all, trl_all = [], [], []
    runs = {"c": (run_c, c_all), "torch": (run_torch, t_all), "trl": (run_trl, trl_all)}
    for r in range(a.rounds):
        order = ["c", "torch", "trl"] if r % 2 == 0 else ["trl", "torch", "c"]
        order = [s for s in order if s in a.sides.split(",")]
        for side in order:
            tag = f"{side}_{setting(a)}_r{r}"
            res = runs[side][0](a, tag)
            runs[side][1].append(res)
            phases = " ".join(f"{k} {v:.2f}" for k, v in res.get("phases", {}).items())
            print(f"round {r + 1} {side:5s}: steps {' '.join(f'{s:.2f}' for s in res['steps'])} s"
                  f" -> median {res['median']:.2f} s (CPU "
                  f"{' '.join(f'{s:.2f}' for s in res['cpu_steps'])} -> {res['cpu_median']:.2f} s)"
                  f", peak RSS {res['rss_mib']:.0f} MiB, CPU {res['cpu_pct']}%"
                  + (f", CPU phases {phases}" if phases else ""), flush=True)
    for side, res in (("C", c_all), ("torch", t_all)):
        if res:
            print(f"{side}: {statistics.median(x['median'] for x in res):.2f} s/step wall, "
                  f"{statistics.median(x['cpu_median'] for x in res):.2f} s/step CPU, peak RSS "
                  f"{statistics.median(x['rss_mib'] for x in res):.0f} MiB")
    if a.rooflines and c_all:
        sgemm, read = machine_rooflines()
        print(f"rooflines (1 thread, CPU time): sgemm {sgemm:.1f} GFLOP/s, streaming read "
              f"{reads_text(read)}")
        rate = bf16_rate() if getattr(a, "bf16", False) else None
        if rate:
            print(f"bf16 products (bench_gemm, 1 thread, CPU time): {rate:.1f} GFLOP/s")
        for side, res in (("C", c_all), ("torch", t_all)):
            for r, x in enumerate(res):
                shares = roofline_shares(a, x, c_all[0]["tokens"], sgemm, read)
                print(f"  {side} round {r + 1}: "
                      + ", ".join(f"{k} {v:.0f}%" for k, v in shares.items()))
        for r, x in enumerate(c_all):
            q, text = against_floor(a, x, c_all[0]["tokens"], sgemm, read, rate)
            print(f"  C round {r + 1}: {text} ({'bf16' if rate else 'fp32'} floor): {q:.2f}x "
                  f"(target <= 1.2x: {'met' if q <= 1.2 else 'NOT met'})")
    if a.busy_core:
        idle, busy = busy_core_slowdown(a)
        print(f"busy core (C, 2 threads): {idle:.2f} s/step alone, {busy:.2f} s/step next to a "
              f"spinning process: {busy / idle:.2f}x (target <= 2.5x: "
              f"{'met' if busy / idle <= 2.5 else 'NOT met'})")
    if c_all and trl_all:
        cc = statistics.median(x["cpu_median"] for x in c_all)
        lc = statistics.median(x["cpu_median"] for x in trl_all)
        crss = statistics.median(x["rss_mib"] for x in c_all)
        lrss = statistics.median(x["rss_mib"] for x in trl_all)
        print(f"TRL GRPOTrainer: {lc:.2f} s/step CPU, peak RSS {lrss:.0f} MiB; C {cc:.2f} s/step "
              f"CPU, {crss:.0f} MiB: speed-up TRL/C {lc / cc:.2f}x "
              f"({target_text(lc / cc, speed_targets(a)[1])}), memory C/TRL {crss / lrss:.2f}x")
    if not c_all or not t_all:
        return
    cm = statistics.median(x["median"] for x in c_all)
    tm = statistics.median(x["median"] for x in t_all)
    ratios = [t["median"] / c["median"] for c, t in zip(c_all, t_all)]
    cc = statistics.median(x["cpu_median"] for x in c_all)
    tc = statistics.median(x["cpu_median"] for x in t_all)
    crss = statistics.median(x["rss_mib"] for x in c_all)
    trss = statistics.median(x["rss_mib"] for x in t_all)
    gc = ", gradient checkpointing" if a.gradient_checkpointing else ""
    print(f"\nmicro_batch {a.micro_batch or 16}, {a.new_tokens} new tokens{gc}: C {cm:.2f} s/step "
          f"(rounds {min(x['median'] for x in c_all):.2f}..{max(x['median'] for x in c_all):.2f}),"
          f" torch {tm:.2f} s/step "
          f"(rounds {min(x['median'] for x in t_all):.2f}..{max(x['median'] for x in t_all):.2f})")
    print(f"speed-up torch/C: {tm / cm:.2f}x (per round {' '.join(f'{x:.2f}' for x in ratios)}) "
          f"{target_text(tm / cm, speed_targets(a)[0])}")
    print(f"CPU time per step: C {cc:.2f} s, torch {tc:.2f} s, speed-up {tc / cc:.2f}x")
    print(f"peak RSS: C {crss:.0f} MiB, torch {trss:.0f} MiB, C/torch {crss / trss:.2f}x "
          f"target <= 0.5x: {'met' if crss / trss <= 0.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
