#!/usr/bin/env python3
"""The CPU plugin on oneDNN 2.6 (Debian 12, this machine's build) and on
oneDNN 3.7 (Debian 13, the build in scripts/debian13-root.sh's root), side
by side in one run on the same CPU, work and threads: BERT inference
(generated inputs, seeded weights) at each precision, alternating the two
builds, the best of `--repeats` runs each. Prints a Markdown table with
the kernels each ran (linear and attention, as polyhal names them).

  sudo bench/onednn_versions.py [--preset base] [--seq 128] [--batch 8] [--iterations 10]
                                [--repeats 2] [--precisions f32,bf16,int8,mixed]

Needs root (the Debian 13 side runs in a chroot) and both builds:
scripts/build.sh here, and scripts/debian13-test.sh (which builds /build in
the root).
"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIDES = {
    "oneDNN 2.6 (Debian 12)": [os.path.join(ROOT, "build", "launcher", "polyhal")],
    "oneDNN 3.7 (Debian 13)": [os.path.join(ROOT, "scripts", "debian13-run.sh"), "/build/launcher/polyhal"],
}
CONFIG = {"oneDNN 2.6 (Debian 12)": os.path.join(ROOT, "configs", "bert-demo-cpu.yaml"),
          "oneDNN 3.7 (Debian 13)": "/src/configs/bert-demo-cpu.yaml"}


def run(side, a, precision):
    """(sequences/s, linear kernel, attention kernel) or (None, reason, '')."""
    args = SIDES[side] + ["run", "--config", CONFIG[side], "--set", f"model.preset={a.preset}",
                          "--set", f"model.seq_len={a.seq}", "--set", f"batch.micro={a.batch}",
                          "--set", f"model.precision={precision}",
                          "--set", f"inference.iterations={a.iterations}",
                          "--set", f"device.threads={a.threads}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        lines = (r.stderr or r.stdout).strip().splitlines()
        return None, lines[-1] if lines else f"exit {r.returncode}", ""
    rate = re.search(r"([0-9.]+) sequences/s", r.stdout)
    linear = re.search(r"^\s+linear\s+[0-9.]+ ms\s+(.*)$", r.stdout, re.M)
    attention = re.search(r"^\s+attention\s+[0-9.]+ ms\s+(.*)$", r.stdout, re.M)
    return (float(rate.group(1)) if rate else None, linear.group(1) if linear else "?",
            attention.group(1) if attention else "?")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--preset", default="base")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--precisions", default="f32,bf16,int8,mixed")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("onednn_versions: run as root: the oneDNN 3.7 side runs in a chroot")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"BERT-{a.preset} inference, seq {a.seq}, batch {a.batch}, {a.threads} threads, on {cpu}; "
          f"best of {a.repeats} alternating runs\n")
    print("| precision | build | sequences/s | 3.7 / 2.6 | linear | attention |")
    print("|---|---|---|---|---|---|")
    for precision in a.precisions.split(","):
        best = {}
        for _ in range(a.repeats):
            for side in SIDES:
                rate, linear, attention = run(side, a, precision)
                if side not in best or (rate or 0) > (best[side][0] or 0):
                    best[side] = (rate, linear, attention)
        old, new = (best[s][0] for s in SIDES)
        for side in SIDES:
            rate, linear, attention = best[side]
            ratio = f"{new / old:.2f}" if side.startswith("oneDNN 3") and old and new else ""
            shown = f"{rate:.1f}" if rate else f"refused: {linear}"
            print(f"| {precision} | {side} | {shown} | {ratio} | {linear if rate else ''} | {attention} |")


if __name__ == "__main__":
    main()
