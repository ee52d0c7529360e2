"""Fitting a context of many long tool outputs: how long does a build's cut of them take?

A loop of `--outputs` tool calls, each answered by an output of `--lines` lines (a test
run's log lines), and the latest request, as the context loader hands them to
`fit_context` (raw items). The context is fitted to each share of its tokens in
`--shares`: the build squeezes the outputs and cuts them to their first and last lines
(stage 1), searching a cap for all of them and, for each cap, each output's line count.
The time of each fit is the median of `--repeat` runs.

With `--baseline DIR` (another source tree, such as an older commit's `git archive`), the
same fits are timed with that tree in child processes, the two trees' runs interleaved,
and the ratio this tree / baseline is printed.

    python bench/bench_fit_outputs.py --outputs 100 --lines 500,2000
    git archive "$OLD_COMMIT" sessionstore migrations | tar -x -C ../old
    python bench/bench_fit_outputs.py --baseline ../old
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import child_json, comma_list, log, machine_info, source_tree

ROOT = Path(__file__).resolve().parent.parent


def _fit_times(outputs: int, lines: int, shares: list[float]) -> dict[str, float]:
    """Seconds of one `fit_context` of the context at each share (this process's tree)."""
    from sessionstore._items import ContextItem
    from sessionstore._tokens import message_tokens
    from sessionstore._trim import fit_context
    from sessionstore.models import AssistantMessage, ToolCall, ToolResultMessage, UserMessage

    items = []
    position = 0

    def add(message: Any, *, pinned: bool = False) -> None:
        nonlocal position
        items.append(
            ContextItem(
                message,
                message_tokens(message),
                "raw",
                1,
                position,
                covers=(position,),
                pinned=pinned,
            )
        )
        position += 1

    add(UserMessage(content="Fix the failing tests."))
    for k in range(outputs):
        command = {"command": f"pytest -x tests/test_{k}.py"}
        add(AssistantMessage(content=[ToolCall(id=f"c{k}", name="bash", arguments=command)]))
        log_lines = (
            f"tests/test_{k}.py::test_{i} PASSED  [{i % 100:3d}%] worker {i} item {i * 7 + k}"
            for i in range(lines)
        )
        add(ToolResultMessage(tool_call_id=f"c{k}", tool_name="bash", content="\n".join(log_lines)))
    add(UserMessage(content="Go on."), pinned=True)
    whole = sum(item.tokens for item in items)
    times = {}
    for share in shares:
        start = time.perf_counter()
        fitted = fit_context(items, int(whole * share))
        times[str(share)] = time.perf_counter() - start
        assert sum(item.tokens for item in fitted.items) <= int(whole * share)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--outputs", type=int, default=100, help="tool outputs (default: 100)")
    parser.add_argument(
        "--lines",
        type=comma_list(int, "line counts"),
        default=[500, 2000],
        help="lines an output (default: 500,2000)",
    )
    parser.add_argument(
        "--shares",
        type=comma_list(float, "shares"),
        default=[0.5, 0.2],
        help="budgets, shares of the context",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs a tree (median)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--baseline", type=Path, metavar="DIR", help="another source tree")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.outputs < 1 or args.repeat < 1 or min(args.lines) < 1:
        parser.error("--outputs, --repeat and --lines must be at least 1")
    if not all(0 < share <= 1 for share in args.shares):
        parser.error("--shares must be in (0, 1]")
    if args.child:
        print(json.dumps({n: _fit_times(args.outputs, n, args.shares) for n in args.lines}))
        return
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = source_tree(args.baseline)
    arguments = [
        f"--outputs={args.outputs}",
        "--lines=" + ",".join(map(str, args.lines)),
        "--shares=" + ",".join(map(str, args.shares)),
    ]
    runs: dict[str, list[dict[str, dict[str, float]]]] = {name: [] for name in trees}
    for run in range(args.repeat):
        for name, tree in trees.items():  # interleaved: the trees share the machine's moods
            log(f"run {run + 1}/{args.repeat}: {name}")
            runs[name].append(child_json(__file__, tree, arguments))
    medians = {
        name: {
            str(lines): {
                str(share): statistics.median(r[str(lines)][str(share)] for r in results)
                for share in args.shares
            }
            for lines in args.lines
        }
        for name, results in runs.items()
    }
    if args.json:
        print(json.dumps({"machine": machine_info(), "medians_s": medians}, indent=2))
        return
    print(f"Machine: {machine_info()}")
    print(f"{args.outputs} outputs; fit_context to a share of the context's tokens (median s)\n")
    header = "| lines an output | share | " + " | ".join(trees)
    header += " | this tree / baseline |" if "baseline" in trees else " |"
    print(header)
    print("|" + "---|" * (len(trees) + 2 + ("baseline" in trees)))
    for lines in args.lines:
        for share in args.shares:
            cells = [medians[name][str(lines)][str(share)] for name in trees]
            row = f"| {lines:,} | {share} | " + " | ".join(f"{c:.3f}" for c in cells)
            if "baseline" in trees:
                row += f" | {cells[0] / cells[1]:.2f}x"
            print(row + " |")


if __name__ == "__main__":
    sys.exit(main())
