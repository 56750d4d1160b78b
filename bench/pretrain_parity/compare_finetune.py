#!/usr/bin/env python3
"""Compares fine-tuning by polyhal and by transformers (finetune.sh): for
each pre-trained model (polyhal's and the reference's) and each fine-tuner,
the dev accuracy after the last epoch, averaged over the seeds (each seed
draws the classifier both fine-tuners start from, and the dropout masks).
Prints a table, writes JSON and a PNG, and exits 1 when a comparison misses
the test: mean dev accuracies within --accuracy-points of each other

- per pre-trained model, fine-tuned by polyhal against by transformers (the
  fine-tuners agree on the same weights), and
- end to end: polyhal's model fine-tuned by polyhal against the reference's
  model fine-tuned by transformers.

  compare_finetune.py --run NAME DIR [--run ...] --seeds 1 2 3 --png OUT.png --json OUT.json
"""
import argparse
import json
import statistics
import sys

from compare import read, smoothed

TRAINERS = ("polyhal", "reference")
SOURCES = ("polyhal", "reference")


def mean_sd(values):
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--run", nargs=2, action="append", metavar=("NAME", "DIR"), required=True)
    a.add_argument("--seeds", nargs="+", required=True)
    a.add_argument("--accuracy-points", type=float, default=1.0)
    a.add_argument("--window", type=int, default=20)
    a.add_argument("--png")
    a.add_argument("--json")
    args = a.parse_args()
    results, curves, ok = [], [], True
    for name, directory in args.run:
        cells = {}
        for trainer in TRAINERS:
            for source in SOURCES:
                finals, losses = [], []
                for seed in args.seeds:
                    steps, evals, _ = read(f"{directory}/{trainer}-on-{source}-{seed}.jsonl")
                    finals.append(evals[-1]["accuracy"])
                    losses.append(steps)
                mean, sd = mean_sd(finals)
                cells[trainer, source] = dict(accuracies=finals, mean=mean, sd=sd)
                curves.append((name, trainer, source, smoothed(losses[0], args.window)))
        checks = [(f"{source}'s model: polyhal vs transformers fine-tuning", ("polyhal", source),
                   ("reference", source)) for source in SOURCES]
        checks.append(("end to end: polyhal+polyhal vs transformers+transformers",
                       ("polyhal", "polyhal"), ("reference", "reference")))
        tests = []
        for what, ours, theirs in checks:
            points = 100 * (cells[ours]["mean"] - cells[theirs]["mean"])
            passed = abs(points) <= args.accuracy_points
            ok = ok and passed
            tests.append(dict(test=what, points=points, passed=passed))
        results.append(dict(run=name, seeds=args.seeds, cells={
            f"{t} fine-tuning {s}'s model": c for (t, s), c in cells.items()}, tests=tests))
        print(f"{name}: dev accuracy after the last epoch, mean (sd) over seeds {' '.join(args.seeds)}")
        print(f"  {'pre-trained by':<16} {'polyhal fine-tuning':>22} {'transformers fine-tuning':>26}")
        for source in SOURCES:
            row = [cells[t, source] for t in TRAINERS]
            print(f"  {'polyhal' if source == 'polyhal' else 'transformers':<16} "
                  + "".join(f"{100 * c['mean']:>17.2f} ({100 * c['sd']:.2f})" for c in row))
        for t in tests:
            print(f"  {t['test']}: {t['points']:+.2f} points  {'pass' if t['passed'] else 'FAIL'}")
    print(f"test: mean dev accuracies within {args.accuracy_points} point(s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(accuracy_points=args.accuracy_points, runs=results), f, indent=2)
            f.write("\n")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        styles = {("polyhal", "polyhal"): "-", ("reference", "reference"): "--",
                  ("polyhal", "reference"): ":", ("reference", "polyhal"): "-."}
        labels = {"polyhal": "polyhal", "reference": "transformers"}
        for n, (name, _) in enumerate(args.run):
            for run, trainer, source, curve in curves:
                if run == name:
                    left.plot(list(curve), list(curve.values()), color=f"C{n}",
                              linestyle=styles[trainer, source],
                              label=f"{name}: {labels[trainer]} fine-tuning {labels[source]}'s")
        bars, heights, errors = [], [], []
        for r in results:
            for key, c in r["cells"].items():
                bars.append(f"{r['run']}\n{key.replace(' fine-tuning ', ' on ').replace('reference', 'transformers')}")
                heights.append(100 * c["mean"])
                errors.append(100 * c["sd"])
        right.bar(range(len(bars)), heights, yerr=errors, color=[f"C{i // 4}" for i in range(len(bars))])
        right.set_xticks(range(len(bars)), bars, rotation=30, ha="right", fontsize=7)
        low = min(heights) - 5
        right.set_ylim(max(0, low), min(100, max(heights) + 3))
        left.set(xlabel="step", ylabel=f"training loss (mean of {args.window} steps, seed {args.seeds[0]})",
                 title="fine-tuning BERT-mini: networking vs filesystems docs")
        right.set(ylabel="dev accuracy % (mean, sd over seeds)", title="after the last epoch")
        left.legend(fontsize=7)
        left.grid(alpha=0.3)
        right.grid(alpha=0.3, axis="y")
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
