"""Fact retention: what compaction keeps of real agent conversations, strategy by strategy.

Run from a checkout, with the package installed:

    python bench/quality.py [--dataset DIR] [--strategy NAME ...] [--budgets 25,10]
                            [--file TEXT ...] [--quick] [--jobs N] [--show-lost N]
                            [--json PATH] [--compare EARLIER_JSON]

Every conversation of the dataset (`*.jsonl`, one `{"id", "messages": [OpenAI chat
messages]}` a line; default `../shared/datasets/real-transcripts` beside the checkout;
`--file` keeps the files whose name holds TEXT) is compacted to each budget (a share of
its raw tokens, `message_tokens` summed) by each strategy, and the context each one would
send is rendered as OpenAI messages (`to_openai`). Per strategy and budget the script
reports:

- tokens after / budget: the rendered messages counted with `message_tokens` (so the
  text a rendering adds, such as a summary's prefix, is counted), mean and max;
- key facts and working-state facts kept: the share of the probe facts of the raw
  transcript (`_probes.py`) of each family found in the rendered context, mean per
  conversation, and kind by kind; the same two families per harness (dataset file);
- goals: whether each strategy that is not a baseline (`newest`, `legacy`) meets issue
  16's targets and keeps more than both baselines;
- violations: contexts over the budget, with a tool result that answers no call right
  before it or a call with no result, or without the latest user message (must be 0).
  The latest user message counts as there when it is whole, or shortened as the
  library's rule allows: a user message made of parts of it, in order, from its start,
  with a `[… N … left out to fit the budget]` marker where each cut was (its standing
  instructions shortened; whether its task text survives, the key facts tell).

A conversation whose latest user message alone is over a budget is skipped at that
budget (no strategy can keep it and fit). A strategy that refuses to build a context
(`ContextOverflowError`) scores no facts for that conversation ("no context"). The JSON
output (`--json`) holds every conversation's facts and, per strategy and budget, the
facts lost; `--show-lost N` prints a sample of them per kind.

The strategies are the `STRATEGIES` registry below: `newest` (the floor: the system
messages and the newest messages that fit, the latest user message always, a tool call
never apart from its results), `legacy` (`compact_messages`), `default` and `summarize`
(import into a `SessionStore` on a temporary SQLite file, `compact_session_loops` with
`DefaultBlockCompaction` or `SummarizingBlockCompaction`, `build_context`), and
`summarize-cli` (the `sessionstore` command line itself: `import`, `compact --strategy
summarize` with the command's defaults, `context --budget B --format openai`), and `sdk`
(the openai-agents session in context mode, its window the budget, each loop a run:
`get_items()`, then `add_items` of the run's items; the last `get_items()` is scored). A block
strategy is added with one line, `"name": Stored(<registered name or factory>)`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import random
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import click
from _common import log, machine_info
from _probes import (
    FACT_KINDS,
    FAMILIES,
    KEY_KINDS,
    WORKING_KINDS,
    Fact,
    extract_facts,
    is_kept,
    message_text,
    normalize,
    rendered_text,
)
from click.testing import CliRunner

import sessionstore
from sessionstore import (
    AssistantMessage,
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
    from_openai_responses,
    get_block_strategy,
    migrate,
    to_openai,
    to_openai_responses,
)
from sessionstore._tokens import message_tokens
from sessionstore.cli import main as cli_main
from sessionstore.formats._jsonl import parse_conversation_line
from sessionstore.strategies import BlockCompactionStrategy

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "real-transcripts"
DEFAULT_BUDGETS = (25, 10)
QUICK_CONVERSATIONS = 3
KIND_LABELS = {
    "first_request": "first request",
    "request": "request",
    "path": "paths",
    "error": "errors",
    "command": "commands",
    "identifier": "identifiers",
    "record_id": "record ids",
    "edited_symbol": "edited symbols",
    "test_command": "test command",
    "test_result": "test result",
    "last_value": "last values",
    "diff_line": "diff lines",
    "constraint": "constraints",
    "mutation": "mutations",
    "error_type": "error types",
}
FAMILY_LABELS = {"key": "key facts", "working": "working-state facts"}
BASELINES = ("newest", "legacy")
"""The strategies every other one is compared with."""
TARGETS = {25: {"key": 0.95, "working": 0.85}, 10: {"key": 0.85, "working": 0.70}}
"""Issue 16's goals: the share of each family kept, per budget (percent)."""
HARNESS_FLOOR = (10, "key", 0.80)
"""Issue 16: at 10%, no harness keeps less than 80% of its key facts."""


