"""Folding a newer handoff into an older one, as the seed's iterative update asks (pure).

`merge_handoffs` keeps what carries forward (goal, constraints, decisions, files, values),
appends the newer actions numbered after the older, and lets the newer turns replace the
working state, the work in progress and the blockers, or settle the older ones: a file
deleted since, a question the user has answered, a failure a newer action ran clean.
"""

from __future__ import annotations

import re
from dataclasses import replace

from sessionstore.summarizers._facts import SENTENCE_CHARS
from sessionstore.summarizers._handoff import (
    CONTINUED,
    FAILURE_HEADER,
    FOLLOW_UP_CHARS,
    MAX_FOLLOW_UPS,
    NO_TASK,
    WAITING_FOR_USER,
    Action,
    Handoff,
    Item,
    state_item,
    task_parts,
    with_follow_ups,
)
from sessionstore.summarizers._run_output import resolved_note
from sessionstore.summarizers._said import is_constraint, is_short_reply
from sessionstore.summarizers._scan import collapse, cut, sentences

__all__ = ["merge_files", "merge_handoffs", "numbered_after"]


def numbered_after(doc: Handoff, offset: int) -> Handoff:
    """Return `doc` with its completed actions numbered after `offset` (each loop starts at 1)."""
    if not offset or not doc.actions:
        return doc
    actions = [
        replace(
            action,
            first=action.first + offset if action.first else 0,
            last=action.last + offset if action.last else 0,
            line=_ACTION_NUMBER.sub(lambda m: _shifted(m, offset), action.line, count=1),
        )
        for action in doc.actions
    ]
    return replace(doc, actions=actions)


_ACTION_NUMBER = re.compile(r"^(\d+)(?:-(\d+))?\.")


def _shifted(match: re.Match[str], offset: int) -> str:
    first, last = match.group(1), match.group(2)
    shifted = str(int(first) + offset)
    return f"{shifted}-{int(last) + offset}." if last else f"{shifted}."


def merge_handoffs(older: Handoff, newer: Handoff) -> Handoff:
    """Return `older` updated with `newer`, as the seed's iterative update asks.

    Goal, constraints, decisions, files and critical values carry forward (newer items
    added, duplicates dropped, files in order of last touch); completed actions append
    (the newer ones numbered after the older); the task, active state, work in progress,
    blockers and remaining work are replaced by newer ones when there are any. Pending
    questions move to resolved once the assistant has replied since.

    A newer request that answers the older turns (the assistant was waiting for the
    user's answer, or it is a short reply such as `yes, go ahead`) does not replace the
    task: it follows it, as a reply within one digest does (`Later the user said`).
    """
    numbers = [action.first or action.last for action in newer.actions]
    if older.actions and min((n for n in numbers if n), default=older.next_number) < (
        older.next_number
    ):
        # The newer handoff numbers its actions from 1 (a loop's own digest): after the older.
        newer = numbered_after(newer, older.next_number - 1)
    if _answers(older, newer):
        newer = replace(newer, task="", later=[*_as_replies(newer.task), *newer.later])
    pending = newer.pending
    resolved = older.resolved
    if older.pending and newer.has_reply:
        resolved = [
            *resolved,
            *(replace(q, text=f"{q.text} (addressed later)") for q in older.pending),
        ]
    else:
        pending = [*older.pending, *pending]
    # A task the newer one replaces becomes the goal when there was none, so the
    # original request survives any number of updates.
    earlier_request = (
        task_parts(older.task)[0] if newer.task and older.task and older.task != newer.task else ""
    )
    merged = Handoff(
        task=newer.task or with_follow_ups(older.task, newer.later),
        goal=older.goal or earlier_request or newer.goal,
        constraints=_union(older.constraints, newer.constraints),
        actions=[*older.actions, *newer.actions],
        state=_merge_state(
            older.state, newer.state, {f.text for f in newer.files if f.note == "deleted"}
        ),
        in_progress=newer.in_progress or _still_open(older.in_progress, newer),
        blocked=newer.blocked or _still_blocked(older, newer.actions),
        decisions=_union(older.decisions, newer.decisions),
        resolved=_union(resolved, newer.resolved),
        pending=_union([], pending),
        files=merge_files(older.files, newer.files),
        remaining=newer.remaining or older.remaining,
        critical=_union(older.critical, newer.critical, keep_last=True),
        later=[] if newer.task or older.task else [*older.later, *newer.later][-MAX_FOLLOW_UPS:],
        has_reply=older.has_reply or newer.has_reply,
        continued=older.continued or newer.continued,
    )
    said = [*_as_replies(older.task), *_as_replies(newer.task), *older.later, *newer.later]
    return _with_request_constraints(merged, said)


