"""The structured handoff document: its sections, rendering and parsing (pure).

A handoff is what one assistant leaves the next after a compaction, under the section
headings of the seed's structured summary template (`HANDOFF_SECTIONS`, in order). The
extractive summarizer fills it from messages; `parse_handoff` reads one back (its own, a
model's written to the same template, or the seed's `# Objective` ... `# Carryover`
variant); `_handoff_merge.merge_handoffs` folds a newer one into an older one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "BRANCH_HEADER",
    "CONTINUED",
    "FAILURE_HEADER",
    "HANDOFF_SECTIONS",
    "Action",
    "Handoff",
    "Item",
    "parse_handoff",
    "render_handoff",
    "state_item",
]

HANDOFF_SECTIONS = (
    "Active Task",
    "Goal",
    "Constraints & Preferences",
    "Completed Actions",
    "Active State",
    "In Progress",
    "Blocked",
    "Key Decisions",
    "Resolved Questions",
    "Pending User Asks",
    "Relevant Files",
    "Remaining Work",
    "Critical Context",
)
"""The section headings of a handoff, in order (each rendered as `## <heading>`)."""

BRANCH_HEADER = "[branch digest: summary of an abandoned branch, kept for reference only]"
"""The first line of a digest made with `scope="branch"`."""

NO_TASK = "None."
CONTINUED = "Continue the task stated before these turns."
"""The task line of a digest of turns that hold no request of their own (a later part
of a run, or one a harness's format complaint opened): the task is in an earlier digest
or in the raw turns before, so it is not repeated here."""
FOLLOW_UP = 'Later the user said: "'
WAITING_FOR_USER = "Waiting for the user's answer: "
"""An In Progress line: a question the assistant asked that the user has not answered."""
MAX_FOLLOW_UPS = 3
FOLLOW_UP_CHARS = 400
"""A later reply of the user's is kept this long (its gist: a reply is short, a request
made as a reply is cut)."""

# Section headings of the window_budget seed's template, read as their closest match.
_ALIASES = {
    "objective": "Goal",
    "guardrails": "Constraints & Preferences",
    "status": "Active State",
    "rationale": "Key Decisions",
    "plan": "Remaining Work",
    "carryover": "Critical Context",
    "in progress": "In Progress",
    "active task": "Active Task",
}
_HEADING = re.compile(r"^#{1,3} +(.+?) *$")
_ACTION_LINE = re.compile(r"^(\d+)(?:-(\d+))?\. +(.*)$")
_ACTION_PARTS = re.compile(r"^([A-Z][A-Z_]+) +(.*?)(?: \[tool: ([^\]]*)\])?$")
_TALLY = re.compile(r"\b([A-Z][A-Z_]+) x(\d+)\b")
_FILE_NOTE = re.compile(r"^(.*\S) \((edited|written|created|deleted)\)$")
_NAME = re.compile(r"^[A-Za-z_][\w.-]{0,40}$")
_VALUE_WORD = re.compile(r"^[\w.@#:+/-]+$")
"""A value shown in a `name: a, b` group (a code snippet such as `x='y'` is not one)."""
_GROUP = re.compile(r"^([A-Za-z_][\w.-]{0,40}): (.+)$")
_BULLET = re.compile(r"^(?:[-*•] |\d+[.)] )")


@dataclass(frozen=True, slots=True)
class Item:
    """One line of a list section."""

    text: str
    rank: int = 1
    """How long it survives trimming, relative to its section's other items (higher: longer)."""
    key: str = ""
    """What makes two items the same (the value of `name=value`); `text` when empty."""
    note: str = ""
    """A short note rendered in parentheses after the text (`edited` for a file)."""

    @property
    def identity(self) -> str:
        """The key two items are deduplicated on."""
        return self.key or self.text

    def render(self) -> str:
        """Return the item as its bullet line's body."""
        return f"{self.text} ({self.note})" if self.note else self.text


@dataclass(frozen=True, slots=True)
class Action:
    """One completed action, or a run of them folded into one line."""

    first: int
    last: int
    verb: str
    target: str
    outcome: str = ""
    tool: str = ""
    brief: str = ""
    """A short form of the target (paths, or the start of a command) for collapsed runs."""
    line: str = ""
    """A line carried verbatim from an earlier digest; rendered as is when set."""

    @property
    def count(self) -> int:
        """How many actions the line stands for."""
        return max(1, self.last - self.first + 1)

    def render(self) -> str:
        """Return the line `N. ACTION target - outcome [tool: name]`."""
        if self.line:
            return self.line
        number = f"{self.first}" if self.last <= self.first else f"{self.first}-{self.last}"
        text = f"{number}. {self.verb} {self.target}".rstrip()
        if self.outcome:
            text += f" - {self.outcome}"
        if self.tool:
            text += f" [tool: {self.tool}]"
        return text


