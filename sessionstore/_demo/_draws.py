"""Draws from a `random.Random`, cheaper than its own `choice` and `randint`."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

_T = TypeVar("_T")


def _choice(rng: random.Random, seq: Sequence[_T]) -> _T:
    # `Random.choice` and `randint` draw bits until they fit the range, several times
    # slower than one float: it matters at a million messages.
    return seq[int(rng.random() * len(seq))]


def _int(rng: random.Random, low: int, high: int) -> int:
    return low + int(rng.random() * (high - low + 1))


def _below(rng: random.Random, stop: int) -> int:
    return int(rng.random() * stop)
