"""Summarize py-spy collapsed stacks (``--format raw``): where the sampled CPU time goes.

    python bench/profile_top.py bench/results/profile-hivegate-tools_call.stacks.txt [--top N]

Prints the total samples, the top functions by self time (the leaf frame of a sample), self
time grouped by package (the first path component py-spy reports: hivegate, mcp, pydantic,
starlette, asyncio, ...) and the top frames by inclusive time (frames in nearly every sample,
such as the event loop, are left out). Line numbers are dropped so a function is one row.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r":\d+\)$")
_FILE = re.compile(r"\((.*)\)$")


def frame_name(frame: str) -> str:
    return _LINE.sub(")", frame.strip())


def package(frame: str) -> str:
    match = _FILE.search(frame)
    if not match:
        return "<native>"
    path = match.group(1)
    if path.startswith("<"):
        return path
    head = path.split("/", 1)[0]
    return head.removesuffix(".py") if "/" in path else f"{head} (stdlib/top-level)"


def summarize(text: str, top: int) -> str:
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    by_package: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [frame_name(f) for f in stack.split(";") if f.strip()]
        if not frames:
            continue
        total += n
        self_time[frames[-1]] += n
        by_package[package(frames[-1])] += n
        for frame in set(frames):
            inclusive[frame] += n
    if not total:
        return "no samples\n"

    def table(title: str, counts: Counter[str], limit: int, skip_above: float = 1.01) -> list[str]:
        rows = [(k, v) for k, v in counts.most_common() if v / total < skip_above][:limit]
        return [title, *(f"{v / total:7.1%}  {k}" for k, v in rows), ""]

    out = [f"{total} samples (py-spy, active threads only)", ""]
    out += table(f"top {top} by self time", self_time, top)
    out += table("self time by package", by_package, top)
    out += table(f"top {top} by inclusive time (frames in >= 97% of samples left out)", inclusive, top, 0.97)
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stacks", type=Path, help="py-spy raw (collapsed) output")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(summarize(args.stacks.read_text(), args.top))


if __name__ == "__main__":
    main()
