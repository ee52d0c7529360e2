"""The statements that walk a chain of loops from a head back to the root.

Every read of a chain goes through one of them: a resume's windows, `chain_blocks`,
`get_digest`, `get_history`, an export's page counts, and the SDK session's items
(`_payload_reads`, whose walk starts at the active loop). Each is a recursive CTE, one
parent a step; how a step finds the parent depends on the database (`walk_form`,
`chain_step`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, bindparam, literal, select, true

from sessionstore.store._plain import is_citus
from sessionstore.store._statements import (
    LOOP_COLUMNS,
    MESSAGE_COLUMNS,
    keyed,
    loops,
    messages,
)
from sessionstore.store._tables import KEY_COLUMNS

__all__ = [
    "chain_step",
    "db_walk_form",
    "select_chain",
    "select_chain_counts",
    "select_history",
    "walk_back",
    "walk_form",
]


def walk_form(dialect: str, routed: bool) -> str:
    """How a chain walk's step finds the parent on this database (see `chain_step`)."""
    if routed:
        return "routed"
    return "lateral" if dialect == "postgresql" else "plain"


def db_walk_form(db: Connection) -> str:
    """`walk_form` for the database `db` is connected to (Citus asked once a connection)."""
    return walk_form(db.dialect.name, is_citus(db))


def chain_step(walk: Any, form: str) -> tuple[Any, Any, tuple[Any, ...]]:
    """A chain walk's step: the parent loop of the row before, its FROM clause, and filters.

    Returns `(parent, from_clause, conditions)`; `parent` has the loops table's columns.
    The parent is found by its id alone (loop ids are unique), which the primary key
    (`id` first) finds at once. With the session's key in the step too (bound, or taken
    from the row before), a table whose statistics say a session has one loop (most
    sessions have one, or the table was never analyzed) got plans that read all the
    session's loops again at each step: quadratic in the chain's length, half a second a
    walk at 1,000 loops (`tests/integration/store/test_chain_walk.py`). By `form`
    (`walk_form`):

    - `plain` (SQLite): a join on the id, a look-up of the rowid;
    - `lateral` (PostgreSQL): a `LATERAL` subquery of one row (`LIMIT 1`, which the
      planner does not flatten), so each step is an index look-up: joined, a small or
      never analyzed table got a hash join that read the whole table at each step;
    - `routed` (Citus): the join, with the distribution column bound as well, which the
      coordinator needs to route the walk to the session's shard.
    """
    parent = loops.alias("parent")
    found = parent.c.id == walk.c.parent_loop_id
    if form == "lateral":
        row = select(parent).where(found).limit(1).lateral("parent_loop")
        return row, walk.join(row, true()), ()
    routed = (parent.c.session_id == bindparam("sid"),) if form == "routed" else ()
    return parent, walk.join(parent, found), routed


def walk_back(
    name: str,
    start: Any,
    form: str,
    first: Sequence[Any],
    then: Callable[[Any, Any], Sequence[Any]],
    until: Callable[[Any], Any] | None = None,
) -> Any:
    """The recursive CTE `name` of a chain's loops, from the loop `start` back to the root.

    Each row is a loop's `id` and `parent_loop_id`, the columns `first` (the start's) or
    `then(walk, parent)` (each parent's, from the row before), and the session's key. A
    step finds the parent as `chain_step` says for `form`; with `until(walk)`, only from a
    row that meets it.
    """
    walk = (
        select(
            loops.c.id,
            loops.c.parent_loop_id,
            *first,
            *(loops.c[key] for key in KEY_COLUMNS),
        )
        .where(loops.c.id == start, *keyed(loops))
        .cte(name, recursive=True)
    )
    parent, joined, conditions = chain_step(walk, form)
    step = (
        select(
            parent.c.id,
            parent.c.parent_loop_id,
            *then(walk, parent),
            *(parent.c[key] for key in KEY_COLUMNS),
        )
        .select_from(joined)
        .where(*conditions)
    )
    if until is not None:
        step = step.where(until(walk))
    return walk.union_all(step)


def _chain_walk(limited: bool, form: str, carried: Sequence[str] = ()) -> Any:
    """The chain's loops from `:head` back to the root (`walk_back`).

    Each row has `hops` (from 1), the loop's `depth` and its columns `carried`.
    """
    return walk_back(
        "chain",
        bindparam("head"),
        form,
        (literal(1).label("hops"), loops.c.depth, *(loops.c[name] for name in carried)),
        lambda walk, parent: (
            walk.c.hops + 1,
            parent.c.depth,
            *(parent.c[name] for name in carried),
        ),
        (lambda walk: walk.c.hops < bindparam("limit")) if limited else None,
    )


_WALKED = {"id", "parent_loop_id", "depth", *KEY_COLUMNS}
"""The columns every walk carries (`walk_back`, `_chain_walk`)."""


@cache
def select_chain(limited: bool, form: str = "plain") -> Any:
    """Select the loops of the chain ending at `:head`, root first (the newest `:limit`).

    `form`: how the walk's steps find each parent on the database (`walk_form`). The walk
    carries every column read, so nothing is joined to it after: joined again to the
    loops table by id, a PostgreSQL table without statistics got a hash join that read
    all the session's loops for a window of a few (a resume, `get_digest`).
    """
    carried = [column.name for column in LOOP_COLUMNS if column.name not in _WALKED]
    walk = _chain_walk(limited, form, carried)
    return select(*(walk.c[column.name] for column in LOOP_COLUMNS)).order_by(walk.c.depth)


@cache
def select_history(form: str) -> Any:
    """Every message of the chain ending at `:head`, in order (`form`: see `walk_form`).

    Joined to the chain's recursive CTE, so no loop id is sent as a parameter (a driver's
    parameter limit does not apply).
    """
    chain = _chain_walk(False, form)
    return (
        select(*MESSAGE_COLUMNS)
        .join(chain, chain.c.id == messages.c.loop_id)
        .where(*keyed(messages))
        .order_by(chain.c.depth, messages.c.position)
    )


@cache
def select_chain_counts(form: str) -> Any:
    """The ids and message counts of the chain ending at `:head`, root first."""
    chain = _chain_walk(False, form)
    return (
        select(loops.c.id, loops.c.message_count)
        .join(chain, chain.c.id == loops.c.id)
        .where(*keyed(loops))
        .order_by(loops.c.depth)
    )
