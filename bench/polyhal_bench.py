"""Running polyhal from the side-by-side benchmarks: one workload with its
metrics, and the oneDNN GEMM ceiling (polyhal matmul-bench on given shapes)."""
import importlib
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def require(name, how):
    """Imports module `name`, or exits with a sentence (not a traceback)
    naming the script, the module, this Python and `how` to get it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        sys.exit(f"{os.path.basename(sys.argv[0])}: needs the Python module '{name}', which "
                 f"{sys.executable} cannot import ({e}): {how}")


def run(build, args, check=True):
    """`polyhal run ARGS --metrics-out F`, returning F's JSON lines. LD_PRELOAD
    (the OpenBLAS given to PyTorch) is not passed on: polyhal does not use it.
    `check` False accepts exit 1 (--compile-only of a plan that does not fit)."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        subprocess.run([os.path.join(build, "launcher", "polyhal"), "run", "--metrics-out", metrics] + args,
                       check=check, stdout=subprocess.DEVNULL, env=env)
        with open(metrics) as f:
            return [json.loads(line) for line in f]


def gemm_rates(build, shapes, threads, iterations=20, dtype="bf16"):
    """GFLOP/s of oneDNN's matmul in `dtype` (f32 out) at each (m, n, k) in
    `shapes`, measured by polyhal's matmul-bench on the cpu plugin."""
    distinct = sorted(set(shapes))
    listed = "[" + ",".join(f"[{m},{n},{k}]" for m, n, k in distinct) + "]"
    rows = run(build, ["--config", os.path.join(ROOT, "configs", "matmul-bench-cpu.yaml"), "--set",
                       f"matmul_bench.shapes={listed}", "--set", f"matmul_bench.iterations={iterations}", "--set",
                       f"matmul_bench.dtype={dtype}", "--set",
                       f"device.threads={threads}"])
    return {(r["m"], r["n"], r["k"]): r["gflops"] for r in rows if r.get("event") == "matmul"}


def ceiling_seconds(gemms, rates):
    """Time of `gemms` [(m, n, k, count)] at the measured `rates` (GFLOP/s per shape)."""
    return sum(count * 2.0 * m * n * k / (rates[(m, n, k)] * 1e9) for m, n, k, count in gemms)


def pretrain_step_rate(build, preset, seq, batch, precision, steps, dropout, predictions, threads, optimizer="lamb"):
    """Sequences per second of polyhal's training step, the first step left out."""
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "train.yaml")
        with open(config, "w") as f:
            f.write(f"backend: cpu\ndevice: {{threads: {threads}}}\ntask: pretrain\n"
                    f"model: {{preset: {preset}, seq_len: {seq}, precision: {precision}, dropout: {dropout}}}\n"
                    f"batch: {{micro: {batch}}}\ndata: {{source: generated, max_predictions: {predictions}}}\n"
                    f"optimizer: {{name: {optimizer}, learning_rate: 0.001, weight_decay: 0.01}}\nsteps: {steps + 1}\n")
        rows = run(build, ["--config", config])
    times = [r["seconds"] for r in rows if r.get("event") == "step"][1:]  # the first pays first-touch
    return batch * len(times) / sum(times)
