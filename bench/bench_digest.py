"""Benchmark the offline session digest over a long session: its cost per message must stay flat.

Run from a checkout, with the package installed:

    python bench/bench_digest.py [--sizes 10000,100000] [--repeat 1] [--json]

For each size N, a synthetic coding-agent session of N messages (`sessionstore._demo`,
seed 1) is built, then the offline `ExtractiveSummarizer` writes the digest of all of it
within the budget a first session digest gets (`summary_budget` of the session's tokens,
capped by `CompactionConfig().max_summary_tokens`), as a compaction does for the loops
that leave the scope. Two parts are timed apart: `facts` (`extract_facts`: one walk over
the messages) and `fit` (`fit_handoff`: trimming the handoff to the budget), and their
sum `digest`. Each figure is the median of `--repeat` runs; the sizes run in turn, so a
slow machine slows every size alike.

The goal (issue 20): the digest is linear, its cost per message at the largest size
within `LINEAR_GOAL` times that at the smallest. Timings on a shared machine are noisy:
compare the ratio, not the absolute figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

from _common import fmt, log, machine_info, parse_sizes

from sessionstore import CompactionConfig, Message
from sessionstore._demo import iter_session_messages
from sessionstore._tokens import message_tokens
from sessionstore.summarizers import summary_budget
from sessionstore.summarizers._facts import extract_facts
from sessionstore.summarizers._fit import fit_handoff

LINEAR_GOAL = 1.25
"""Read as linear: microseconds per message at the largest size / at the smallest, at most."""
PARTS = ("facts", "fit", "digest")


def session(size: int) -> list[Message]:
    """Return a synthetic session of `size` messages, oldest first."""
    return [m for loop in iter_session_messages(seed=1, total_messages=size) for m in loop]


def one_run(messages: list[Message], budget: int) -> dict[str, float]:
    """Time one digest of `messages`: the walk, the fit, and both (seconds)."""
    gc.collect()
    clock = time.perf_counter()
    facts, _ = extract_facts(messages)
    walked = time.perf_counter()
    fit_handoff(facts, budget)
    done = time.perf_counter()
    return {"facts": walked - clock, "fit": done - walked, "digest": done - clock}


def measure(size: int, repeat: int) -> dict[str, Any]:
    """Return the median seconds and microseconds per message of each part at one size."""
    messages = session(size)
    tokens = sum(message_tokens(m) for m in messages)
    budget = summary_budget(tokens, max_tokens=CompactionConfig().max_summary_tokens)
    runs = []
    for index in range(repeat):
        runs.append(one_run(messages, budget))
        log(f"  {size:,} messages, run {index + 1}/{repeat}: {runs[-1]['digest']:.2f} s")
    seconds = {part: statistics.median(run[part] for run in runs) for part in PARTS}
    return {
        "messages": size,
        "tokens": tokens,
        "budget_tokens": budget,
        "seconds": seconds,
        "us_per_message": {part: seconds[part] / size * 1e6 for part in PARTS},
    }


def linearity(results: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Return per-message cost ratios, largest size to smallest, and whether they are linear."""
    if len(results) < 2:
        return None
    small, large = results[0], results[-1]
    ratios = {part: large["us_per_message"][part] / small["us_per_message"][part] for part in PARTS}
    return {
        "from": small["messages"],
        "to": large["messages"],
        "per_message_ratio": ratios,
        "goal": LINEAR_GOAL,
        "met": ratios["digest"] <= LINEAR_GOAL,
    }


def render(results: Sequence[dict[str, Any]], linear: dict[str, Any] | None) -> str:
    lines = [
        "# Session digest (offline) over a long session",
        "",
        " | ".join(f"{key} {value}" for key, value in machine_info().items() if value),
        "",
        "| messages | budget (tokens) | facts (s) | fit (s) | digest (s) | us / message |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        seconds = result["seconds"]
        lines.append(
            f"| {result['messages']:,} | {result['budget_tokens']:,} | {fmt(seconds['facts'])} "
            f"| {fmt(seconds['fit'])} | {fmt(seconds['digest'])} "
            f"| {fmt(result['us_per_message']['digest'])} |"
        )
    if linear is not None:
        ratios = linear["per_message_ratio"]
        verdict = "met" if linear["met"] else "NOT met"
        lines += [
            "",
            f"Per message, {linear['to']:,} / {linear['from']:,} messages: digest "
            f"{ratios['digest']:.2f}x (facts {ratios['facts']:.2f}x, fit {ratios['fit']:.2f}x); "
            f"linear, goal <= {linear['goal']}x: {verdict}",
        ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=parse_sizes,
        default=parse_sizes("10000,100000"),
        help="session sizes in messages, comma-separated (default: 10000,100000)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per size (default: 1)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    results = []
    for size in args.sizes:
        log(f"building and digesting {size:,} messages")
        results.append(measure(size, args.repeat))
    linear = linearity(results)
    if args.json:
        print(json.dumps({"results": results, "linearity": linear}, indent=2))
    else:
        print(render(results, linear))
    return 0


if __name__ == "__main__":
    sys.exit(main())
