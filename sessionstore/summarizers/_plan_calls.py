"""An agent's own plan, read from the calls of its todo or plan tool (pure).

Agents keep a task list through a tool: Claude Code's `TodoWrite` (`{"todos": [{"content",
"status"}]}`), Codex's `update_plan` (`{"plan": [{"step", "status"}]}`), OpenHands'
`task_tracker` (`{"task_list": [{"title", "status"}]}`), Cursor's `todo_write` (`{"todos":
[{"id", "content", "status"}], "merge": true}`). Folded into a digest as one action ("WROTE
todo write - ok"), the list is gone, and the agent that resumes no longer knows what it had
left to do (OpenHands #10508, codex #34095). `plan_of` reads such a call by the shape of its
arguments, whatever the tool's name: a list of entries that each have a text and a status.
The newest list, merged by entry id when the call says `merge`, goes into the digest's
"Remaining Work".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["MAX_PLAN_ENTRIES", "PlanEntry", "merged_plan", "plan_lines", "plan_of"]

MAX_PLAN_ENTRIES = 20
"""The most entries of a plan a digest keeps (the unfinished ones first)."""
_LIST_KEYS = frozenset({"todos", "todo", "plan", "task_list", "tasks", "steps", "checklist"})
"""The argument that holds the list (a tool's other lists of records are not its plan)."""
_QUOTED_LIST_KEYS = tuple(f'"{key}"' for key in sorted(_LIST_KEYS))
_TEXT_KEYS = ("content", "step", "title", "task", "description", "text", "name")
_STATUS_KEYS = ("status", "state")
_DONE = frozenset({"completed", "complete", "done", "finished", "resolved", "success"})
_DROPPED = frozenset({"cancelled", "canceled", "skipped", "abandoned", "obsolete"})
_ACTIVE = frozenset({"in_progress", "in-progress", "in progress", "active", "doing", "started"})
_ENTRY_CHARS = 200


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One entry of an agent's plan."""

    text: str
    status: str
    """`done`, `active`, `pending` or `dropped`."""
    key: str | None = None
    """The entry's own id, when it has one (a merging update names entries by it)."""


def plan_of(arguments: str) -> tuple[list[PlanEntry], bool] | None:
    """Return the plan a call's JSON arguments hold and whether it merges, or None.

    A plan is a list under a plan-like key (`todos`, `plan`, `task_list`, `tasks`,
    `steps`, `checklist`) whose entries (at least one, all of them objects) each have a
    string text (`content`, `step`, `title`, ...) and a status (`status` or `state` as a
    string, or a boolean `done` / `completed`).
    """
    # Most calls are no plan: only arguments that name a plan-like key are parsed.
    if not any(key in arguments for key in _QUOTED_LIST_KEYS):
        return None
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None
    if not isinstance(value, dict):
        return None
    for name, entries in value.items():
        if name in _LIST_KEYS and isinstance(entries, list) and entries:
            plan = [_entry(entry) for entry in entries]
            if all(entry is not None for entry in plan):
                merge = value.get("merge") is True
                return [entry for entry in plan if entry is not None], merge
    return None


def merged_plan(before: Sequence[PlanEntry], update: Sequence[PlanEntry]) -> list[PlanEntry]:
    """Return `before` with the entries of a merging `update` replaced by id, new ones added."""
    by_key = {entry.key: entry for entry in update if entry.key is not None}
    merged = [by_key.pop(entry.key, entry) if entry.key else entry for entry in before]
    return merged + [entry for entry in update if entry.key is None or entry.key in by_key]


def plan_lines(plan: Sequence[PlanEntry], tool: str) -> list[tuple[str, int]]:
    """Return the plan as digest lines with their rank: unfinished entries first and higher."""
    order = {"active": 0, "pending": 1, "done": 2, "dropped": 3}
    kept = sorted(plan, key=lambda entry: order[entry.status])[:MAX_PLAN_ENTRIES]
    kept.sort(key=plan.index)  # the plan's own order, of the entries kept
    mark = {"active": "in progress", "pending": "to do", "done": "done", "dropped": "dropped"}
    ranks = {"active": 4, "pending": 3, "done": 1, "dropped": 0}
    return [
        (f"Plan ({tool}), {mark[entry.status]}: {entry.text}", ranks[entry.status])
        for entry in kept
    ]


def _entry(entry: object) -> PlanEntry | None:
    if not isinstance(entry, Mapping):
        return None
    text = next((entry[key] for key in _TEXT_KEYS if isinstance(entry.get(key), str)), None)
    if not text or not text.strip():
        return None
    status = _status(entry)
    if status is None:
        return None
    key = entry.get("id")
    return PlanEntry(
        " ".join(text.split())[:_ENTRY_CHARS],
        status,
        str(key) if isinstance(key, str | int) and not isinstance(key, bool) else None,
    )


def _status(entry: Mapping[str, object]) -> str | None:
    for key in _STATUS_KEYS:
        value = entry.get(key)
        if isinstance(value, str) and value.strip():
            word = value.strip().lower()
            if word in _DONE:
                return "done"
            if word in _DROPPED:
                return "dropped"
            return "active" if word in _ACTIVE else "pending"
    for key in ("done", "completed", "checked"):
        value = entry.get(key)
        if isinstance(value, bool):
            return "done" if value else "pending"
    return None
