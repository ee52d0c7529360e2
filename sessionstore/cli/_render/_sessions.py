"""Sessions as tables: a page of sessions, and one session with its loops."""

from __future__ import annotations

import json
from typing import Any

import click
from rich.table import Column, Table

from sessionstore import LoopRecord, Page, Session, SessionUsage, Usage
from sessionstore.cli._render._loops import LoopNumbers
from sessionstore.cli._render._output import cells, stdout, when

__all__ = ["print_session", "print_session_page", "session_json"]


def print_session_page(page: Page) -> None:
    """Print a page of sessions as a table, then the cursor of the next page if there is one."""
    if not page.items:
        click.echo("No sessions.")
        return
    # A title that only repeats the id (as after an import) is not shown twice.
    has_titles = any(s.title and s.title != s.id for s in page.items)
    columns = [Column("ID", overflow="fold", ratio=3)]
    if has_titles:
        columns.append(Column("Title", overflow="fold", ratio=2))
    columns += [
        Column("Tenant", overflow="fold", ratio=1),
        Column("Loops", justify="right", no_wrap=True),
        Column("Created", no_wrap=True),
    ]
    table = Table(*columns)
    for session in page.items:
        title = [session.title if session.title != session.id else ""] if has_titles else []
        table.add_row(
            *cells(
                session.id,
                *title,
                f"{session.app_name}/{session.user_id}",
                session.loop_count,
                when(session.created_at),
            )
        )
    stdout().print(table)
    if page.next_cursor is not None:
        click.echo(f"Next page: --cursor {page.next_cursor}")


def session_json(
    session: Session, loops: list[LoopRecord], usage: SessionUsage | None = None
) -> dict[str, Any]:
    """Return a session and its loops, each flagged `is_active`, and its usage, as JSON data.

    Each loop has its `id` (the store API's) and its `number` in the session (as the
    tables show it); each loop of the usage its `loop_number` beside its `loop_id`.
    """
    numbers = LoopNumbers(loops)
    usage_json = None if usage is None else usage.model_dump(mode="json")
    if usage_json is not None:
        for loop_usage in usage_json["loops"]:
            loop_usage["loop_number"] = numbers.optional(loop_usage["loop_id"])
    return {
        "session": session.model_dump(mode="json"),
        "loops": [
            {
                **loop.model_dump(mode="json"),
                "number": loop.number,
                "is_active": loop.id == session.active_loop_id,
            }
            for loop in loops
        ],
        **({} if usage_json is None else {"usage": usage_json}),
    }


def print_session(
    session: Session, loops: list[LoopRecord], usage: SessionUsage | None = None
) -> None:
    """Print a session's fields, one row per loop with the active one marked, and its usage.

    Loops are named by their number in the session (1, 2, ...; `LoopRecord.number`), the
    number `--loop` takes, not by their id in the database.
    """
    numbers = LoopNumbers(loops)
    fields = Table.grid(padding=(0, 2))
    fields.add_column(style="bold")
    fields.add_column(overflow="fold")
    for name, value in [
        ("Session", session.id),
        ("Title", session.title),
        ("Tenant", f"{session.app_name}/{session.user_id}"),
        ("Created", when(session.created_at)),
        ("Updated", when(session.updated_at)),
        ("Version", session.version),
        ("Active loop", numbers.optional(session.active_loop_id)),
        ("Metadata", json.dumps(session.metadata, ensure_ascii=False)),
    ]:
        fields.add_row(*cells(name, value))
    console = stdout()
    console.print(fields)
    if not loops:
        console.print("No loops.")
        return
    table = Table(
        *(
            Column(name, justify="right")
            for name in ("Loop", "Parent", "Depth", "Messages", "Tokens", "Turns")
        ),
        "Closed",
        "Active",
    )
    for loop in loops:
        table.add_row(
            *cells(
                loop.number,
                numbers.optional(loop.parent_loop_id),
                loop.depth,
                loop.message_count,
                loop.token_total,
                loop.turn_count,
                "no" if loop.closed_at is None else "yes",
                "*" if loop.id == session.active_loop_id else "",
            )
        )
    console.print(table)
    if usage is not None and usage.calls:
        console.print(_usage_table(usage, numbers))


def _usage_table(usage: SessionUsage, numbers: LoopNumbers) -> Table:
    table = Table(
        *(
            Column(name, justify="right")
            for name in (
                "Loop",
                "Calls",
                "Input",
                "Output",
                "Cache read",
                "Cache write",
                "Reasoning",
            )
        ),
        title="Usage (tokens)",
    )

    def counts(value: Usage) -> list[str]:
        return [
            f"{n:,}"
            for n in (
                value.input_tokens,
                value.output_tokens,
                value.cache_read_tokens,
                value.cache_write_tokens,
                value.reasoning_tokens,
            )
        ]

    for loop in usage.loops:
        table.add_row(*cells(numbers.optional(loop.loop_id), loop.calls, *counts(loop.usage)))
    table.add_row(*cells("Total", usage.calls, *counts(usage.usage)), style="bold")
    return table