# ── strategies ─────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Case:
    """One conversation, as every strategy gets it."""

    id: str
    messages: list[Message]
    loops: list[list[Message]]
    """The messages split into loops at user messages, as `sessionstore import` does."""
    line: bytes = b""
    """The dataset line itself (what `sessionstore import` reads)."""


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


class Refused(Exception):
    """The command line refused to build a context (it exited with a message)."""


@dataclass(frozen=True)
class Cli:
    """Run the `sessionstore` command line itself, in process, as a user would.

    `sessionstore import --upgrade FILE --json` (the conversation's line, on a temporary
    SQLite file), `sessionstore compact SESSION ARGS` (by default `--strategy summarize`
    and the command's own defaults, so its `--budget` window of 100,000 tokens, not the
    test budget), then `sessionstore context SESSION --budget B --format openai`, whose
    stdout is the context. The commands' defaults are the CLI's own, whatever they become.
    """

    compact_args: tuple[str, ...] = ("--strategy", "summarize")
    needs_store: bool = False

    async def __call__(self, case: Case, budget: int, store: SessionStore | None) -> list[Message]:
        # Each command runs its own event loop (`asyncio.run`), so not on this one.
        return await asyncio.to_thread(self.run, case, budget)

    def run(self, case: Case, budget: int) -> list[Message]:
        with tempfile.TemporaryDirectory(prefix="sessionstore_quality_cli_") as directory:
            url = f"sqlite+aiosqlite:///{Path(directory) / 'cli.db'}"
            path = Path(directory) / "conversation.jsonl"
            path.write_bytes(case.line.rstrip(b"\n") + b"\n")
            imported = json.loads(_cli(url, "import", "--upgrade", str(path), "--json"))
            (session_id,) = imported["sessions"]
            _cli(url, "compact", session_id, *self.compact_args)
            context = _cli(
                url, "context", session_id, "--budget", str(budget), "--format", "openai"
            )
        return from_openai(json.loads(context))


def _cli(url: str, *args: str) -> str:
    """Run one `sessionstore` command in process and return its stdout.

    A refusal the command reports as a user error (exit 1 with a message, such as a
    context over its budget) raises `Refused`; anything else that fails is a bug.
    """
    runner = CliRunner()
    try:
        result = runner.invoke(
            cli_main, ["--url", url, *args], catch_exceptions=False, standalone_mode=False
        )
    except click.ClickException as error:
        if isinstance(error.__cause__, ContextOverflowError):
            raise error.__cause__ from None
        raise Refused(f"sessionstore {args[0]}: {error.format_message()}") from error
    if result.exit_code != 0:
        raise RuntimeError(
            f"sessionstore {' '.join(args)} exited {result.exit_code}: {result.output}"
        )
    return result.stdout


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


def _answered(messages: Sequence[Message], unit: Sequence[int]) -> bool:
    """Whether every tool call of a unit's first message has its result in the unit."""
    first = messages[unit[0]]
    if not isinstance(first, AssistantMessage):
        return True
    results = {
        message.tool_call_id
        for message in (messages[i] for i in unit[1:])
        if isinstance(message, ToolResultMessage)
    }
    return all(call.id in results for call in first.tool_calls)


