"""Where output goes and how one value prints: JSON, the console, table cells and numbers."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.text import Text

from sessionstore.cli._render._printable import json_text, printable, printable_console

if TYPE_CHECKING:  # imported when a bar is made: a command that shows none never loads them
    from rich.progress import Progress, ProgressColumn

__all__ = [
    "cells",
    "ids",
    "one_line",
    "print_json",
    "progress_bar",
    "share",
    "stdout",
    "turn_span",
    "when",
]


def print_json(data: Any) -> None:
    r"""Print `data` as indented JSON on stdout, non-ASCII characters as they are.

    Those a terminal could obey are escaped (as `\u009b`, say): the JSON means the same.
    """
    click.echo(json_text(json.dumps(data, indent=2, ensure_ascii=False)))


def stdout() -> Console:
    """Return a console on stdout for tables and text, which prints stored text as printable."""
    # No highlighting: ids and numbers are data, not syntax to colour.
    return printable_console(highlight=False)


def progress_bar(label: str, amount: ProgressColumn, *, transient: bool = False) -> Progress:
    """Return a progress bar on stderr (so stdout can be piped), shown only on a terminal.

    It reads `label`, the bar, `amount` (how much is done) and the time remaining.
    """
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    stderr = Console(stderr=True)
    return Progress(
        TextColumn(label),
        BarColumn(),
        amount,
        TimeRemainingColumn(),
        console=stderr,
        disable=not stderr.is_terminal,
        transient=transient,
    )


def when(moment: datetime) -> str:
    """Return a stored (UTC) time as `2026-05-09 14:30:00 UTC`."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def cells(*values: object) -> list[Text]:
    """Return one table cell per value, `-` for None, as printable text."""
    # Text, not str: a title like "[draft]" must not be read as rich markup.
    return [Text("-" if value is None else printable(str(value))) for value in values]


def turn_span(start: int, end: int) -> str:
    """Return `3` or `3..7`: a range of turns, both ends included."""
    return str(start) if start == end else f"{start}..{end}"


def ids(values: Iterable[int]) -> str:
    """Return `1, 2, 3`, or `none` when there are none."""
    return ", ".join(str(value) for value in values) or "none"


def share(part: int, whole: int) -> str:
    """Return `part` as a whole percentage of `whole`, `-` when `whole` is zero."""
    return f"{part / whole:.0%}" if whole else "-"


def one_line(text: str, limit: int = 160) -> str:
    """Return `text` on one line, printable, cut with an ellipsis at `limit` characters."""
    flat = " ".join(printable(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