@dataclass(slots=True)
class Handoff:
    """The facts of a handoff, section by section; rendering and trimming are separate."""

    task: str = ""
    """The latest request, verbatim (with the user's later short replies)."""
    goal: str = ""
    """The gist of the first request."""
    constraints: list[Item] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    state: list[Item] = field(default_factory=list)
    in_progress: list[Item] = field(default_factory=list)
    blocked: list[Item] = field(default_factory=list)
    decisions: list[Item] = field(default_factory=list)
    resolved: list[Item] = field(default_factory=list)
    pending: list[Item] = field(default_factory=list)
    files: list[Item] = field(default_factory=list)
    remaining: list[Item] = field(default_factory=list)
    critical: list[Item] = field(default_factory=list)
    later: list[str] = field(default_factory=list)
    """The user's replies after the latest request, when the request is an earlier digest's."""
    has_reply: bool = False
    """True when the assistant wrote text (so earlier pending questions were addressed)."""
    continued: bool = False
    """True when the turns hold no request of their own (a digest whose task is `CONTINUED`)."""

    @property
    def next_number(self) -> int:
        """The number the next completed action gets."""
        return max((a.last for a in self.actions), default=0) + 1

    def lists(self) -> dict[str, list[Item]]:
        """Return the list sections by heading, in order."""
        return {
            "Constraints & Preferences": self.constraints,
            "Active State": self.state,
            "In Progress": self.in_progress,
            "Blocked": self.blocked,
            "Key Decisions": self.decisions,
            "Resolved Questions": self.resolved,
            "Pending User Asks": self.pending,
            "Relevant Files": self.files,
            "Remaining Work": self.remaining,
            "Critical Context": self.critical,
        }


def render_handoff(handoff: Handoff, *, branch: bool = False) -> str:
    """Return the handoff as text: `## ` headings in order, empty sections left out.

    The active task is always present (`None.` when there is none, `CONTINUED` when the
    turns continue a task stated before them); lines of it that would read as a heading
    are escaped with a backslash so the digest parses back.
    """
    parts: list[str] = [BRANCH_HEADER] if branch else []
    task = handoff.task
    if not task and handoff.continued:
        # Turns that continue a task stated before them say so, and parse back as such.
        task = with_follow_ups(CONTINUED, handoff.later)
    parts.append(f"## Active Task\n{_escape(task) or NO_TASK}")
    if handoff.goal:
        parts.append(f"## Goal\n{handoff.goal}")
    lists = handoff.lists()
    for heading in HANDOFF_SECTIONS[2:]:
        if heading == "Completed Actions":
            lines = [action.render() for action in handoff.actions]
        elif heading == "Critical Context":
            lines = _value_lines(lists[heading])
        else:
            lines = [f"- {item.render()}" for item in lists[heading]]
        if lines:
            parts.append(f"## {heading}\n" + "\n".join(lines))
    return "\n\n".join(parts)


def _value_lines(items: list[Item]) -> list[str]:
    """Return critical values as bullet lines, `name=value` items grouped (`- name: a, b`)."""
    lines: list[str | list[str]] = []
    groups: dict[str, list[str]] = {}
    for item in items:
        name = item.text[: -len(item.key) - 1] if item.key else ""
        if (
            name
            and item.text == f"{name}={item.key}"
            and _NAME.match(name)
            and _VALUE_WORD.match(item.key)
        ):
            if name not in groups:
                groups[name] = []
                lines.append(groups[name])
            groups[name].append(item.key)
        else:
            lines.append(f"- {item.render()}")
    names = {id(values): name for name, values in groups.items()}
    return [
        line if isinstance(line, str) else f"- {names[id(line)]}: {', '.join(line)}"
        for line in lines
    ]


def _escape(task: str) -> str:
    """Return the task with a backslash before lines that would read as a section heading."""
    lines = task.split("\n")
    return "\n".join(f"\\{line}" if _section_name(line) else line for line in lines)


def _unescape(body: str) -> str:
    lines = body.split("\n")
    return "\n".join(
        line[1:] if line.startswith("\\") and _section_name(line[1:]) else line for line in lines
    )