def keep_newest(messages: Sequence[Message], budget: int) -> list[Message]:
    """The floor: system messages, then the newest whole units that fit, in order.

    The latest user message is always kept (before anything else but the system
    messages, which are dropped when they do not fit beside it). A call the transcript
    never answered (a run that ends on its `submit`) is left out: it cannot be sent.
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
        if not _answered(messages, unit):
            continue  # a call the transcript never answered cannot be sent
        unit_cost = sum(cost[i] for i in rest)
        if any(i in system or i == pinned for i in unit) or unit_cost > left:
            break
        kept.update(rest)
        left -= unit_cost
    return [messages[i] for i in sorted(kept)]


@dataclass(frozen=True)
class Sdk:
    """Replay the conversation through the openai-agents session in context mode.

    As the SDK's `Runner` uses a session: each run (loop) starts with `get_items()` (the
    engine gate may compact first), then adds the run's items; the context scored is
    the last `get_items()`, its items read back as messages. The window is the budget;
    the engine is the default (`StoreContextEngine`, `summarize`). Skipped (no context)
    without the `openai-agents` extra.
    """

    needs_store: bool = True

    async def __call__(self, case: Case, budget: int, store: SessionStore | None) -> list[Message]:
        if store is None:
            raise ValueError("the SDK session needs a store")
        try:
            from sessionstore.integrations.openai_agents import SessionStoreSession
        except ImportError as error:  # pragma: no cover - the extra is not installed
            raise Refused(f"openai-agents is not installed: {error}") from None
        session = SessionStoreSession(
            uuid.uuid4().hex, store.for_tenant("bench", "sdk"), max_context_tokens=budget
        )
        for loop in case.loops:
            # A run whose request alone is over the window fails in the SDK: the next
            # run reads again (what is scored is the last read).
            with contextlib.suppress(ContextOverflowError):
                await session.get_items()
            await session.add_items(to_openai_responses(loop))  # type: ignore[arg-type]
        return from_openai_responses(await session.get_items())  # type: ignore[arg-type]


STRATEGIES: dict[str, Strategy] = {
    "newest": InMemory(keep_newest),
    "legacy": InMemory(legacy),
    "default": Stored(lambda: DefaultBlockCompaction()),
    "summarize": Stored(lambda: SummarizingBlockCompaction()),
    "summarize-cli": Cli(),
    "sdk": Sdk(),
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


LEFT_OUT = re.compile(r"\[… \d+ [^\[\]]*?left out to fit the budget\]")
"""The marker where a shortened message had part of its text left out."""


def holds_shortened_request(latest: str, rendered: Sequence[dict[str, Any]]) -> bool:
    """Whether a user message is `latest` (whitespace collapsed) shortened by whole parts.

    Its text, split at the `LEFT_OUT` markers, is parts of `latest` in order, the first
    one where `latest` starts.
    """
    for message in rendered:
        if message.get("role") != "user":
            continue
        parts = [normalize(part) for part in LEFT_OUT.split(message_text(message))]
        if len(parts) < 2 or not parts[0] or not latest.startswith(parts[0]):
            continue
        at = 0
        for part in parts:
            found = latest.find(part, at)
            if found < 0:
                break
            at = found + len(part)
        else:
            return True
    return False


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
    shortened = False
    for fact in facts:
        counts = by_kind.setdefault(fact.kind, [0, 0])
        counts[1] += 1
        if is_kept(fact, haystack):
            counts[0] += 1
        else:
            lost.append(_fact_json(fact))
    violations: dict[str, Any] = {}
    if tokens > budget:
        violations["over_budget"] = tokens - budget
    problems = pairing_problems(rendered)
    if problems:
        violations["unpaired"] = problems
    if latest_user is not None and latest_user not in haystack:
        if holds_shortened_request(latest_user, rendered):
            shortened = True
        else:
            violations["no_latest_request"] = True
    return {
        "outcome": "context",
        "messages": len(rendered),
        "tokens": tokens,
        "ratio": tokens / budget,
        "kept": sum(kept for kept, _ in by_kind.values()),
        "facts": len(facts),
        "families": {
            family: [
                sum(by_kind.get(kind, [0, 0])[0] for kind in kinds),
                sum(by_kind.get(kind, [0, 0])[1] for kind in kinds),
            ]
            for family, kinds in FAMILIES.items()
        },
        "by_kind": by_kind,
        "lost": lost,
        "violations": violations,
        "request_shortened": shortened,
    }


def harness_of(file: str) -> str:
    """The harness a dataset file holds: its name without `.jsonl`."""
    return file.removesuffix(".jsonl")


def _fact_json(fact: Fact) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": fact.kind, "family": fact.family, "text": fact.text}
    if fact.parts:
        out["parts"] = list(fact.parts)
    return out


async def _evaluate(task: Task) -> dict[str, Any]:
    raw = json.loads(task.line)
    conversation = parse_conversation_line(task.line)
    messages = [message for loop in conversation.loops for message in loop]
    case = Case(conversation.session_id, messages, conversation.loops, task.line)
    facts = extract_facts(raw["messages"])
    raw_tokens = sum(message_tokens(message) for message in messages)
    users = [message for message in messages if isinstance(message, UserMessage)]
    latest_user = normalize(users[-1].text) if users else None
    latest_cost = message_tokens(users[-1]) if users else 0
    result: dict[str, Any] = {
        "id": raw.get("id", conversation.session_id),
        "file": task.file,
        "harness": harness_of(task.file),
        "line": task.line_number,
        "messages": len(messages),
        "raw_tokens": raw_tokens,
        "facts": [_fact_json(fact) for fact in facts],
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
                    except (ContextOverflowError, Refused) as error:
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
    if args.file:
        files = [path for path in files if any(part in path.name for part in args.file)]
    if not files:
        raise SystemExit(
            f"no *.jsonl file in {args.dataset}"
            + (f" whose name holds {' or '.join(args.file)}" if args.file else "")
        )
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


def _family_share(
    outcome: dict[str, Any], counts: dict[str, int], kinds: Sequence[str]
) -> float | None:
    """The share of a conversation's facts of `kinds` one outcome kept (None: it has none)."""
    total = sum(counts.get(kind, 0) for kind in kinds)
    if not total:
        return None
    if outcome["outcome"] != "context":
        return 0.0  # a conversation without a context keeps none of its facts
    kept: int = sum(outcome["by_kind"].get(kind, [0, 0])[0] for kind in kinds)
    return kept / total