REQUEST_CONSTRAINT_RANK = 2
"""The rank of a constraint stated in a request or reply the merged task no longer shows."""


def _with_request_constraints(doc: Handoff, said: list[str]) -> Handoff:
    """Return `doc` with the constraints of what the user said besides its request and goal.

    A request the newer one replaced, and replies beyond the last `MAX_FOLLOW_UPS`, would
    vanish with their loops; the constraints they state (`the cheapest`, `I don't need
    insurance`, `without changing the dates`) stay as the user's constraints, each once,
    as within one digest. Those of the replies the task still shows are not rendered
    while it shows them (the fitter may cut older replies; their constraints then show).
    """
    kept = collapse(task_parts(doc.task)[0] + "\n" + doc.goal)
    known = {item.identity for item in doc.constraints}
    added: list[Item] = []
    for text in said:
        if collapse(text) in kept:
            continue
        for sentence in sentences(text):
            clean = cut(sentence.lstrip("-*• "), SENTENCE_CHARS)
            if not is_constraint(clean) or clean in known or collapse(clean) in kept:
                continue
            known.add(clean)
            added.append(Item(clean, REQUEST_CONSTRAINT_RANK))
    return replace(doc, constraints=[*doc.constraints, *added]) if added else doc


def _answers(older: Handoff, newer: Handoff) -> bool:
    """Return True when the newer turns' request answers the older turns (not a new task)."""
    if not newer.task or not older.task or newer.task == older.task:
        return False
    waiting = any(item.text.startswith(WAITING_FOR_USER) for item in older.in_progress)
    return waiting or is_short_reply(newer.task.split("\n", 1)[0])


def _as_replies(task: str) -> list[str]:
    """Return a task's request and its follow-ups as the user's replies, each cut as one."""
    request, later = task_parts(task)
    request = collapse(request)
    return [cut(request, FOLLOW_UP_CHARS), *later] if request else later


_FAILED_OUTCOME = re.compile(r"^(?:exit [1-9]\d*\b|Error\b|error\b|\d+ failed\b|FAILED\b)")


def _still_blocked(older: Handoff, newer: list[Action]) -> list[Item]:
    """Return the older Blocked lines, a failure that a newer action resolved marked so.

    A newer action with the failed one's verb and target that did not fail (the same
    command run clean, the same booking made) resolves it: as within one digest, its
    header and its error lines become one `resolved by action N:` line (`resolved_note`:
    the newest resolved failure's last lines, the others' telling one).
    """
    if not newer:
        return older.blocked
    clean: dict[tuple[str, str], int] = {}
    for action in newer:
        if action.verb and not _FAILED_OUTCOME.match(action.outcome):
            clean.setdefault((action.verb, action.target), action.first)
    by_number = {action.first: action for action in older.actions if action.verb}
    groups: list[list[Item]] = []
    for item in older.blocked:
        if FAILURE_HEADER.match(item.text) or not groups:
            groups.append([item])
        else:
            groups[-1].append(item)
    fixes: list[int | None] = []
    for group in groups:
        opened = FAILURE_HEADER.match(group[0].text)
        failed = by_number.get(int(opened.group(1))) if opened else None
        fixes.append(clean.get((failed.verb, failed.target)) if failed is not None else None)
    newest = max((i for i, fixed in enumerate(fixes) if fixed is not None), default=-1)
    kept: list[Item] = []
    for index, (group, fixed) in enumerate(zip(groups, fixes, strict=True)):
        if fixed is None:
            kept.extend(group)
            continue
        header = group[0].text.split(";", 1)[0].rstrip(":")
        errors = [item.text for item in group[1:]]
        kept.append(Item(resolved_note(fixed, header, errors, newest=index == newest), rank=1))
    return kept


