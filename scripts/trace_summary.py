#!/usr/bin/env python3
"""Where the time of a polyhal step trace goes (polyhal run --profile).

  python3 scripts/trace_summary.py TRACE.json [--top N]

Prints, over the traced steps: the wall time of the steps, each kernel kind's
time (with its implementations), each host phase's own time (its slice minus
the slices inside it), and what no slice covers. Reads only the trace-event
JSON (Python's standard library); the same numbers Perfetto shows.
"""
import argparse
import collections
import json
import signal
import sys


def own_times(slices):
    """Each slice's duration minus its direct children's, per track."""
    own = {}
    by_track = collections.defaultdict(list)
    for s in slices:
        by_track[(s["pid"], s["tid"])].append(s)
    for track in by_track.values():
        track.sort(key=lambda s: (s["ts"], -s["dur"]))
        stack = []
        for s in track:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= s["ts"] + 1e-3:
                stack.pop()
            own[id(s)] = s["dur"]
            if stack:
                own[id(stack[-1])] -= s["dur"]
            stack.append(s)
    return own


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    try:
        with open(args.trace, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"trace_summary: {args.trace}: {e}")
    slices = [e for e in trace.get("traceEvents", []) if e.get("ph") == "X"]
    other = trace.get("otherData", {})
    steps = [s for s in slices if s.get("cat") == "step"]
    if steps:  # one track's steps: a pipeline's stages each hold every step
        first = (steps[0]["pid"], steps[0]["tid"])
        steps = [s for s in steps if (s["pid"], s["tid"]) == first]
    if not steps:
        sys.exit(f"trace_summary: {args.trace}: no step slices (was the window inside the run?)")
    timeline = other.get("timeline", "measured")
    # Shares are of the steps' time; host phases between steps (a
    # checkpoint, an evaluation) are shown against it too.
    wall = sum(s["dur"] for s in steps)
    outside = sum(s["dur"] for s in slices if s.get("cat") == "host" and s["name"] in
                  ("checkpoint", "evaluation"))
    own = own_times(slices)
    # A pipeline's stages run side by side, each on a track of its own: their
    # kernels add up to more than the steps' wall time, so shares are of the
    # tracks' time (tracks x the steps), never over 100%.
    tracks = {(s["pid"], s["tid"]) for s in slices if s.get("cat") == "kernel"} or {None}
    capacity = wall * len(tracks)
    if timeline == "estimated":
        print("(estimated by the device model, not measured; kernels of the first micro-batches only)")
    kernels = collections.defaultdict(lambda: [0.0, 0, set()])
    phases = collections.defaultdict(float)
    for s in slices:
        if s.get("cat") == "kernel":
            k = kernels[s["name"]]
            k[0] += s["dur"]
            k[1] += 1
            k[2].add(s.get("args", {}).get("implementation", "(estimated)" if timeline == "estimated" else "?"))
        elif s.get("cat") in ("host", "collective", "phase", "pipeline", "step"):
            name = s["name"].split(" ")[0] if s["cat"] in ("step", "pipeline") else s["name"]
            if name.endswith("(overlapped)"):  # on a track of its own, under backward
                name += ", concurrent: not part of the steps' time"
            phases[f'{s["cat"]}: {name}'] += own[id(s)]
    print(f"{args.trace}: {timeline} trace of steps {other.get('steps')}, {len(steps)} step slice(s), "
          f"{wall / 1e3:.1f} ms of steps" +
          (f", {outside / 1e3:.1f} ms of checkpoints and evaluations between them" if outside else ""))
    if len(tracks) > 1:
        print(f"({len(tracks)} tracks run side by side (pipeline stages): shares are of "
              f"{len(tracks)} x {wall / 1e3:.1f} ms)")
    print(f"\n{'kernel':<24} {'ms':>9} {'share':>6} {'calls':>6}  implementation")
    for name, (t, calls, impls) in sorted(kernels.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{name:<24} {t / 1e3:>9.1f} {100 * t / capacity:>5.1f}% {calls:>6}  {', '.join(sorted(impls))}")
    width = max([40] + [len(name) for name in phases])
    print(f"\n{'own time outside kernels':<{width}} {'ms':>9} {'share of the steps':>6}")
    for name, t in sorted(phases.items(), key=lambda kv: -kv[1])[: args.top]:
        if t > 0:
            print(f"{name:<{width}} {t / 1e3:>9.1f} {100 * t / capacity:>5.1f}%")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quietly stop when piped into head
    main()
