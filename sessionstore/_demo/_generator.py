"""Synthetic coding-agent sessions: long, realistic, and the same every time for a seed.

A session is a list of loops; a loop is the work for one user request on a fictional
Python project (`ledgerline`, a small bookkeeping service): the request, then assistant
turns that read, search, edit and test the code, then a final answer. The demo, the
benchmarks and the tests use it to get histories of any length without a model.

The shape follows real coding-agent transcripts (sizes are in heuristic tokens,
UTF-8 bytes / 4):

- **Turns per loop:** log-uniform over `turns_per_loop` (default 6 to 40 tool-using
  assistant turns), plus the final answer.
- **Assistant turns:** thinking first in 45%, a short text in 70%, then 1 tool call (72%),
  2 (20%) or 3 (8%). Early turns explore (`read_file`, `grep`, `list_dir`), middle
  turns edit, late turns run tests and `bash` checks.
- **Tool results:** one per call, right after the call. File reads return a whole file
  of 40 to 450 numbered lines or a window of 30 to 120, edits a short snippet, greps up
  to 60 hits, test runs a summary or tracebacks, and now and then a log tail of several
  thousand tokens: a median near 250 tokens, a tenth above 2,000. About 10% are errors
  (`is_error=True`), mostly failing tests.
- **Users:** requests of 30 to 200 tokens, a quarter with a pasted traceback or log;
  a follow-up message ("also ...", "that broke ...") after 4% of turns, and a shell
  command of their own (`BashExecutionMessage`) after 2%.

Every loop is drawn from its own generator, seeded from `(seed, loop index)`, so the
first loops of a session do not depend on how many follow.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from sessionstore._demo._codebase import _Project, _project
from sessionstore._demo._loop import _Loop
from sessionstore._demo._words import _WRAP_UP
from sessionstore.models import Message

__all__ = ["generate_session", "iter_session_messages"]


def _loop_messages(
    project: _Project,
    rng: random.Random,
    turns: int,
    *,
    budget: int | None = None,
    is_interrupted: bool = False,
) -> list[Message]:
    """Return one loop; with a budget, at most `budget` messages and never exactly one less."""
    loop = _Loop(project, rng)
    loop.request()
    room = math.inf if budget is None else budget
    follow_ups = 0
    for turn in range(turns):
        # The final answer needs one message; the calls of this turn need one more than
        # their number.
        free = room - len(loop.messages) - 1
        if free < 2:
            break
        phase = 0 if turn < 0.3 * turns else 1 if turn < 0.75 * turns else 2
        draw = rng.random()
        calls = 1 if draw < 0.72 else 2 if draw < 0.92 else 3
        loop.assistant_turn(phase, int(min(calls, free - 1)))
        if turn + 1 < turns and free - calls - 1 >= 3:
            if follow_ups < 2 and rng.random() < 0.04:
                follow_ups += 1
                loop.follow_up()
            elif rng.random() < 0.02:
                loop.bash_execution()
    if is_interrupted:
        loop.interrupted_call()
        return loop.messages
    # A loop may not leave room for exactly one message: no loop is that short.
    if budget is not None and budget - len(loop.messages) - 1 == 1:
        loop.follow_up(_WRAP_UP)
    loop.final_answer()
    return loop.messages


def _turn_count(rng: random.Random, turns_per_loop: int | tuple[int, int]) -> int:
    if isinstance(turns_per_loop, int):
        return turns_per_loop
    low, high = turns_per_loop
    # Log-uniform: most loops are short, a few are very long, as in real sessions.
    return min(int(math.exp(rng.uniform(math.log(low), math.log(high + 1)))), high)


def _check_turns(turns_per_loop: int | tuple[int, int]) -> None:
    if isinstance(turns_per_loop, int):
        if turns_per_loop < 0:
            raise ValueError(f"turns_per_loop must be at least 0, got {turns_per_loop}")
        return
    low, high = turns_per_loop
    if not 1 <= low <= high:
        raise ValueError(
            f"turns_per_loop must be (low, high) with 1 <= low <= high, got {turns_per_loop}"
        )


def _loop_rng(seed: int, index: int) -> random.Random:
    return random.Random(f"sessionstore._demo:{seed}:loop:{index}")


def generate_session(
    *,
    seed: int = 0,
    loops: int = 12,
    turns_per_loop: int | tuple[int, int] = (6, 40),
    interrupted_last_call: bool = False,
) -> list[list[Message]]:
    """Return a synthetic coding-agent session: one list of messages per loop.

    Each loop starts with a user request and ends with an assistant answer that makes no
    tool call; every tool call in between is answered by one tool result in the same
    turn. The same arguments always give the same messages.

    Args:
        seed: Chooses the session; the project's files depend on it too.
        loops: How many loops (user requests).
        turns_per_loop: Tool-using assistant turns per loop: a fixed number, or a
            `(low, high)` range drawn log-uniformly per loop.
        interrupted_last_call: End the last loop with an assistant tool call that has
            no result, as when a run is killed mid-call, instead of a final answer.

    Example:
        >>> session = generate_session(seed=7, loops=3)
        >>> [loop[0].kind for loop in session]
        ['user', 'user', 'user']
    """
    _check_turns(turns_per_loop)
    if loops < 0:
        raise ValueError(f"loops must be at least 0, got {loops}")
    if interrupted_last_call and loops == 0:
        raise ValueError("interrupted_last_call needs at least one loop")
    project = _project(seed)
    session = []
    for index in range(loops):
        rng = _loop_rng(seed, index)
        turns = _turn_count(rng, turns_per_loop)
        is_last = index == loops - 1
        session.append(
            _loop_messages(project, rng, turns, is_interrupted=interrupted_last_call and is_last)
        )
    return session


def iter_session_messages(
    *,
    seed: int = 0,
    total_messages: int,
    turns_per_loop: int | tuple[int, int] = (6, 40),
) -> Iterator[list[Message]]:
    """Yield the loops of a synthetic session until it holds `total_messages` messages.

    The loops are those of `generate_session` with the same seed, except the last, which
    is cut short to end exactly at `total_messages` (it still ends with a final answer,
    and no call is left without a result). Loops are made one at a time, so a session of
    a million messages never sits in memory whole.

    Raises:
        ValueError: `total_messages` is 1 (the shortest loop has two messages) or negative.
    """
    _check_turns(turns_per_loop)
    if total_messages < 0 or total_messages == 1:
        raise ValueError(
            f"total_messages must be 0 or at least 2 (a request and an answer): {total_messages}"
        )
    project = _project(seed)
    left = total_messages
    index = 0
    while left > 0:
        rng = _loop_rng(seed, index)
        loop = _loop_messages(project, rng, _turn_count(rng, turns_per_loop), budget=left)
        left -= len(loop)
        index += 1
        yield loop
