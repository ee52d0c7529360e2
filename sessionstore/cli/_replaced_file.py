"""Write a command's output file whole or not at all: a temporary file beside it, renamed.

A command that writes FILE (`export -o`, `trajectories compress`) streams into a
temporary file in FILE's directory and renames it over FILE only once everything is
written and flushed to disk. A failure midway (a database error, a bad message, a full
disk, Ctrl-C, SIGKILL) leaves FILE as it was, which may be the last good copy.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import click

__all__ = ["replaced_on_success"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def replaced_on_success(target: Path, *, param_hint: str) -> Iterator[IO[str]]:
    """Yield a text file to write; on success it replaces `target`, on failure it is removed.

    The new file gets the permissions a newly created file would (`0o666` less the umask).

    Raises:
        click.BadParameter: `target`'s directory does not exist (named by `param_hint`).
        click.ClickException: the directory cannot be written to.
    """
    directory = target.resolve().parent
    if not directory.is_dir():
        raise click.BadParameter(f"{directory} is not a directory", param_hint=param_hint)
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{target.name}.", suffix=".tmp", dir=directory
        )
    except OSError as exc:
        raise click.ClickException(
            f"cannot write {target}: {exc.strerror or exc} (a temporary file is written in "
            f"{directory} first, then renamed)"
        ) from exc
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as sink:
            yield sink
            sink.flush()
            os.fsync(sink.fileno())
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
