"""`sessionstore audit --html` on a long session: its time and the page's bytes.

The page holds a view per overlay and compaction, each with the loops of its chain. This
script stores, through the public API, one session of `--loops` loops (a request, four
tool-using turns and an answer each, 10 messages) compacted every `--every` loops, in a
SQLite file, then runs `python -m sessionstore audit ID --html FILE` as a subprocess,
`--repeat` times, and prints the median wall and CPU time (the child's user + system,
steadier on a shared machine) and the page's bytes.

With `--baseline DIR` (another source tree, such as an older commit's `git archive`), the
same command of that tree runs in the same runs, interleaved, on the same file: a before
and after in one run.

    python bench/bench_audit_page.py
    python bench/bench_audit_page.py --loops 1000 --every 10 --repeat 3
    git archive "$OLD_COMMIT" sessionstore migrations | tar -x -C ../old
    python bench/bench_audit_page.py --baseline ../old
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import fmt, log, machine_info, source_tree, tree_environment

from sessionstore import (
    AssistantMessage,
    SessionStore,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    compact_session_loops,
    migrate,
)

ROOT = Path(__file__).resolve().parent.parent


def _loop_messages(number: int) -> list[UserMessage | AssistantMessage | ToolResultMessage]:
    """One loop: a request, four tool-using turns, an answer (about 1,000 tokens)."""
    messages: list[UserMessage | AssistantMessage | ToolResultMessage] = [
        UserMessage(content=f"Task {number}: fix the failing test in module_{number}.py. " * 5)
    ]
    for step in range(4):
        call = f"call_{number}_{step}"
        messages.append(
            AssistantMessage(
                content=[
                    TextContent(text=f"Step {step}: I'll run the tests again. " * 8),
                    ToolCall(id=call, name="bash", arguments='{"command": "pytest -x -q"}'),
                ]
            )
        )
        messages.append(
            ToolResultMessage(
                tool_call_id=call,
                tool_name="bash",
                content=f"FAILED tests/test_module_{number}.py::test_case_{step}\n" * 12,
            )
        )
    messages.append(AssistantMessage(content=[TextContent(text="Fixed and tested. " * 20)]))
    return messages


async def _build(url: str, loops: int, every: int) -> str:
    await migrate.upgrade(url)
    store = SessionStore.from_url(url)
    try:
        session = await store.create_session(app_name="bench", user_id="audit-page")
        for number in range(1, loops + 1):
            await store.append_messages(session.id, _loop_messages(number), loop_id="new")
            if number % every == 0:
                await compact_session_loops(store, session.id, max_context_tokens=4000)
        return session.id
    finally:
        await store.close()


def _run(command: list[str], env: dict[str, str], page: Path) -> tuple[float, float, int]:
    """One run's wall time and child CPU time (s), and the page's bytes.

    The child runs in the page's folder: `python -m` puts its working directory first on
    the path, which in a checkout would import the checkout's package, whatever the tree.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, env=env, cwd=page.parent, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    size = page.stat().st_size
    page.unlink()
    return wall, cpu, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--loops", type=int, default=300, help="loops in the session")
    parser.add_argument("--every", type=int, default=10, help="compact every this many loops")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per tree")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another source tree whose command is timed in the same runs",
    )
    args = parser.parse_args()
    if args.loops < 1 or args.every < 1 or args.repeat < 1:
        parser.error("--loops, --every and --repeat must be at least 1")
    trees = {"this tree": ROOT}
    if args.baseline is not None:
        trees["baseline"] = source_tree(args.baseline)
    samples: dict[str, list[tuple[float, float, int]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="sessionstore-audit-page-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'long.db'}"
        log(f"storing {args.loops} loops, compacted every {args.every}")
        session_id = asyncio.run(_build(url, args.loops, args.every))
        page = Path(tmp) / "page.html"
        command = [sys.executable, "-m", "sessionstore", "--url", url, "audit", session_id]
        command += ["--html", str(page)]
        for run in range(args.repeat):
            for name, tree in trees.items():
                log(f"run {run + 1}/{args.repeat}: {name}")
                samples[name].append(_run(command, tree_environment(tree), page))
    medians: dict[str, dict[str, Any]] = {
        name: {
            "wall_s": statistics.median(wall for wall, _, _ in runs),
            "cpu_s": statistics.median(cpu for _, cpu, _ in runs),
            "page_bytes": runs[-1][2],
        }
        for name, runs in samples.items()
    }
    if args.json:
        figures = {"machine": machine_info(), "loops": args.loops, "every": args.every}
        print(json.dumps({**figures, "medians": medians}, indent=2))
        return
    views = args.loops // args.every + 1
    print(
        f"`audit --html` of one session: {args.loops} loops, compacted every {args.every} "
        f"({views} views), median of {args.repeat} runs\n"
    )
    print("| tree | wall (s) | CPU (s) | page (MB) |")
    print("|---|--:|--:|--:|")
    for name, figure in medians.items():
        print(
            f"| {name} | {fmt(figure['wall_s'])} | {fmt(figure['cpu_s'])} "
            f"| {fmt(figure['page_bytes'] / 1e6)} |"
        )


if __name__ == "__main__":
    main()