def _section_name(line: str, *, aliases: bool = False) -> str | None:
    """Return the section a heading line opens, if it is a template heading.

    With `aliases`, a window_budget seed heading (`# Objective`, ...) counts too, read as
    its closest match.
    """
    match = _HEADING.match(line)
    if match is None:
        return None
    lowered = match.group(1).strip().rstrip(":").strip().lower()
    for name in HANDOFF_SECTIONS:
        if lowered == name.lower():
            return name
    if aliases:
        for alias, name in _ALIASES.items():
            if lowered.startswith(alias):
                return name
    return None


def looks_like_handoff(text: str) -> bool:
    """Return True when `text` is a digest rather than a message that has headings.

    A digest has an `Active Task` heading and another of the template's, or the
    window_budget seed's `Objective` and `Carryover`; a request that merely uses
    `## Plan` or `## Status` is not one.
    """
    titles = {
        match.group(1).strip().rstrip(":").lower()
        for line in text.split("\n")[:2_000]
        if (match := _HEADING.match(line))
    }
    known = {name.lower() for name in HANDOFF_SECTIONS}
    if "active task" in titles and len(titles & known) >= 2:
        return True
    return any(t.startswith("objective") for t in titles) and any(
        t.startswith("carryover") for t in titles
    )


def parse_handoff(text: str) -> Handoff:
    """Read a digest back into a `Handoff`.

    Known headings (this template's, or the window_budget seed's) map to sections; bullet
    and numbered lines become items; text before the first heading, other than a digest's
    own header line, is kept in Critical Context so that nothing of an unknown format is
    lost.
    """
    bodies: dict[str, list[str]] = {}
    current: str | None = None
    preamble: list[str] = []
    lines = text.split("\n")
    # A digest written to this template is read by its headings alone, so that a task
    # quoting `## Status` stays whole; the seed's headings are read only without them.
    aliases = not any(_section_name(line) for line in lines)
    for line in lines:
        name = _section_name(line, aliases=aliases)
        if name is not None:
            current = name
            bodies.setdefault(name, [])
            continue
        if current is None:
            preamble.append(line)
        else:
            bodies[current].append(line)
    handoff = Handoff()
    task = _unescape("\n".join(bodies.get("Active Task", [])).strip())
    if task.startswith(CONTINUED):
        handoff.later = task_parts(task)[1]
        handoff.continued = True
        task = ""
    handoff.task = "" if task == NO_TASK else task
    handoff.goal = " ".join(line.strip() for line in bodies.get("Goal", []) if line.strip())
    handoff.actions = [_parse_action(line) for line in _entries(bodies.get("Completed Actions"))]
    lists = handoff.lists()
    for heading, lines in bodies.items():
        if heading == "Critical Context":
            lists[heading].extend(
                item for entry in _entries(lines) for item in _parse_values(entry)
            )
        elif heading == "Blocked":
            lists[heading].extend(_blocked_items(_entries(lines)))
        elif heading in lists:
            lists[heading].extend(_parse_item(heading, entry) for entry in _entries(lines))
    kept = [line.strip() for line in preamble if line.strip() and not line.startswith("[")]
    handoff.critical[:0] = [Item(line, rank=2) for line in kept if line != NO_TASK]
    return handoff


def _entries(lines: list[str] | None) -> list[str]:
    """Return the items of a section body: a bullet or numbered line with its continuation."""
    entries: list[str] = []
    for raw in lines or []:
        line = raw.strip()
        if not line or line == NO_TASK:
            continue
        if _BULLET.match(line) or not entries or not raw[:1].isspace():
            entries.append(line)
        else:
            entries[-1] += " " + line
    return entries


_STATE_KEYS = (
    (re.compile(r"^Last test run:"), "last test", 4),
    (re.compile(r"^Earlier test run:"), "earlier test", 1),
    (re.compile(r"^Changed (\S+)"), "changed", 3),
    (re.compile(r"^Diff "), "", 2),
    (re.compile(r"^Last assistant note:"), "note", 1),
    (re.compile(r"^Earlier assistant note:"), "earlier note", 0),
    (re.compile(r"^Working directory:"), "cwd", 1),
)


def state_item(text: str) -> Item:
    """Return an Active State line as an item, with the key and rank its kind has.

    `Last test run:` (rank 4, one), `Earlier test run:` (the last run of another test
    command before it: rank 1, one), `Changed PATH ...` (one per file: rank 3 with a line
    or symbol, 2 for a whole file written), `Diff ...`
    lines of the latest diff (rank 2), the last assistant note and working directory
    (rank 1, one each), the note before it (rank 0, one); other lines rank 2.
    """
    for pattern, key, rank in _STATE_KEYS:
        match = pattern.match(text)
        if match:
            if key == "changed":
                key = f"changed {match.group(1)}"
                # A whole file written (a scratch script) ranks below a located change.
                rank = 3 if " at line " in text or " in " in text.split(":", 1)[0] else 2
            return Item(text, rank=rank, key=key)
    return Item(text, rank=2)


