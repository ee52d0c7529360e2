"""Fact retention: what compaction keeps of real agent conversations, strategy by strategy.

Run from a checkout, with the package installed:

    python bench/quality.py [--dataset DIR] [--strategy NAME ...] [--budgets 25,10]
                            [--quick] [--jobs N] [--json PATH]

Every conversation of the dataset (`*.jsonl`, one `{"id", "messages": [OpenAI chat
messages]}` a line; default `../shared/datasets/real-transcripts` beside the checkout)
is compacted to each budget (a share of its raw tokens, `message_tokens` summed) by
each strategy, and the context each one would send is rendered as OpenAI messages
(`to_openai`). Per strategy and budget the script reports:

- tokens after / budget: the rendered messages counted with `message_tokens` (so the
  text a rendering adds, such as a summary's prefix, is counted), mean and max;
- facts kept: the share of the probe facts of the raw transcript (`_probes.py`: the
  latest user request, file paths touched, final error lines, last commands, task
  identifiers, record ids) found in the rendered context, mean per conversation, and
  by class;
- violations: contexts over the budget, with a tool result that answers no call right
  before it or a call with no result, or without the latest user message (must be 0).

A conversation whose latest user message alone is over a budget is skipped at that
budget (no strategy can keep it and fit). A strategy that refuses to build a context
(`ContextOverflowError`) scores no facts for that conversation ("no context").

The strategies are the `STRATEGIES` registry below: `legacy` (`compact_messages`),
`default` (import into a `SessionStore` on a temporary SQLite file,
`compact_session_loops` with `DefaultBlockCompaction`, `build_context`) and `newest`
(the floor: the system messages and the newest messages that fit, the latest user
message always, a tool call never apart from its results). A block strategy is added
with one line, `"name": Stored(<registered name or factory>)`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from _common import log, machine_info
from _probes import FACT_KINDS, Fact, extract_facts, is_kept, normalize, rendered_text

import sessionstore
from sessionstore import (
    CompactionConfig,
    ContextConfig,
    ContextOverflowError,
    DefaultBlockCompaction,
    Message,
    SessionStore,
    SummarizingBlockCompaction,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    build_context,
    compact_messages,
    compact_session_loops,
    from_openai,
    get_block_strategy,
    migrate,
    to_openai,
)
from sessionstore._tokens import message_tokens
from sessionstore.formats._jsonl import parse_conversation_line
from sessionstore.strategies import BlockCompactionStrategy

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "real-transcripts"
DEFAULT_BUDGETS = (25, 10)
QUICK_CONVERSATIONS = 3
KIND_LABELS = {
    "request": "request",
    "path": "paths",
    "error": "errors",
    "command": "commands",
    "identifier": "identifiers",
    "record_id": "record ids",
}


# ── strategies ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Case:
    """One conversation, as every strategy gets it."""

    id: str
    messages: list[Message]
    loops: list[list[Message]]
    """The messages split into loops at user messages, as `sessionstore import` does."""


class Strategy(Protocol):
    """Return the context a strategy sends for `case` within `budget` tokens.

    Raises `ContextOverflowError` when it cannot build one.
    """

    @property
    def needs_store(self) -> bool:
        """Whether it runs on a `SessionStore` (the script opens one per conversation)."""

    def __call__(
        self, case: Case, budget: int, store: SessionStore | None
    ) -> Awaitable[list[Message]]: ...


@dataclass(frozen=True)
class Stored:
    """Import the conversation, compact it with a block strategy, `build_context`."""

    block_strategy: str | Callable[[], BlockCompactionStrategy]
    """A registered name, or a factory of the strategy object."""
    config: CompactionConfig = field(default_factory=CompactionConfig)
    needs_store: bool = True

    async def __call__(self, case: Case, budget: int, store: SessionStore | None) -> list[Message]:
        if store is None:
            raise ValueError("a stored strategy needs a store")
        strategy = (
            get_block_strategy(self.block_strategy)
            if isinstance(self.block_strategy, str)
            else self.block_strategy()
        )
        session_id = uuid.uuid4().hex
        await store.import_session(
            case.loops, session_id=session_id, app_name="bench", user_id="quality"
        )
        await compact_session_loops(
            store, session_id, strategy=strategy, config=self.config, max_context_tokens=budget
        )
        built = await build_context(
            store, session_id, max_context_tokens=budget, config=self.config
        )
        return built.messages


@dataclass(frozen=True)
class InMemory:
    """A strategy on the message list alone."""

    run: Callable[[Sequence[Message], int], list[Message]]
    needs_store: bool = False

    async def __call__(self, case: Case, budget: int, store: SessionStore | None) -> list[Message]:
        return self.run(case.messages, budget)


def legacy(messages: Sequence[Message], budget: int) -> list[Message]:
    """The stateless path: `compact_messages` with the whole budget for the messages."""
    return compact_messages(
        messages, ContextConfig(max_context_tokens=budget, system_prompt_tokens=0)
    )


def _units(messages: Sequence[Message]) -> list[list[int]]:
    """Group message indexes: an assistant message with the tool results after it, or one."""
    units: list[list[int]] = []
    for index, message in enumerate(messages):
        if isinstance(message, ToolResultMessage) and units:
            units[-1].append(index)
        else:
            units.append([index])
    return units


def keep_newest(messages: Sequence[Message], budget: int) -> list[Message]:
    """The floor: system messages, then the newest whole units that fit, in order.

    The latest user message is always kept (before anything else but the system
    messages, which are dropped when they do not fit beside it).
    """
    cost = [message_tokens(message) for message in messages]
    users = [i for i, message in enumerate(messages) if isinstance(message, UserMessage)]
    pinned = users[-1] if users else None
    left = budget
    if pinned is not None:
        if cost[pinned] > budget:
            raise ContextOverflowError(
                f"the latest user message needs {cost[pinned]} tokens, the budget is {budget}",
                needed=cost[pinned],
                available=budget,
            )
        left -= cost[pinned]
    system = [i for i, message in enumerate(messages) if isinstance(message, SystemMessage)]
    system_cost = sum(cost[i] for i in system)
    kept = {pinned} if pinned is not None else set()
    if system_cost <= left:
        kept.update(system)
        left -= system_cost
    for unit in reversed(_units(messages)):
        rest = [i for i in unit if i not in kept]
        if not rest:
            continue
        unit_cost = sum(cost[i] for i in rest)
        if any(i in system or i == pinned for i in unit) or unit_cost > left:
            break
        kept.update(rest)
        left -= unit_cost
    return [messages[i] for i in sorted(kept)]


STRATEGIES: dict[str, Strategy] = {
    "newest": InMemory(keep_newest),
    "legacy": InMemory(legacy),
    "default": Stored(lambda: DefaultBlockCompaction()),
    "summarize": Stored(lambda: SummarizingBlockCompaction()),
}
"""The strategies by name, in report order."""


# ── guarantees ─────────────────────────────────────────────────────────────────


def pairing_problems(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Return what breaks the providers' rule: each call answered right after it, once."""
    problems: list[str] = []
    pending: set[str] | None = None
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            call_id = message.get("tool_call_id")
            if pending is None or call_id not in pending:
                problems.append(f"message {index}: result {call_id} answers no call before it")
            else:
                pending.discard(call_id)
            continue
        if pending:
            problems.append(f"message {index}: calls {sorted(pending)} have no result")
        pending = None
        calls = message.get("tool_calls") or []
        if message.get("role") == "assistant" and calls:
            pending = {call["id"] for call in calls}
    if pending:
        problems.append(f"end: calls {sorted(pending)} have no result")
    return problems


