"""Progress on stderr for the commands that take a while (`compact`, `audit --html`, `export`).

A rich spinner with the step in progress, on stderr only, so stdout stays the command's
output. It is shown when stderr is a terminal and the command prints no JSON; `--progress`
asks for it anyway (where stderr is no terminal: a line a step, at most one a second), and
`--no-progress` never shows it.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import click

__all__ = ["Progress", "progress", "progress_option"]

_F = TypeVar("_F", bound=Callable[..., Any])


class Progress(Protocol):
    """What a command tells the user while it works."""

    def step(self, text: str) -> None:
        """Say what the command is doing now."""


class _Silent:
    def step(self, text: str) -> None:
        pass


class _Lines:
    """Steps as plain lines: progress asked for where stderr is no terminal (a log)."""

    def __init__(self) -> None:
        self._last = -math.inf

    def step(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last >= 1:
            self._last = now
            click.echo(f"... {text}", err=True)


class _Shown:
    def __init__(self, status: Any) -> None:
        self._status = status

    def step(self, text: str) -> None:
        self._status.update(f"[bold]{text}[/]")


def progress_option() -> Callable[[_F], _F]:
    """The `--progress/--no-progress` switch (default: on a terminal, without `--json`)."""
    return click.option(
        "--progress/--no-progress",
        "show_progress",
        default=None,
        help="Show what the command is doing on stderr while it works (default: when stderr "
        "is a terminal and the output is not --json).",
    )


def is_shown(asked: bool | None, *, as_json: bool = False) -> bool:
    """Whether to show progress: as asked, else only on a terminal and without JSON."""
    if asked is not None:
        return asked
    return not as_json and sys.stderr.isatty()


@contextlib.contextmanager
def progress(first: str, asked: bool | None, *, as_json: bool = False) -> Iterator[Progress]:
    """Show a spinner on stderr, starting at step `first`, while the block runs."""
    if not is_shown(asked, as_json=as_json):
        yield _Silent()
        return
    if not sys.stderr.isatty():
        lines = _Lines()
        lines.step(first)
        yield lines
        return
    # Imported here: rich's live display is only needed while something is shown.
    from rich.console import Console

    console = Console(stderr=True)
    with console.status(f"[bold]{first}[/]", spinner="dots") as status:
        yield _Shown(status)
