#!/usr/bin/python3
"""Step time with the gradient all-reduce overlapped with backward
(collective.overlap: true, the default) and after it (false), measured side
by side on this host: 2 MPI ranks (one core each), 2 replica threads in
one process, and 2 MPI ranks on 2 "hosts" (network namespaces, root only)
whose links are capped at 2 Gb/s as a network would, pre-training BERT at seq 128, one micro-batch per step (so
the whole reduction can hide behind that micro-batch's backward). Prints
engine | model | overlap | median step s | all-reduce waited s | gain.

Both settings give the same values bit for bit
(Mpi.OverlappedAllReduceGivesTheSameStateBitForBit); only the time differs.

  /usr/bin/python3 bench/overlap_allreduce.py [--build build] [--preset base] [--steps 6]
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

import polyhal_bench

CONFIG = """backend: cpu
task: pretrain
model: {{preset: {preset}, seq_len: 128, precision: bf16}}
batch: {{micro: {micro}, grad_accum: 1}}
data: {{source: generated, max_predictions: 20}}
optimizer: {{name: lamb, learning_rate: 0.001}}
device: {{cpu: {{threads: 1}}}}
collective: {{timeout_seconds: 600}}
steps: {steps}
"""


def measure(build, config, engine, overlap):
    with tempfile.TemporaryDirectory() as tmp:
        metrics = os.path.join(tmp, "m.jsonl")
        polyhal = os.path.join(build, "launcher", "polyhal")
        args = ["run", "--config", config, "--set", f"collective.overlap={overlap}",
                "--metrics-out", metrics, "--progress", "none"]
        if engine.startswith("2 hosts"):
            command = ["bash", os.path.join(polyhal_bench.ROOT, "scripts", "netns-hosts.sh"), "2", "--",
                       "-np", "2", polyhal] + args + ["--set", "collective.engine=mpi"]
        elif engine == "mpi":
            command = ["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "core", polyhal] + args + [
                "--set", "collective.engine=mpi"]
        else:
            command = [polyhal] + args + ["--set", "batch.replicas=2"]
        env = dict(os.environ)
        if engine.startswith("2 hosts"):
            env["NETNS_RATE"] = engine.split(", ")[1].split(" ")[0]
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        records = [json.loads(line) for line in open(metrics)]
    steps = [r["seconds"] for r in records if r.get("event") == "step"][1:]  # the first warms up
    summary = records[-1]
    waited = None
    for op in summary.get("profile", []):
        if op.get("op") == "gradient all-reduce":
            waited = op["seconds"] / max(op["calls"], 1)
    return statistics.median(steps), waited


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(polyhal_bench.ROOT, "build"))
    parser.add_argument("--preset", default="base")
    parser.add_argument("--micro", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "overlap.yaml")
        with open(config, "w") as f:
            f.write(CONFIG.format(preset=a.preset, micro=a.micro, steps=a.steps))
        print("| engine | model | overlap | median step s | all-reduce waited s | gain |")
        print("|---|---|---|---|---|---|")
        for engine in ("mpi", "local", "2 hosts, 2gbit links"):
            after, after_wait = measure(a.build, config, engine, "false")
            during, during_wait = measure(a.build, config, engine, "true")
            for name, step, wait in (("after backward", after, after_wait), ("during backward", during, during_wait)):
                gain = "" if step is after else f"{after / during:.2f}x"
                shown = "-" if wait is None else f"{wait:.3f}"
                print(f"| {engine} | BERT-{a.preset} seq 128 micro {a.micro} | {name} | {step:.3f} | {shown} | {gain} |")


if __name__ == "__main__":
    main()