def _parse_item(heading: str, entry: str) -> Item:
    text = entry[2:].strip() if entry[:2] in ("- ", "* ", "• ") else entry
    if heading == "Active State":
        return state_item(text)
    if heading == "Relevant Files":
        match = _FILE_NOTE.match(text)
        if match:
            return Item(match.group(1), rank=3, note=match.group(2))
    if heading == "Critical Context":
        # Values that survived an earlier trimming rank with the task's own identifiers.
        value = text.split("=", 1)[1] if "=" in text and " " not in text else ""
        return Item(text, rank=3, key=value if _VALUE_WORD.match(value) else "")
    return Item(text, rank=2)


FAILURE_HEADER = re.compile(r"^action (\d+) (?:failed|printed errors)")
"""A Blocked line that opens a failure: `action 6 failed (exit 1); ...:` (its number)."""


def _blocked_items(entries: list[str]) -> list[Item]:
    """Return Blocked lines as items: the latest failure's rank 3, the one before 2, older 0."""
    texts = [e[2:].strip() if e[:2] in ("- ", "* ", "• ") else e for e in entries]
    headers = [i for i, text in enumerate(texts) if FAILURE_HEADER.match(text)]
    last = headers[-1] if headers else 0
    items = []
    for index, text in enumerate(texts):
        rank = (
            0
            if text.startswith("earlier:")
            else 1
            if text.startswith("resolved")
            else 3
            if index >= last
            else 2
        )
        items.append(Item(text, rank=rank))
    return items


def _parse_values(entry: str) -> list[Item]:
    """Return the items of a Critical Context line: one, or a group `- name: a, b`."""
    text = entry[2:].strip() if entry[:2] in ("- ", "* ", "• ") else entry
    match = _GROUP.match(text)
    if match:
        values = match.group(2).split(", ")
        if all(value and " " not in value for value in values):
            name = match.group(1)
            # Values of tool calls and results; the task's own values are plain lines.
            return [Item(f"{name}={value}", rank=2, key=value) for value in values]
    return [_parse_item("Critical Context", entry)]


def _parse_action(entry: str) -> Action:
    match = _ACTION_LINE.match(entry)
    if match is None:
        return Action(0, 0, "", "", line=entry)
    first = int(match.group(1))
    last = int(match.group(2) or first)
    rest = match.group(3)
    parts = _ACTION_PARTS.match(rest)
    if parts is None:
        return Action(first, max(first, last), "", rest, brief=rest[:40], line=entry)
    verb, target, tool = parts.group(1), parts.group(2), parts.group(3) or ""
    outcome = ""
    if " - " in target:
        target, outcome = target.rsplit(" - ", 1)
    brief = target if len(target) <= 40 else target[:40].rsplit(" ", 1)[0] + " …"
    return Action(first, max(first, last), verb, target, outcome, tool, brief=brief, line=entry)


def tallies(actions: Iterable[Action]) -> dict[str, int]:
    """Return how many actions of each verb the lines stand for (fold lines included)."""
    counts: dict[str, int] = {}
    for action in actions:
        found = _TALLY.findall(action.line) if action.line and not action.verb else []
        if found:
            for verb, count in found:
                counts[verb] = counts.get(verb, 0) + int(count)
        else:
            verb = action.verb or "OTHER"
            counts[verb] = counts.get(verb, 0) + action.count
    return counts


def task_parts(task: str) -> tuple[str, list[str]]:
    """Return a task's request (its lines but the follow-ups) and the user's later replies.

    A task of the lines `Book HAT136.` and `Later the user said: "Yes, go ahead."` is
    `("Book HAT136.", ["Yes, go ahead."])`.
    """
    lines = task.split("\n")
    request = "\n".join(line for line in lines if not line.startswith(FOLLOW_UP))
    replies = [
        line[len(FOLLOW_UP) :].removesuffix('"') for line in lines if line.startswith(FOLLOW_UP)
    ]
    return request, replies


def with_follow_ups(task: str, replies: list[str]) -> str:
    """Return the task with the user's later replies after it, the last three kept."""
    if not task or not replies:
        return task
    request, earlier = task_parts(task)
    kept = [*earlier, *replies][-MAX_FOLLOW_UPS:]
    head = [request] if request else []
    return "\n".join([*head, *(f'{FOLLOW_UP}{reply}"' for reply in kept)])
