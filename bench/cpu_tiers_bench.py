#!/usr/bin/env python3
"""polyhal's CPU plugin at every ISA tier this CPU can run, side by side in
one run: BERT inference (generated inputs, seeded weights) at each
precision, with oneDNN capped at the tier by device.isa. A tier stands in
for the CPUs whose best tier it is (avx512_core_vnni: Cascade Lake and Ice
Lake; avx512_core: Skylake; avx2: Haswell to Alder Lake without AVX-VNNI),
as far as oneDNN's kernels go: the cores, caches and clocks stay this
machine's, so the ratios between precisions carry over better than the
rates do. A tier above this CPU is listed as skipped.

  bench/cpu_tiers_bench.py [--build build] [--preset base] [--seq 128] [--batch 8]
                           [--iterations 10] [--tiers auto,avx512_core_vnni,...]

Columns: sequences/s per precision (the default is model.precision mixed,
with what it chose), then mixed / f32 and int8 / f32. int8 is dynamic
(per-row activation steps); "refused" is its refusal, as polyhal says it.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import polyhal_bench  # noqa: E402

TIERS = ["avx512_core_amx_fp16", "avx512_core_amx", "avx512_core_fp16", "avx512_core_bf16",
         "avx512_core_vnni", "avx512_core", "avx2_vnni_2", "avx2_vnni", "avx2"]
PRECISIONS = ["mixed", "f32", "bf16", "int8"]


def tier_runs(build, tier):
    """'' when the CPU has the tier, else polyhal's reason."""
    r = subprocess.run([os.path.join(build, "launcher", "polyhal"), "devices", "--backend", "cpu", "--set",
                        f"device.isa={tier}"], capture_output=True, text=True)
    return "" if r.returncode == 0 else r.stderr.strip().splitlines()[-1]


def rate(build, a, tier, precision):
    args = ["--config", os.path.join(polyhal_bench.ROOT, "configs", "bert-demo-cpu.yaml"),
            "--set", f"model.preset={a.preset}", "--set", f"model.seq_len={a.seq}", "--set", f"batch.micro={a.batch}",
            "--set", f"model.precision={precision}", "--set", f"inference.iterations={a.iterations}",
            "--set", f"device.isa={tier}", "--set", f"device.threads={a.threads}"]
    try:
        s = polyhal_bench.run(build, args)[-1]
    except subprocess.CalledProcessError as e:
        return None, "refused" if e.returncode == 2 else f"exit {e.returncode}"
    return s["sequences_per_second"], s["precision"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    p.add_argument("--preset", default="base")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tiers", default=",".join(TIERS))
    a = p.parse_args()
    cpu = open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].splitlines()[0].strip()
    print(f"BERT-{a.preset} inference, seq {a.seq}, batch {a.batch}, {a.threads} threads, {cpu}; "
          f"sequences/s, oneDNN capped at each tier by device.isa\n")
    print("| tier | mixed (chose) | f32 | bf16 | int8 | mixed / f32 | int8 / f32 |")
    print("|---|---|---|---|---|---|---|")
    for tier in a.tiers.split(","):
        why = tier_runs(a.build, tier)
        if why:
            print(f"| {tier} | skipped: {why} | | | | | |")
            continue
        cells = {}
        for precision in PRECISIONS:
            cells[precision] = rate(a.build, a, tier, precision)
            print(f"{tier} {precision}: {cells[precision]}", file=sys.stderr)

        def shown(precision):
            value, note = cells[precision]
            if value is None:
                return note
            return f"{value:.1f}" + (f" ({note})" if precision == "mixed" else "")

        def ratio(precision):
            value, f32 = cells[precision][0], cells["f32"][0]
            return f"{value / f32:.2f}x" if value and f32 else "-"
        print(f"| {tier} | {shown('mixed')} | {shown('f32')} | {shown('bf16')} | {shown('int8')} "
              f"| {ratio('mixed')} | {ratio('int8')} |", flush=True)


if __name__ == "__main__":
    main()
