#!/usr/bin/env python3
"""A deterministic proposer for `evoattn tune --proposer` (tests and offline runs): reads the
prompt on stdin and answers one config line, a function of the generation and the levers the
prompt lists: lever (generation mod levers) set to the value after its first. With
EVOATTN_PROPOSER_LOG set, appends one JSON line per call to that file: the generation, the
guidance the prompt names and which parts (I1, I2, I3) it carried, so a test can see what each
guidance mode shows."""

from __future__ import annotations

import json
import os
import re
import sys

PARTS = ("I1", "I2", "I3")


def propose(prompt: str) -> tuple[str | None, dict[str, object]]:
    """(config line or None, what the prompt carried)."""
    generation = int(m.group(1)) if (m := re.search(r"generation (\d+)", prompt)) else 0
    guidance = m.group(1) if (m := re.search(r"^# guidance: (\w+)", prompt, re.M)) else None
    seen = [part for part in PARTS if re.search(rf"^# {part}:", prompt, re.M)]
    levers: list[tuple[str, list[str]]] = []
    if m := re.search(r"^Levers and their values: (.*)$", prompt, re.M):
        for item in m.group(1).split("; "):
            name, _, values = item.partition(": ")
            if name and values:
                levers.append((name, values.split("|")))
    line = None
    if levers:
        name, values = levers[generation % len(levers)]
        line = f"{name}={values[1 % len(values)]}"
    return line, {"generation": generation, "guidance": guidance, "parts": seen}


def main() -> int:
    line, seen = propose(sys.stdin.read())
    log = os.environ.get("EVOATTN_PROPOSER_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(json.dumps(seen) + "\n")
    if line is not None:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
