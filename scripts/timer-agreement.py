#!/usr/bin/env python3
"""How far each timer control's median of our kernel is from our timer's, per case of bench
records (`--peers ...,self-torch-events,self-do-bench,self-torch-profiler --json`), and the worst.

Usage: scripts/timer-agreement.py RECORD.json...
Prints one line a case (shape, mask, our median, each control's difference or its status) and
a summary: the worst difference and how many exceed what `gate` allows (3% or 0.5 µs, whichever
is larger)."""

from __future__ import annotations

import json
import statistics
import sys

CONTROLS = ("self-torch-events", "self-do-bench", "self-torch-profiler")
# TIMER_TOLERANCE and TIMER_FLOOR_US in crates/evoattn-cli/src/stores/record.rs
TOLERANCE = 0.03
FLOOR_US = 0.5


def main(paths: list[str]) -> int:
    worst: list[tuple[float, str, str]] = []
    over = 0
    for path in paths:
        with open(path, encoding="utf-8") as f:
            results = json.load(f)["results"]
        for res in results:
            c, ours = res["case"], res["ours"]
            o = statistics.median(ours["samples_us"]) if ours.get("samples_us") else None
            case = f'{c["b"]},{c["h"]},{c["sq"]},{c["d"]} {c["causal"]}'
            row = [case, f"ours {o:.2f}" if o else "ours -"]
            peers = {p["name"]: p for p in res["peers"]}
            for name in CONTROLS:
                p = peers.get(name)
                if o and p and p.get("samples_us"):
                    d = statistics.median(p["samples_us"]) / o - 1
                    row.append(f"{name[5:]} {100 * d:+.1f}%")
                    worst.append((abs(d), case, name))
                    over += abs(d) * o > max(TOLERANCE * o, FLOOR_US)
                else:
                    row.append(f"{name[5:]} {p['status'] if p else 'absent'}")
            print(" ".join(row))
    if worst:
        w = max(worst)
        print(f"worst |disagreement| {100 * w[0]:.2f}% ({w[1]} {w[2]}) over {len(worst)}; past the rule: {over}")
    else:
        print("no control samples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