def _still_open(in_progress: list[Item], newer: Handoff) -> list[Item]:
    """Return the older work in progress that the newer turns leave open.

    A question the assistant waited on is answered once the user spoke in the newer turns
    (a request of theirs, or a reply).
    """
    spoke = newer.later or (newer.task and newer.task not in (CONTINUED, NO_TASK))
    if not spoke:
        return in_progress
    return [item for item in in_progress if not item.text.startswith(WAITING_FOR_USER)]


def _is_diff(item: Item) -> bool:
    return item.text.startswith("Diff ")


def _merge_state(older: list[Item], newer: list[Item], deleted: set[str]) -> list[Item]:
    """Return the older working state updated with the newer.

    One line per kind (`last test`, `changed PATH`, ...), the newer winning; the diff
    lines are the newest diff's, whole. An older change of a file the newer turns
    deleted (a scratch script removed) is no longer the work's state: it goes.
    """
    if any(_is_diff(item) for item in newer):
        older = [item for item in older if not _is_diff(item)]
    gone = {f"changed {path}" for path in deleted}
    older = [item for item in older if item.key not in gone]
    return _union(_earlier_test(older, newer), newer, keep_last=True)


_TEST_LINE = re.compile(r"^(?:Last|Earlier) test run: (.*?) -> ")


def _earlier_test(older: list[Item], newer: list[Item]) -> list[Item]:
    """Return the older state, its last test run the earlier one when the newer ran another.

    As within one digest: the newer turns' last test run is the last, and the last run of
    another command before it is the earlier one (the newer turns' own, else the older
    last run if its command differs, else the older earlier one if its command does).
    """
    keys = {item.key: item for item in newer}
    last = keys.get("last test")
    ran = _tested(last) if last is not None else None
    if ran is None:
        return older
    newer_earlier = "earlier test" in keys
    older_last = next((item for item in older if item.key == "last test"), None)
    moved = older_last is not None and not newer_earlier and _tested(older_last) != ran
    kept: list[Item] = []
    for item in older:
        if item.key == "earlier test" and (newer_earlier or moved or _tested(item) == ran):
            continue
        if moved and item is older_last:
            item = state_item(item.text.replace("Last test run:", "Earlier test run:", 1))
        kept.append(item)
    return kept


def _tested(item: Item) -> str | None:
    """The command of a `Last test run:` or `Earlier test run:` line (None if not one)."""
    match = _TEST_LINE.match(item.text)
    return match.group(1) if match else None


def _union(first: list[Item], second: list[Item], *, keep_last: bool = False) -> list[Item]:
    """Return the items of both, each identity once, at its first (or last) place."""
    merged: dict[str, Item] = {}
    for item in [*first, *second]:
        previous = merged.get(item.identity)
        if previous is not None:
            item = replace(item, rank=max(item.rank, previous.rank))
            if keep_last:
                del merged[item.identity]
            else:
                merged[item.identity] = item
                continue
        merged[item.identity] = item
    return list(merged.values())


def merge_files(first: list[Item], second: list[Item]) -> list[Item]:
    """Return file items in order of last touch, each path once.

    A path that ends another one at a `/` (`io.py` and `src/io.py`, or a relative path and
    its absolute form) is the same file: the longer spelling is kept, since it contains
    the shorter, at the place of whichever spelling was touched last.
    """
    touched: dict[str, tuple[int, Item]] = {}
    for position, item in enumerate([*first, *second]):
        previous = touched.get(item.text)
        if previous is not None:
            item = _same_file(item, previous[1])
        touched[item.text] = (position, item)
    owners: dict[str, str] = {}
    for path in sorted(touched, key=len, reverse=True):
        parts = path.split("/")
        for index in range(1, len(parts)):
            suffix = "/".join(parts[index:])
            if suffix:
                owners.setdefault(suffix, path)
    merged: dict[str, tuple[int, Item]] = {}
    for path, (position, item) in touched.items():
        owner = owners.get(path.removeprefix("./"), path)
        if owner in merged:
            other_position, other = merged[owner]
            position = max(position, other_position)
            item = _same_file(replace(item, text=owner), other)
        merged[owner] = (position, replace(item, text=owner))
    return [item for _, item in sorted(merged.values(), key=lambda pair: pair[0])]


def _same_file(item: Item, other: Item) -> Item:
    return replace(item, rank=max(item.rank, other.rank), note=item.note or other.note)
