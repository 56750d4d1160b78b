#!/usr/bin/env python3
"""Compares polyhal's pre-training with the reference trainer's
(reference_trainer.py) run for run: the loss curves, smoothed by a moving
average, and the held-out evaluations. Prints a table, writes the numbers
as JSON and the curves as a PNG, and exits 1 when a run misses the test:

- mean absolute difference of the smoothed loss curves (window --window
  steps, from the first full window) at most --loss-tolerance, and
- final masked-LM accuracy on the held-out data within --accuracy-points.

  compare.py --run NAME POLYHAL.jsonl REFERENCE.jsonl [--run ...] --png OUT.png --json OUT.json
"""
import argparse
import json
import sys


def read(path):
    steps, evals, summary = {}, [], {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("event") == "step":
                steps[r["step"]] = r["loss"]
            elif r.get("event") == "eval":
                evals.append(r)
            elif r.get("event") == "summary":
                summary = r
    return steps, evals, summary


def smoothed(losses, window):
    keys = sorted(losses)
    values = [losses[k] for k in keys]
    out, total = {}, 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        if i + 1 >= window:
            out[keys[i]] = total / window
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--run", nargs=3, action="append", metavar=("NAME", "POLYHAL", "REFERENCE"),
                   required=True)
    a.add_argument("--window", type=int, default=100)
    a.add_argument("--loss-tolerance", type=float, default=0.1)
    a.add_argument("--accuracy-points", type=float, default=1.0)
    a.add_argument("--png")
    a.add_argument("--json")
    args = a.parse_args()
    results, curves, ok = [], [], True
    for name, ours_path, theirs_path in args.run:
        ours, ours_eval, ours_summary = read(ours_path)
        theirs, theirs_eval, theirs_summary = read(theirs_path)
        window = min(args.window, max(1, len(ours) // 4))
        a_s, b_s = smoothed(ours, window), smoothed(theirs, window)
        common = sorted(set(a_s) & set(b_s))
        mad = sum(abs(a_s[k] - b_s[k]) for k in common) / max(1, len(common))
        final_ours, final_theirs = ours_eval[-1], theirs_eval[-1]
        points = 100 * (final_ours["mlm_accuracy"] - final_theirs["mlm_accuracy"])
        passed = mad <= args.loss_tolerance and abs(points) <= args.accuracy_points
        ok = ok and passed
        results.append(dict(
            run=name, steps=len(ours), window=window, smoothed_loss_mad=mad,
            polyhal_final_loss=a_s[common[-1]], reference_final_loss=b_s[common[-1]],
            polyhal_mlm_accuracy=final_ours["mlm_accuracy"],
            reference_mlm_accuracy=final_theirs["mlm_accuracy"], accuracy_points=points,
            polyhal_nsp_accuracy=final_ours["nsp_accuracy"],
            reference_nsp_accuracy=final_theirs["nsp_accuracy"],
            polyhal_seconds=ours_summary.get("seconds"),
            reference_seconds=theirs_summary.get("seconds"),
            reference=theirs_summary.get("engine"), passed=passed))
        curves.append((name, a_s, b_s, ours_eval, theirs_eval))
    print(f"{'run':<10} {'steps':>6} {'smoothed loss MAD':>18} {'final loss p/r':>16} "
          f"{'eval MLM acc p/r':>18} {'diff (pts)':>10}  test")
    for r in results:
        print(f"{r['run']:<10} {r['steps']:>6} {r['smoothed_loss_mad']:>18.4f} "
              f"{r['polyhal_final_loss']:>7.3f}/{r['reference_final_loss']:<7.3f} "
              f"{r['polyhal_mlm_accuracy']:>8.4f}/{r['reference_mlm_accuracy']:<8.4f} "
              f"{r['accuracy_points']:>+10.2f}  {'pass' if r['passed'] else 'FAIL'}")
    print(f"test: smoothed-loss MAD <= {args.loss_tolerance}, final eval masked-LM accuracy within "
          f"{args.accuracy_points} point(s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(window=args.window, loss_tolerance=args.loss_tolerance,
                           accuracy_points=args.accuracy_points, runs=results), f, indent=2)
            f.write("\n")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        for n, (name, a_s, b_s, ae, be) in enumerate(curves):
            color = f"C{n}"
            left.plot(list(a_s), list(a_s.values()), color=color, label=f"polyhal {name}")
            left.plot(list(b_s), list(b_s.values()), color=color, linestyle="--",
                      label=f"transformers {name}")
            right.plot([e["step"] for e in ae], [e["mlm_accuracy"] for e in ae], color=color,
                       marker="o", label=f"polyhal {name}")
            right.plot([e["step"] for e in be], [e["mlm_accuracy"] for e in be], color=color,
                       linestyle="--", marker="x", label=f"transformers {name}")
        left.set(xlabel="step", ylabel=f"training loss (MLM + NSP, mean of {args.window} steps)",
                 title="BERT-mini pre-training on linux-doc text, LAMB")
        right.set(xlabel="step", ylabel="held-out masked-LM accuracy (MLPerf)",
                  title="evaluation on held-out documents")
        left.legend()
        right.legend()
        left.grid(alpha=0.3)
        right.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