def _mean(values: Sequence[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.fmean(present) if present else None


def aggregate(
    conversations: Sequence[dict[str, Any]], strategies: Sequence[str], percent: int
) -> dict[str, Any]:
    """Aggregate one budget: per strategy, over the conversations not skipped there.

    Every share is a mean over conversations (of those that have facts of that family or
    kind), so a long conversation counts as much as a short one.
    """
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
        families = {
            family: _mean([_family_share(o, counts, kinds) for counts, o in outcomes])
            for family, kinds in FAMILIES.items()
        }
        by_kind = {
            kind: _mean([_family_share(o, counts, (kind,)) for counts, o in outcomes])
            for kind in FACT_KINDS
        }
        kinds: dict[str, int] = {}
        for o in built:
            for key in o["violations"]:
                kinds[key] = kinds.get(key, 0) + 1
        ratios = [o["ratio"] for o in built]
        out["strategies"][name] = {
            "no_context": len(outcomes) - len(built),
            "ratio_mean": statistics.fmean(ratios) if ratios else None,
            "ratio_max": max(ratios) if ratios else None,
            "facts_kept": _mean([_family_share(o, counts, FACT_KINDS) for counts, o in outcomes]),
            "families": families,
            "by_kind": by_kind,
            "violations": sum(1 for o in built if o["violations"]),
            "violation_kinds": kinds,
            "seconds": sum(o["seconds"] for _, o in outcomes),
        }
    return out


def aggregate_harnesses(
    conversations: Sequence[dict[str, Any]], strategies: Sequence[str], percent: int
) -> dict[str, dict[str, Any]]:
    """`aggregate` per harness (the dataset file a conversation comes from)."""
    harnesses = sorted({c["harness"] for c in conversations})
    return {
        harness: aggregate(
            [c for c in conversations if c["harness"] == harness], strategies, percent
        )
        for harness in harnesses
    }


def goals(summary: dict[str, Any], harnesses: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Issue 16's goals at one budget, per strategy that is not a baseline: met or not.

    Every context valid (built, with no violation; the conversations skipped at the
    budget are not counted), each family at or above its target and above both
    baselines, and at `HARNESS_FLOOR`'s budget every harness at or above the floor.
    """
    percent = summary["percent"]
    targets = TARGETS.get(percent, {})
    strategies = summary["strategies"]
    out: dict[str, Any] = {}
    for name, s in strategies.items():
        if name in BASELINES:
            continue
        valid = summary["conversations"] - s["no_context"] - s["violations"]
        entry: dict[str, Any] = {
            "valid": valid,
            "contexts": summary["conversations"],
            "all_valid": valid == summary["conversations"],
            "families": {},
        }
        for family, share in s["families"].items():
            baselines = {b: strategies[b]["families"][family] for b in BASELINES if b in strategies}
            target = targets.get(family)
            entry["families"][family] = {
                "kept": share,
                "target": target,
                "meets_target": None if target is None or share is None else share >= target,
                "baselines": baselines,
                "beats_baselines": share is not None
                and all(value is None or share > value for value in baselines.values()),
            }
        floor_percent, floor_family, floor = HARNESS_FLOOR
        if percent == floor_percent:
            shares = {
                harness: h["strategies"][name]["families"][floor_family]
                for harness, h in harnesses.items()
                if h["conversations"]
            }
            entry["harness_floor"] = {
                "family": floor_family,
                "floor": floor,
                "below": {h: v for h, v in shares.items() if v is not None and v < floor},
            }
        out[name] = entry
    return out


def _verdict(ok: bool | None) -> str:
    return "met" if ok else "MISSED"


def render_goals(checked: dict[str, Any]) -> list[str]:
    """One line per strategy: each goal of issue 16, met or MISSED."""
    lines: list[str] = []
    for name, entry in checked.items():
        verdicts = [f"valid {entry['valid']}/{entry['contexts']}: {_verdict(entry['all_valid'])}"]
        for family, f in entry["families"].items():
            if f["kept"] is None:
                continue
            checks = []
            if f["target"] is not None:
                checks.append(f">= {f['target'] * 100:.0f}%: {_verdict(f['meets_target'])}")
            if f["baselines"]:
                versus = " and ".join(f"{b} {_pct(v)}" for b, v in f["baselines"].items())
                checks.append(f"above {versus}: {_verdict(f['beats_baselines'])}")
            verdicts.append(
                f"{FAMILY_LABELS[family]} {_pct(f['kept'])}"
                + (f" ({'; '.join(checks)})" if checks else "")
            )
        floor = entry.get("harness_floor")
        if floor is not None:
            below = ", ".join(f"{h} {_pct(v)}" for h, v in floor["below"].items())
            label = FAMILY_LABELS[floor["family"]]
            verdicts.append(
                f"every harness >= {floor['floor'] * 100:.0f}% of {label}: "
                + ("met" if not below else f"MISSED ({below})")
            )
        lines.append(f"- `{name}`: " + "; ".join(verdicts) + ".")
    return lines


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _header(cells: Sequence[str]) -> list[str]:
    return [_row(cells), "|" + "---|" * len(cells)]


def render_table(summary: dict[str, Any]) -> list[str]:
    """The strategies at one budget: tokens, both families, violations."""
    lines = _header(
        [
            "strategy",
            "conversations",
            "no context",
            "tokens after / budget (mean, max)",
            "key facts",
            "working-state facts",
            "violations",
        ]
    )
    for name, s in summary["strategies"].items():
        ratios = "-" if s["ratio_mean"] is None else f"{s['ratio_mean']:.2f}, {s['ratio_max']:.2f}"
        lines.append(
            _row(
                [
                    name,
                    str(summary["conversations"]),
                    str(s["no_context"]),
                    ratios,
                    _pct(s["families"]["key"]),
                    _pct(s["families"]["working"]),
                    str(s["violations"]),
                ]
            )
        )
    return lines


def render_kinds(summary: dict[str, Any], kinds: Sequence[str]) -> list[str]:
    """The strategies at one budget, kind by kind."""
    lines = _header(["strategy", *(KIND_LABELS[kind] for kind in kinds)])
    for name, s in summary["strategies"].items():
        lines.append(_row([name, *(_pct(s["by_kind"][kind]) for kind in kinds)]))
    return lines


def render_harnesses(harnesses: dict[str, dict[str, Any]], strategies: Sequence[str]) -> list[str]:
    """Per harness (dataset file): key facts / working-state facts of each strategy."""
    lines = _header(["harness", "conversations", *strategies])
    for harness, h in harnesses.items():
        cells = [f"`{harness}`", str(h["conversations"])]
        for name in strategies:
            families = h["strategies"][name]["families"]
            cells.append(f"{_pct(families['key'])} / {_pct(families['working'])}")
        lines.append(_row(cells))
    return lines


def render_lost(
    conversations: Sequence[dict[str, Any]],
    strategies: Sequence[str],
    percents: Sequence[int],
    sample: int,
    seed: int = 0,
) -> list[str]:
    """A sample of the facts each strategy lost, kind by kind, at each budget."""
    rng = random.Random(seed)
    lines: list[str] = []
    for percent in percents:
        for name in strategies:
            lost: dict[str, list[str]] = {}
            for c in conversations:
                outcome = c["budgets"][str(percent)].get(name)
                if not outcome or outcome["outcome"] != "context":
                    continue
                for fact in outcome["lost"]:
                    lost.setdefault(fact["kind"], []).append(f"{c['id']}: {fact['text']}")
            if not lost:
                continue
            lines += ["", f"### Lost by `{name}` at {percent}% (a sample of {sample} a kind)", ""]
            for kind in FACT_KINDS:
                if kind not in lost:
                    continue
                chosen = rng.sample(lost[kind], min(sample, len(lost[kind])))
                lines.append(f"- {KIND_LABELS[kind]} ({len(lost[kind])} lost):")
                lines += ["  - `" + text[:160].replace("`", "'") + "`" for text in chosen]
    return lines


def _delta(now: float | None, before: float | None) -> str:
    if now is None or before is None:
        return "-"
    return f"{(now - before) * 100:+.1f}"


def render_comparison(results: dict[str, Any], before: dict[str, Any]) -> list[str]:
    """Points gained or lost since an earlier run (its `--json`), per budget and strategy.

    Only the budgets and strategies both runs have; the earlier run's probe facts may
    differ (another checkout of `_probes.py`), which the fact counts show.
    """
    earlier = {summary["percent"]: summary for summary in before.get("budgets", [])}
    lines = [
        "",
        "## Compared with an earlier run",
        "",
        f"Earlier: `{before.get('command', '?')}` at "
        f"{before.get('machine', {}).get('revision') or '?'}, "
        f"{sum(before.get('facts', {}).values()):,} probe facts "
        f"(now {sum(results['facts'].values()):,}). Points gained (+) or lost (-).",
    ]
    for summary in results["budgets"]:
        old = earlier.get(summary["percent"])
        if old is None:
            continue
        names = [name for name in summary["strategies"] if name in old["strategies"]]
        if not names:
            continue
        lines += ["", f"At {summary['percent']}%:", ""]
        lines += _header(
            ["strategy", "key facts", "working-state facts", *(KIND_LABELS[k] for k in FACT_KINDS)]
        )
        for name in names:
            now, then = summary["strategies"][name], old["strategies"][name]
            cells = [
                name,
                *(
                    _delta(now["families"][f], then.get("families", {}).get(f))
                    for f in ("key", "working")
                ),
                *(_delta(now["by_kind"][k], then.get("by_kind", {}).get(k)) for k in FACT_KINDS),
            ]
            lines.append(_row(cells))
    return lines


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    c = results["config"]
    counts = results["facts"]
    strategies = c["strategies"]
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
        f"{sum(counts.values()):,} probe facts.",
    ]
    for family, kinds in FAMILIES.items():
        lines.append("")
        lines.append(
            f"{FAMILY_LABELS[family].capitalize()}: "
            + ", ".join(f"{KIND_LABELS[k]} {counts.get(k, 0):,}" for k in kinds)
            + "."
        )
    for summary in results["budgets"]:
        percent = summary["percent"]
        harnesses = results["harnesses"][str(percent)]
        lines += ["", f"## Budget: {percent}% of each conversation's raw tokens", ""]
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
        check = render_goals(summary.get("goals", {}))
        if check:
            lines += ["", f"Goals of issue 16 at {percent}%:", "", *check]
        lines += ["", "Key facts, by kind:", "", *render_kinds(summary, KEY_KINDS)]
        lines += ["", "Working-state facts, by kind:", "", *render_kinds(summary, WORKING_KINDS)]
        lines += [
            "",
            "Per harness (dataset file), key facts / working-state facts:",
            "",
            *render_harnesses(harnesses, strategies),
        ]
    if c.get("show_lost"):
        lines += render_lost(
            results["conversations"], strategies, c["budgets_percent"], c["show_lost"]
        )
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
            shares = [_family_share(o, result["fact_counts"], kinds) for kinds in FAMILIES.values()]
            text = "/".join("-" if v is None else f"{v * 100:.0f}%" for v in shares)
            scores.append(f"{name} {text if o['outcome'] == 'context' else 'none'}{mark}")
        parts.append(f"{percent}%: " + " ".join(scores))
    log(
        f"[{done}/{total}] {result['id']} ({result['raw_tokens']:,} tokens, "
        f"{len(result['facts'])} facts; key/working) {'; '.join(parts)} "
        f"({time.perf_counter() - started:.0f} s)"
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
    budgets = [aggregate(conversations, args.strategy, p) for p in args.budgets]
    harnesses = {str(p): aggregate_harnesses(conversations, args.strategy, p) for p in args.budgets}
    for summary in budgets:
        summary["goals"] = goals(summary, harnesses[str(summary["percent"])])
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
            "file_filter": args.file,
            "show_lost": args.show_lost,
        },
        "machine": {**machine_info(), "sessionstore_path": str(Path(sessionstore.__file__).parent)},
        "elapsed_s": time.perf_counter() - started,
        "raw_tokens": sum(c["raw_tokens"] for c in conversations),
        "facts": facts,
        "budgets": budgets,
        "harnesses": harnesses,
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
    parser.add_argument(
        "--file",
        action="append",
        metavar="TEXT",
        help="only the dataset files whose name holds TEXT (a harness); repeat for several",
    )
    parser.add_argument(
        "--show-lost",
        type=int,
        default=0,
        metavar="N",
        help="print a sample of N lost facts per kind, strategy and budget",
    )
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    parser.add_argument(
        "--compare",
        type=Path,
        metavar="JSON",
        help="also print the points gained or lost since an earlier run's --json file",
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.show_lost < 0:
        parser.error("--show-lost must be at least 0")
    if not Path(args.dataset).is_dir():
        parser.error(f"--dataset {args.dataset} is not a directory")
    if args.compare is not None and not args.compare.is_file():
        parser.error(f"--compare {args.compare} is not a file")
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
    text = render(results)
    if args.compare is not None:
        text += "\n".join(["", *render_comparison(results, json.loads(args.compare.read_text()))])
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        log(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
