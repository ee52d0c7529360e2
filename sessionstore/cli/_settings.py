"""What the `sessionstore` group itself needs: its `--url` option and the settings it passes on.

This module imports only click, so `sessionstore --help` and `--version` stay fast; the
commands import the library when they run.
"""

from __future__ import annotations

from dataclasses import dataclass

import click

from sessionstore._defaults import DEFAULT_LOCK_TIMEOUT, DEFAULT_URL

__all__ = ["URL_ENVVAR", "Settings", "lock_timeout_option", "url_option"]

URL_ENVVAR = "SESSIONSTORE_URL"


@dataclass(frozen=True, slots=True)
class Settings:
    """What the group's options give every command."""

    url: str
    is_url_given: bool = False
    """True when `--url` was on the command line (so hints to run more commands repeat it)."""
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT
    """Seconds a write waits for a lock another transaction holds (`--lock-timeout`)."""


url_option = click.option(
    "--url",
    envvar=URL_ENVVAR,
    default=DEFAULT_URL,
    show_default=True,
    show_envvar=True,
    metavar="URL",
    help="The database: sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST/DB.",
)
"""The group's database option; every command reads it from `Settings`."""

lock_timeout_option = click.option(
    "--lock-timeout",
    envvar="SESSIONSTORE_LOCK_TIMEOUT",
    type=click.FloatRange(min=0, min_open=True, max=86_400),
    default=DEFAULT_LOCK_TIMEOUT,
    show_default=True,
    show_envvar=True,
    metavar="SECONDS",
    help="How long a write waits for a lock another transaction holds before it fails.",
)
"""The group's bound on lock waits; `open_store` reads it from `Settings`."""