def sent_tokens(rendered: Sequence[dict[str, Any]]) -> int:
    """Count what is sent: the rendered messages, read back, with `message_tokens`."""
    return sum(message_tokens(message) for message in from_openai(rendered))


# ── one conversation ───────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Task:
    file: str
    line_number: int
    line: bytes
    strategies: tuple[str, ...]
    budgets: tuple[int, ...]


def _score(
    facts: Sequence[Fact], latest_user: str | None, context: list[Message], budget: int
) -> dict[str, Any]:
    rendered = to_openai(context)
    haystack = rendered_text(rendered)
    tokens = sent_tokens(rendered)
    by_kind: dict[str, list[int]] = {}
    lost: list[dict[str, str]] = []
    for fact in facts:
        counts = by_kind.setdefault(fact.kind, [0, 0])
        counts[1] += 1
        if is_kept(fact, haystack):
            counts[0] += 1
        else:
            lost.append({"kind": fact.kind, "text": fact.text})
    violations: dict[str, Any] = {}
    if tokens > budget:
        violations["over_budget"] = tokens - budget
    problems = pairing_problems(rendered)
    if problems:
        violations["unpaired"] = problems
    if latest_user is not None and latest_user not in haystack:
        violations["no_latest_request"] = True
    return {
        "outcome": "context",
        "messages": len(rendered),
        "tokens": tokens,
        "ratio": tokens / budget,
        "kept": sum(kept for kept, _ in by_kind.values()),
        "facts": len(facts),
        "by_kind": by_kind,
        "lost": lost,
        "violations": violations,
    }


