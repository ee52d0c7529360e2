"""Taking a few of each list in turn (pure, no imports): a diff's lines file by file.

The digest's diff lines (`_changes`) and the cut of a long diff in a tool's output
(`strategies._diff_cut`) both show every file before any one in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["in_rounds"]

_T = TypeVar("_T")


def in_rounds(lists: Sequence[Sequence[_T]], rounds: int | None = None) -> list[_T]:
    """Return the first item of each list, then the second of each, ... (`rounds` at most)."""
    longest = max((len(items) for items in lists), default=0)
    count = longest if rounds is None else min(rounds, longest)
    return [items[k] for k in range(count) for items in lists if k < len(items)]
