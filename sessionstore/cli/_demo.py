"""`sessionstore demo`: store a long synthetic agent session, compact it, rebuild it, audit it."""

# Click keeps the line breaks of a paragraph that follows a line holding only "\b" (a
# backspace character), which is how every help text shows its example; a raw docstring
# would hold a backslash and a "b" instead.
# ruff: noqa: D301

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import click
from rich.progress import MofNCompleteColumn

from sessionstore import (
    BuiltContext,
    CompactionConfig,
    CompactionResult,
    Message,
    Session,
    SessionAudit,
    SessionStore,
    ToolResultMessage,
    audit_session,
    build_context,
    compact_session_loops,
)
from sessionstore._demo import generate_session
from sessionstore.cli._options import Settings, budget_option, json_option, run_with_store
from sessionstore.cli._render import demo_json, print_demo, print_json, progress_bar
from sessionstore.cli._render._loops import LoopNumbers

__all__ = ["DemoRun", "demo"]


@dataclass(frozen=True, slots=True)
class DemoRun:
    """What the demo stored, and what compacting, rebuilding and auditing it gave."""

    session: Session
    loops: int
    messages: int
    turns: int
    raw_tokens: int
    compaction: CompactionResult
    context: BuiltContext
    audit: SessionAudit
    numbers: LoopNumbers
    """The loops' numbers in the session (1, 2, ...), which the report shows."""


def _agent_batches(messages: Sequence[Message]) -> Iterator[list[Message]]:
    """Split a loop as an agent appends it: each message with the tool results answering it."""
    batch: list[Message] = []
    for message in messages:
        if batch and not isinstance(message, ToolResultMessage):
            yield batch
            batch = []
        batch.append(message)
    if batch:
        yield batch


async def _demo(
    store: SessionStore,
    history: Sequence[Sequence[Message]],
    *,
    seed: int,
    budget: int,
    advance: Callable[[int], None],
) -> DemoRun:
    # The default strategy, as `sessionstore compact`'s: each loop's middle folded into a digest.
    config = CompactionConfig()
    session = await store.create_session(
        app_name="demo",
        user_id="local",
        title=f"Synthetic coding-agent session (seed {seed})",
        metadata={"source": "sessionstore demo", "seed": seed},
    )
    raw_tokens = 0
    for messages in history:
        await store.start_loop(session.id)
        for batch in _agent_batches(messages):
            stored = await store.append_messages(session.id, batch)
            raw_tokens += sum(m.token_count for m in stored)
            advance(len(batch))
    loops = await store.list_loops(session.id)
    turns = sum(loop.turn_count for loop in loops)
    compaction = await compact_session_loops(
        store, session.id, config=config, max_context_tokens=budget
    )
    built = await build_context(store, session.id, max_context_tokens=budget, config=config)
    audited = await audit_session(store, session.id, config=config, max_context_tokens=budget)
    return DemoRun(
        session=session,
        loops=len(history),
        messages=sum(len(loop) for loop in history),
        turns=turns,
        raw_tokens=raw_tokens,
        compaction=compaction,
        context=built,
        audit=audited,
        numbers=LoopNumbers(loops),
    )


@click.command("demo")
@click.option(
    "--seed",
    type=int,
    default=7,
    show_default=True,
    help="Chooses the synthetic session; the same seed gives the same messages.",
)
@click.option(
    "--loops",
    type=click.IntRange(1, 200),
    default=12,
    show_default=True,
    help="How many loops (user requests) the session has.",
)
@budget_option("The model's window the context is rebuilt within.", default=32_000, dest="budget")
@json_option()
@click.pass_obj
def demo(settings: Settings, seed: int, loops: int, budget: int, as_json: bool) -> None:
    """Try it: store, compact and rebuild a long agent session.

    Upgrades the database's schema, stores a realistic coding-agent session (many
    loops, hundreds of messages, far more tokens than the budget) loop by loop as an
    agent would, compacts it, rebuilds the context within the budget, and prints the
    audit of what the model sees against what happened. Each run adds a new session.

    \b
    Examples:
        sessionstore demo
        sessionstore demo --seed 3 --loops 20 --budget 16000
    """
    history = generate_session(seed=seed, loops=loops)
    total = sum(len(loop) for loop in history)
    progress = progress_bar("Storing messages", MofNCompleteColumn(), transient=True)
    with progress:
        task = progress.add_task("store", total=total)
        run = run_with_store(
            settings.url,
            lambda store: _demo(
                store,
                history,
                seed=seed,
                budget=budget,
                advance=lambda count: progress.advance(task, count),
            ),
            upgrade=True,
        )
    if as_json:
        print_json(demo_json(run, settings.url, budget))
    else:
        print_demo(run, settings.url, budget, is_url_given=settings.is_url_given)
