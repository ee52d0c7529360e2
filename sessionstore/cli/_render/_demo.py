"""The demo's report: what was stored, compacted, rebuilt and audited, and what to try next."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from sqlalchemy.engine import make_url

from sessionstore.cli._render._audit import audit_json, print_audit_summary, turn_table
from sessionstore.cli._render._compaction import compaction_json, print_compaction_blocks
from sessionstore.cli._render._context import context_footer, context_summary_json
from sessionstore.cli._render._output import stdout

if TYPE_CHECKING:
    from sessionstore.cli._demo import DemoRun

__all__ = ["demo_json", "print_demo"]


def _shown_url(url: str) -> str:
    return make_url(url).render_as_string(hide_password=True)


def demo_json(run: DemoRun, url: str, budget: int) -> dict[str, Any]:
    """Return the demo's report as JSON data, with each audited loop's turns counted."""
    audited = audit_json(run.audit, run.numbers)
    for loop in audited["loops"]:
        loop["turns"] = len(loop["turns"])
    return {
        "session_id": run.session.id,
        "title": run.session.title,
        "url": _shown_url(url),
        "stored": {
            "loops": run.loops,
            "messages": run.messages,
            "turns": run.turns,
            "raw_tokens": run.raw_tokens,
        },
        "compaction": compaction_json(run.session.id, run.compaction, run.numbers),
        "context": context_summary_json(run.context, budget, run.numbers),
        "audit": audited,
    }


def print_demo(run: DemoRun, url: str, budget: int, *, is_url_given: bool) -> None:
    """Print the demo's report in four steps, then commands to try on the new session.

    The commands repeat `--url` (with its password) when it was on the command line.
    """
    console = stdout()
    sid = run.session.id
    hint = "sessionstore"
    if is_url_given:
        hint += f" --url {make_url(url).render_as_string(hide_password=False)}"

    def heading(text: str) -> None:
        console.print()
        console.print(Text(text, style="bold"))

    console.print(
        Text("sessionstore demo", style="bold")
        + Text(": store, compact and rebuild a long agent session")
    )
    console.print(
        f"Database: {_shown_url(url)} (schema upgraded)",
        markup=False,
        soft_wrap=True,
    )
    heading(f"1. Stored session {sid}")
    for line in (
        f"{run.loops} loops (one per user request), {run.turns} turns, {run.messages} messages",
        f"{run.raw_tokens:,} raw tokens: {run.raw_tokens / budget:.1f} times the "
        f"{budget:,}-token budget",
        "stored as an agent does: start_loop, then append_messages per model call",
    ):
        console.print(f"   {line}", markup=False, soft_wrap=True)
    loop_ids = run.compaction.loop_ids
    current = run.numbers(loop_ids[-1]) if loop_ids else None
    heading(
        f"2. Compacted the current loop ({current}) and the "
        f"{max(0, len(run.compaction.loop_ids) - 1)} before it, in "
        f"{run.compaction.duration_ms:.0f} ms"
    )
    print_compaction_blocks(console, sid, run.compaction, run.numbers)
    heading(f"3. Rebuilt the model's context within {budget:,} tokens")
    for line in context_footer(run.context, budget, run.numbers):
        console.print(f"   {line}", markup=False, soft_wrap=True)
    if run.audit.loops:
        current_audit = run.audit.loops[-1]
        heading(
            f"4. Audit of loop {current_audit.loop.number}: raw turns against what the model sees"
        )
        console.print(turn_table([current_audit], max_turns=15, show_loop=False))
    print_audit_summary(console, run.audit)
    heading("Next, try:")
    for command in (
        f"audit {sid}",
        f"context {sid} --budget 8000 --format text",
        f"compact {sid} --scope budget --budget {budget}",
        f"sessions show {sid}",
    ):
        console.print(f"   {hint} {command}", markup=False, soft_wrap=True)