async def _evaluate(task: Task) -> dict[str, Any]:
    raw = json.loads(task.line)
    conversation = parse_conversation_line(task.line)
    messages = [message for loop in conversation.loops for message in loop]
    case = Case(conversation.session_id, messages, conversation.loops)
    facts = extract_facts(raw["messages"])
    raw_tokens = sum(message_tokens(message) for message in messages)
    users = [message for message in messages if isinstance(message, UserMessage)]
    latest_user = normalize(users[-1].text) if users else None
    latest_cost = message_tokens(users[-1]) if users else 0
    result: dict[str, Any] = {
        "id": raw.get("id", conversation.session_id),
        "file": task.file,
        "line": task.line_number,
        "messages": len(messages),
        "raw_tokens": raw_tokens,
        "facts": [{"kind": fact.kind, "text": fact.text} for fact in facts],
        "fact_counts": {kind: sum(1 for f in facts if f.kind == kind) for kind in FACT_KINDS},
        "budgets": {},
    }
    chosen = {name: STRATEGIES[name] for name in task.strategies}
    with tempfile.TemporaryDirectory(prefix="sessionstore_quality_") as directory:
        store: SessionStore | None = None
        if any(strategy.needs_store for strategy in chosen.values()):
            url = f"sqlite+aiosqlite:///{Path(directory) / 'quality.db'}"
            await migrate.upgrade(url)
            store = SessionStore.from_url(url)
        try:
            for percent in task.budgets:
                budget = max(1, raw_tokens * percent // 100)
                entry: dict[str, Any] = {"budget": budget}
                result["budgets"][str(percent)] = entry
                if latest_cost > budget:
                    entry["skipped"] = f"the latest user message needs {latest_cost} tokens"
                    continue
                for name, strategy in chosen.items():
                    started = time.perf_counter()
                    try:
                        context = await strategy(case, budget, store)
                    except ContextOverflowError as error:
                        outcome: dict[str, Any] = {"outcome": "no_context", "reason": str(error)}
                    except Exception as error:
                        # A strategy that fails otherwise has a bug: stop, and say where.
                        raise RuntimeError(
                            f"{name} failed on {result['id']} at {percent}%: {error!r}"
                        ) from error
                    else:
                        outcome = _score(facts, latest_user, context, budget)
                    outcome["seconds"] = time.perf_counter() - started
                    entry[name] = outcome
        finally:
            if store is not None:
                await store.close()
    return result


def evaluate(task: Task) -> dict[str, Any]:
    """Score every strategy at every budget on one conversation (a worker's job)."""
    return asyncio.run(_evaluate(task))


# ── the whole set ──────────────────────────────────────────────────────────────


def load_tasks(args: argparse.Namespace) -> list[Task]:
    files = sorted(Path(args.dataset).glob("*.jsonl"))
    if not files:
        raise SystemExit(f"no *.jsonl file in {args.dataset}")
    tasks: list[Task] = []
    for path in files:
        with path.open("rb") as lines:
            taken = 0
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                tasks.append(
                    Task(path.name, number, line, tuple(args.strategy), tuple(args.budgets))
                )
                taken += 1
                if args.quick and taken == QUICK_CONVERSATIONS:
                    break
    return tasks


def _share(kept: int, total: int) -> float:
    return kept / total if total else 1.0


def aggregate(
    conversations: Sequence[dict[str, Any]], strategies: Sequence[str], percent: int
) -> dict[str, Any]:
    """Aggregate one budget: per strategy, over the conversations not skipped there."""
    run = [
        (c["fact_counts"], c["budgets"][str(percent)])
        for c in conversations
        if "skipped" not in c["budgets"][str(percent)]
    ]
    out: dict[str, Any] = {
        "percent": percent,
        "conversations": len(run),
        "skipped": len(conversations) - len(run),
        "strategies": {},
    }
    for name in strategies:
        outcomes = [(counts, entry[name]) for counts, entry in run]
        built = [o for _, o in outcomes if o["outcome"] == "context"]
        # A conversation without a context keeps none of its facts.
        shares = [
            _share(o["kept"], o["facts"]) if o["outcome"] == "context" else 0.0 for _, o in outcomes
        ]
        by_kind: dict[str, float | None] = {}
        for kind in FACT_KINDS:
            per_conversation = [
                (o["by_kind"].get(kind, [0, 0])[0] if o["outcome"] == "context" else 0)
                / counts[kind]
                for counts, o in outcomes
                if counts.get(kind)
            ]
            by_kind[kind] = statistics.fmean(per_conversation) if per_conversation else None
        kinds: dict[str, int] = {}
        for o in built:
            for key in o["violations"]:
                kinds[key] = kinds.get(key, 0) + 1
        ratios = [o["ratio"] for o in built]
        out["strategies"][name] = {
            "no_context": len(outcomes) - len(built),
            "ratio_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_max": max(ratios) if ratios else None,
            "facts_kept": statistics.fmean(shares) if shares else None,
            "by_kind": by_kind,
            "violations": sum(1 for o in built if o["violations"]),
            "violation_kinds": kinds,
            "seconds": sum(o["seconds"] for _, o in outcomes),
        }
    return out


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def render_table(summary: dict[str, Any]) -> list[str]:
    header = [
        "strategy",
        "conversations",
        "no context",
        "tokens after / budget (mean, max)",
        "facts kept",
        *(KIND_LABELS[kind] for kind in FACT_KINDS),
        "violations",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for name, s in summary["strategies"].items():
        ratios = "-" if s["ratio_mean"] is None else f"{s['ratio_mean']:.2f}, {s['ratio_max']:.2f}"
        cells = [
            name,
            str(summary["conversations"]),
            str(s["no_context"]),
            ratios,
            _pct(s["facts_kept"]),
            *(_pct(s["by_kind"][kind]) for kind in FACT_KINDS),
            str(s["violations"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    c = results["config"]
    counts = results["facts"]
    lines = [
        "# Fact retention",
        "",
        f"Command: `{results['command']}`",
        "",
        f"sessionstore {m['revision'] or '(no git checkout)'} | Python {m['python']} | "
        f"SQLite {m['sqlite']} | SQLAlchemy {m['sqlalchemy']} | {m['cpus']} CPUs | "
        f"{m['platform']} | {results['elapsed_s']:.0f} s with {c['jobs']} job(s)",
        "",
        f"Dataset: {len(results['conversations'])} conversations of "
        f"{', '.join(c['files'])}, {results['raw_tokens']:,} raw tokens; "
        f"{sum(counts.values()):,} probe facts ("
        + ", ".join(f"{KIND_LABELS[k]} {counts.get(k, 0):,}" for k in FACT_KINDS)
        + ").",
    ]
    for summary in results["budgets"]:
        lines += ["", f"## Budget: {summary['percent']}% of each conversation's raw tokens", ""]
        if summary["skipped"]:
            lines += [
                f"{summary['skipped']} conversation(s) skipped: their latest user message "
                "alone is over the budget.",
                "",
            ]
        lines += render_table(summary)
        notes = [
            f"{name}: "
            + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in s["violation_kinds"].items())
            for name, s in summary["strategies"].items()
            if s["violation_kinds"]
        ]
        if notes:
            lines += ["", "Violations (contexts): " + "; ".join(notes) + "."]
    return "\n".join(lines)


def _progress(done: int, total: int, result: dict[str, Any], started: float) -> None:
    parts = []
    for percent, entry in result["budgets"].items():
        if "skipped" in entry:
            parts.append(f"{percent}%: skipped")
            continue
        scores = []
        for name, o in entry.items():
            if name == "budget":
                continue
            mark = "!" if o.get("violations") else ""
            score = _share(o["kept"], o["facts"]) * 100 if o["outcome"] == "context" else None
            scores.append(f"{name} {'-' if score is None else f'{score:.0f}%'}{mark}")
        parts.append(f"{percent}%: " + " ".join(scores))
    log(
        f"[{done}/{total}] {result['id']} ({result['raw_tokens']:,} tokens, "
        f"{len(result['facts'])} facts) {'; '.join(parts)} ({time.perf_counter() - started:.0f} s)"
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    tasks = load_tasks(args)
    started = time.perf_counter()
    results: list[dict[str, Any] | None] = [None] * len(tasks)
    if args.jobs == 1:
        for index, task in enumerate(tasks):
            results[index] = evaluate(task)
            _progress(index + 1, len(tasks), results[index] or {}, started)
    else:
        with multiprocessing.Pool(args.jobs) as pool:
            jobs = pool.imap_unordered(_indexed, list(enumerate(tasks)))
            for done, (index, result) in enumerate(jobs, start=1):
                results[index] = result
                _progress(done, len(tasks), result, started)
    conversations = [r for r in results if r is not None]
    facts: dict[str, int] = {}
    for conversation in conversations:
        for fact in conversation["facts"]:
            facts[fact["kind"]] = facts.get(fact["kind"], 0) + 1
    return {
        "command": " ".join(["python", "bench/quality.py", *args.argv]),
        "config": {
            "dataset": str(args.dataset),
            "files": sorted({task.file for task in tasks}),
            "strategies": args.strategy,
            "budgets_percent": args.budgets,
            "quick": args.quick,
            "jobs": args.jobs,
        },
        "machine": {**machine_info(), "sessionstore_path": str(Path(sessionstore.__file__).parent)},
        "elapsed_s": time.perf_counter() - started,
        "raw_tokens": sum(c["raw_tokens"] for c in conversations),
        "facts": facts,
        "budgets": [aggregate(conversations, args.strategy, p) for p in args.budgets],
        "conversations": conversations,
    }


def _indexed(item: tuple[int, Task]) -> tuple[int, dict[str, Any]]:
    index, task = item
    return index, evaluate(task)


def _budgets(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of percents: {text!r}"
        ) from None
    if not values or any(not 0 < value < 100 for value in values):
        raise argparse.ArgumentTypeError("every budget is a percent between 1 and 99")
    return values


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--dataset",
        type=Path,
        default=DEFAULT_DATASET,
        help="a directory of *.jsonl conversations (default: ../shared/datasets/"
        "real-transcripts beside the checkout)",
    )
    parser.add_argument(
        "--strategy",
        action="append",
        choices=list(STRATEGIES),
        help="a strategy to run; repeat for several (default: all, in registry order)",
    )
    parser.add_argument(
        "--budgets",
        type=_budgets,
        default=list(DEFAULT_BUDGETS),
        help="budgets in percent of each conversation's raw tokens (default: 25,10)",
    )
    parser.add_argument(
        "--quick", action="store_true", help=f"the first {QUICK_CONVERSATIONS} of each file only"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes (default: %(default)s)",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if not Path(args.dataset).is_dir():
        parser.error(f"--dataset {args.dataset} is not a directory")
    args.strategy = list(dict.fromkeys(args.strategy or STRATEGIES))
    args.argv = list(sys.argv[1:] if argv is None else argv)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    here = Path(sessionstore.__file__).resolve().parent
    if here != ROOT / "sessionstore":
        log(f"note: measuring the sessionstore in {here}, not this checkout's")
    try:
        results = run(args)
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    print(render(results))
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
