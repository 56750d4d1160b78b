#!/usr/bin/env python3
"""A picture of a polyhal step trace (polyhal run --profile), for the README.

  python3 scripts/trace_picture.py TRACE.json OUT.png [--title TEXT] [--zoom A:B]

Draws each track as a row, nested slices stacked beneath their parents and
coloured by kind (step, phase, kernel, host, collective, pipeline), as a trace
viewer shows them. Needs matplotlib (pip install matplotlib; build/peer-venv
has it). The interactive view is ui.perfetto.dev or chrome://tracing.
"""
import argparse
import collections
import json
import sys

COLOURS = {"step": "#c9d0d6", "pipeline": "#9ecae1", "phase": "#56b4e9", "kernel": "#0072b2",
           "host": "#e69f00", "collective": "#d55e00"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("out")
    parser.add_argument("--title", default="")
    parser.add_argument("--zoom", help="also draw milliseconds A to B of the trace, enlarged")
    args = parser.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("trace_picture: needs matplotlib (pip install matplotlib)")
    with open(args.trace, encoding="utf-8") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    tracks = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            tracks[e["tid"]].append(e)
    start = min(e["ts"] for t in tracks.values() for e in t)
    rows, labels, y = [], [], 0
    for tid in sorted(tracks):
        # The file lists a track's slices outer first, by start: keep that order.
        slices = sorted(tracks[tid], key=lambda s: (s["ts"], -s["dur"]))
        stack, depth_of = [], []
        for s in slices:
            while stack and stack[-1] <= s["ts"] + 1e-3:
                stack.pop()
            depth_of.append(len(stack))
            stack.append(s["ts"] + s["dur"])
        depth = max(depth_of) + 1
        for s, d in zip(slices, depth_of):
            rows.append((y + d, s))
        labels.append((y + (depth - 1) / 2, names.get(tid, str(tid))))
        y += depth + 1
    zoom = [float(v) for v in args.zoom.split(":")] if args.zoom else None
    panels = 2 if zoom else 1
    fig, axes = plt.subplots(panels, 1, figsize=(12, panels * max(2.5, 0.28 * y + 1.2)), dpi=110,
                             squeeze=False)
    estimated = trace.get("otherData", {}).get("timeline") == "estimated"
    for i, ax in enumerate(axes[:, 0]):
        low, high = (zoom if i == 1 else (0, max((s["ts"] + s["dur"] - start) / 1e3
                                                  for _, s in rows)))
        for row, s in rows:
            x, w = (s["ts"] - start) / 1e3, max(s["dur"] / 1e3, 1e-3)
            if x + w < low or x > high:
                continue
            ax.broken_barh([(x, w)], (row, 0.85), facecolors=COLOURS.get(s.get("cat"), "#7f7f7f"),
                           edgecolor="white", linewidth=0.4)
            shown_w = min(x + w, high) - max(x, low)
            if shown_w > (high - low) * 0.06:  # room for its name
                ax.text(max(x, low) + shown_w / 2, row + 0.45, s["name"], ha="center",
                        va="center", fontsize=7, clip_on=True,
                        color="white" if s.get("cat") in ("kernel", "collective") else "black")
        ax.set_xlim(low, high)
        ax.set_yticks([p for p, _ in labels], [n for _, n in labels])
        ax.invert_yaxis()
        ax.set_xlabel("ms" + (" (estimated by the device model)" if estimated else ""))
        ax.set_title((args.title or args.trace) if i == 0 else f"{low:g} to {high:g} ms, enlarged",
                     loc="left")
        ax.spines[["top", "right"]].set_visible(False)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    axes[-1, 0].legend(handles, COLOURS.keys(), ncol=6, loc="upper center",
                       bbox_to_anchor=(0.5, -0.3), frameon=False)
    fig.tight_layout()
    fig.savefig(args.out)


if __name__ == "__main__":
    main()
