"""Cheap passes that shrink a history before any model call: microcompact and pruning.

Each pass is pure: it takes a sequence of messages, never changes it, and returns a
`PassResult` whose `messages` has the same length, message `i` standing for input
message `i` (so a caller keeps provenance by index). An untouched message is the same
object as in the input. No pass adds or removes a tool call or a tool result, so
pairs stay as valid as they were.

- `microcompact` (seed 003's pre-pass) blanks the results of read-style tools older
  than the newest `keep_recent` with `[Old tool result content cleared]`.
- `prune_tool_results` (seed 001's `_prune_old_tool_results`) replaces old tool outputs
  with one-line stubs that say what ran and how it ended, keeps only the newest copy of
  identical outputs, shrinks long tool-call arguments keeping their JSON valid, and
  replaces images older than the newest few with `[image removed]`.
- `truncate_head_tail_tokens`, `squeeze_output` and `shorten_output` (shortening one
  output within a token budget) live in `_shorten` and are re-exported here.

>>> from sessionstore.models import AssistantMessage, ToolCall, ToolResultMessage
>>> call = ToolCall(id="c1", name="read_file", arguments={"path": "a.py"})
>>> history = [AssistantMessage(content=[call]), ToolResultMessage(tool_call_id="c1", content="x")]
>>> result = microcompact(history, keep_recent=1)
>>> result.cleared, result.messages[1] is history[1]
(0, True)
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from sessionstore._tokens import TokenCounter, message_tokens
from sessionstore._tool_calls import (
    READ_TOOLS,
    SHELL_TOOLS,
    call_arguments,
    file_read,
    is_read_command,
    normalize_tool_name,
    shell_command,
    shell_exit_code,
)
from sessionstore.models import (
    AssistantMessage,
    ImageContent,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._legacy import count_lines
from sessionstore.strategies._shorten import (
    _check_count,
    _only_text,
    _text_counter,
    _with_text,
    shorten_output,
    squeeze_output,
    truncate_head_tail_tokens,
)
from sessionstore.strategies._units import answered_calls, unit_of

__all__ = [
    "CLEARED_TOOL_RESULT",
    "DEFAULT_KEEP_RECENT",
    "DUPLICATE_TOOL_RESULT",
    "IMAGE_REMOVED",
    "READ_TOOLS",
    "PassResult",
    "is_pass_stub",
    "microcompact",
    "prune_tool_results",
    "shorten_output",
    "squeeze_output",
    "tool_result_stub",
    "truncate_head_tail_tokens",
]

CLEARED_TOOL_RESULT = "[Old tool result content cleared]"
"""What `microcompact` leaves of a stale read-style tool result (seed 003's sentinel)."""

DUPLICATE_TOOL_RESULT = "[Duplicate of a later tool result]"
"""What `prune_tool_results` leaves of an older copy of an identical tool output."""

IMAGE_REMOVED = "[image removed]"
"""The text block that stands in for an image dropped by `prune_tool_results`."""

DEFAULT_KEEP_RECENT = 6
"""How many read-style results `microcompact` keeps verbatim (seed 003)."""

_TRUNCATED_ARGUMENT = "...[truncated {count} chars]"
_STUB = re.compile(r"^\[[\w.\-:/ ]+\] [^\n]*$")
_CLOSING_TAG = re.compile(r"^</?[\w-]+>$")


@dataclass(frozen=True, slots=True)
class PassResult:
    """What a pass returns: the new messages, which changed, and by how much."""

    messages: list[Message]
    """The messages after the pass; as many as went in, in the same order."""
    changed: tuple[int, ...] = ()
    """The indices of the messages the pass replaced, ascending."""
    cleared: int = 0
    """Tool results blanked by `microcompact`."""
    stubbed: int = 0
    """Tool results replaced by a one-line stub."""
    deduped: int = 0
    """Older copies of identical tool outputs replaced by `DUPLICATE_TOOL_RESULT`."""
    arguments_shrunk: int = 0
    """Tool calls whose long arguments were shortened."""
    images_dropped: int = 0
    """Images replaced by `IMAGE_REMOVED`."""
    tokens_saved: int = 0
    """Tokens before minus tokens after, over the changed messages."""


def _counter_fn(counter: TokenCounter | None) -> Callable[[Message], int]:
    return message_tokens if counter is None else counter.count_message


def _finish(
    source: Sequence[Message],
    replaced: dict[int, Message],
    counter: TokenCounter | None,
    **counts: int,
) -> PassResult:
    count = _counter_fn(counter)
    saved = sum(count(source[i]) - count(message) for i, message in replaced.items())
    messages = list(source)
    for index, message in replaced.items():
        messages[index] = message
    return PassResult(messages, tuple(sorted(replaced)), tokens_saved=saved, **counts)


# ── microcompact ───────────────────────────────────────────────────────────────


def _is_compactable(call: ToolCall, tools: Collection[str]) -> bool:
    name = normalize_tool_name(call.name)
    if name in tools:
        return True
    if name in SHELL_TOOLS:
        command = shell_command(call)
        return command is not None and is_read_command(command)
    return False


def microcompact(
    messages: Sequence[Message],
    *,
    keep_recent: int = DEFAULT_KEEP_RECENT,
    tools: Collection[str] = READ_TOOLS,
    counter: TokenCounter | None = None,
) -> PassResult:
    """Blank the results of read-style tools older than the newest `keep_recent`.

    Seed 003's `clear_stale_tool_results`: walking newest to oldest, the newest
    `keep_recent` results (floored at 1) of compactable calls keep their content; every
    older one gets the single text block `CLEARED_TOOL_RESULT`. A result is compactable
    when the call it answers is named in `tools` (compared after `normalize_tool_name`),
    or is a shell call whose command only reads (`cat`, `sed -n`, `head`, `grep`, `ls`,
    `find`, ...). Results that answer no call, other tools' results and results already
    cleared are left as they are; a cleared result does not take a `keep_recent` place.
    A result no larger than the marker (an empty one) is not replaced by it.

    Args:
        messages: The history; not changed.
        keep_recent: How many compactable results keep their content (at least 1).
        tools: Names of the read-style tools (`READ_TOOLS` by default).
        counter: Counts the tokens saved (the seed heuristic by default).

    Raises:
        ValueError: `keep_recent` is negative.
    """
    _check_count("keep_recent", keep_recent)
    keep = max(keep_recent, 1)
    tools = frozenset(normalize_tool_name(name) for name in tools)
    answered = answered_calls(messages)
    count = _counter_fn(counter)
    replaced: dict[int, Message] = {}
    kept = 0
    for index in sorted(answered, reverse=True):
        result = messages[index]
        assert isinstance(result, ToolResultMessage)  # answered_calls maps results only
        if not _is_compactable(answered[index], tools) or result.text == CLEARED_TOOL_RESULT:
            continue
        if kept < keep:
            kept += 1
            continue
        cleared = _with_text(result, CLEARED_TOOL_RESULT)
        if count(cleared) < count(result):
            replaced[index] = cleared
    return _finish(messages, replaced, counter, cleared=len(replaced))


# ── stubs ──────────────────────────────────────────────────────────────────────


def _one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        stripped = line.strip()
        if stripped and not _CLOSING_TAG.match(stripped):
            return stripped
    return ""


def _size(text: str) -> str:
    lines = count_lines(text)
    if lines > 1:
        return f"{lines} lines output"
    return f"{len(text):,} chars output"


def _first_arguments(arguments: dict[str, Any], count: int = 2) -> str:
    parts = []
    for key, value in list(arguments.items())[:count]:
        shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(f"{key}={_one_line(shown, 40)}")
    return " ".join(parts)


def _json_highlights(text: str, count: int = 4) -> str:
    """Return the first short scalar fields of a JSON object output (`id=ABC123, ...`)."""
    stripped = text.strip()
    if not stripped.startswith("{"):
        return ""
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return ""
    if not isinstance(parsed, dict):
        return ""
    fields = [
        f"{key}={_one_line(str(value), 40)}"
        for key, value in parsed.items()
        if isinstance(value, str | int | float) and not isinstance(value, bool) and value != ""
    ]
    return _one_line(", ".join(fields[:count]), 160)


def tool_result_stub(call: ToolCall | None, result: ToolResultMessage) -> str:
    r"""Return a one-line summary of a tool result, in the style of seed 001's stubs.

    - a shell call: ``[bash] ran `pytest -x` -> exit 1, 47 lines output``;
    - a file view: ``[read_file] read src/app.py (120 lines)``;
    - any other call: ``[name] key=value key=value -> 12 lines output``, followed by
      the first short fields of an output that is a JSON object
      (``-> 667 chars output: reservation_id=HATHAT, user_id=mia_li_3668``).

    A failed call (an error result or a non-zero exit code) also gets its last output
    line, which is usually the error: ``...; last line: AssertionError: 2 != 3``.

    >>> from sessionstore.models import ToolCall, ToolResultMessage
    >>> call = ToolCall(id="c", name="bash", arguments={"command": "pytest -x"})
    >>> out = "<returncode>1</returncode>\ncollected 3 items\nE   assert 1 == 2\n"
    >>> tool_result_stub(call, ToolResultMessage(tool_call_id="c", content=out))
    '[bash] ran `pytest -x` -> exit 1, 3 lines output; last line: E assert 1 == 2'
    """
    text = result.text
    name = (result.tool_name or (call.name if call else "") or "tool").strip()
    command = shell_command(call) if call is not None else None
    exit_code = shell_exit_code(text) if command is not None else None
    failed = result.is_error or (exit_code is not None and exit_code != 0)
    read = file_read(call) if call is not None and command is None else None
    if command is not None:
        outcome = f"exit {exit_code}, " if exit_code is not None else ""
        if result.is_error and exit_code is None:
            outcome = "error, "
        stub = f"[{name}] ran `{_one_line(command, 80)}` -> {outcome}{_size(text)}"
    elif read is not None:
        arguments = call_arguments(call) if call is not None else {}
        offset = arguments.get("offset") or arguments.get("start_line")
        start = f" from line {offset}" if isinstance(offset, int) and offset > 1 else ""
        lines = count_lines(text)
        stub = f"[{name}] read {_one_line(read.path, 100)}{start} ({lines} lines)"
        if result.is_error:
            stub = f"[{name}] read {_one_line(read.path, 100)}{start} -> error"
    else:
        shown = _first_arguments(call_arguments(call)) if call is not None else ""
        outcome = "error, " if result.is_error else ""
        stub = f"[{name}] {shown + ' ' if shown else ''}-> {outcome}{_size(text)}"
        highlights = _json_highlights(text)
        if highlights:
            stub += f": {highlights}"
    if failed:
        last = _last_line(text)
        if last:
            stub += f"; last line: {_one_line(last, 100)}"
    return stub


def is_pass_stub(text: str) -> bool:
    """Return True for a text a pass wrote in place of a tool output (a marker or a stub)."""
    return text in (CLEARED_TOOL_RESULT, DUPLICATE_TOOL_RESULT) or bool(_STUB.match(text))


# ── argument shrinking ─────────────────────────────────────────────────────────


def _shrink_value(value: Any, limit: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) > limit:
            return value[:limit] + _TRUNCATED_ARGUMENT.format(count=len(value) - limit), True
        return value, False
    if isinstance(value, list):
        items = [_shrink_value(item, limit) for item in value]
        return [item for item, _ in items], any(changed for _, changed in items)
    if isinstance(value, dict):
        pairs = {key: _shrink_value(item, limit) for key, item in value.items()}
        return {k: v for k, (v, _) in pairs.items()}, any(c for _, c in pairs.values())
    return value, False


def _shrink_arguments(call: ToolCall, max_chars: int, max_string_chars: int) -> ToolCall | None:
    """Return the call with long string values shortened, or None when nothing changes.

    The arguments are parsed and dumped again, so they stay valid JSON with every key;
    arguments that are not valid JSON are left as the model wrote them.
    """
    if len(call.arguments) <= max_chars:
        return None
    try:
        parsed = json.loads(call.arguments)
    except ValueError:
        return None
    shrunk, changed = _shrink_value(parsed, max_string_chars)
    if not changed:
        return None
    arguments = json.dumps(shrunk, ensure_ascii=False)
    if len(arguments) >= len(call.arguments):
        return None
    return call.model_copy(update={"arguments": arguments})


# ── pruning ────────────────────────────────────────────────────────────────────


def _protected_start(
    messages: Sequence[Message],
    protect_last_n: int,
    protect_tail_tokens: int | None,
    counter: TokenCounter | None,
) -> int:
    """Return where the protected tail starts, aligned to the start of a unit.

    As seed 001: with a token budget, walk back from the end while the newest messages
    fit it, always protecting at least `protect_last_n`; without one, protect the last
    `protect_last_n` messages.
    """
    length = len(messages)
    start = max(length - protect_last_n, 0)
    if protect_tail_tokens is not None:
        count = _counter_fn(counter)
        used = 0
        index = length
        while index > 0:
            tokens = count(messages[index - 1])
            if used + tokens > protect_tail_tokens:
                break
            used += tokens
            index -= 1
        start = min(start, index)
    return unit_of(messages, start) if start < length else length


def prune_tool_results(
    messages: Sequence[Message],
    *,
    protect_last_n: int = 6,
    protect_tail_tokens: int | None = None,
    min_result_chars: int = 200,
    max_argument_chars: int = 500,
    max_string_chars: int = 200,
    keep_images: int = 3,
    dedup: bool = True,
    counter: TokenCounter | None = None,
) -> PassResult:
    """Shrink old tool output to one-line stubs, keeping every message in its place.

    Seed 001's `_prune_old_tool_results` (with its `_strip_historical_media`), in four
    steps:

    1. **Images** (whole history): images older than the newest `keep_images` become
       the text block `IMAGE_REMOVED`.
    2. **Dedup** (whole history): of tool outputs with the same text, at least
       `min_result_chars` long, only the newest keeps it; older copies become
       `DUPLICATE_TOOL_RESULT`.
    3. **Stubs** (before the protected tail): a tool result longer than
       `min_result_chars` becomes `tool_result_stub` (what ran, how it ended, how much
       it printed), when the stub is smaller.
    4. **Arguments** (before the protected tail): a tool call whose arguments are longer
       than `max_argument_chars` gets every string value longer than
       `max_string_chars` cut with a `...[truncated N chars]` marker. The arguments are
       re-encoded, so they stay valid JSON with every key (seed 001's first version cut
       the JSON text and left it invalid, which broke every later request).

    The protected tail is the last `protect_last_n` messages, or the newest messages
    within `protect_tail_tokens` when that is given (at least `protect_last_n`),
    widened to the start of the unit it begins in. Results with images are not stubbed
    or deduplicated while they still hold an image. Running the pass again changes
    nothing more.

    Raises:
        ValueError: a count or limit is negative.
    """
    for name, value in (
        ("protect_last_n", protect_last_n),
        ("min_result_chars", min_result_chars),
        ("max_argument_chars", max_argument_chars),
        ("max_string_chars", max_string_chars),
        ("keep_images", keep_images),
    ):
        _check_count(name, value)
    if protect_tail_tokens is not None:
        _check_count("protect_tail_tokens", protect_tail_tokens)
    answered = answered_calls(messages)
    protected = _protected_start(messages, protect_last_n, protect_tail_tokens, counter)
    text_of = _text_counter(counter)
    replaced: dict[int, Message] = {}
    deduped = stubbed = shrunk = dropped = 0

    # Images first: a result whose images are gone is text only, and so can be stubbed
    # now rather than on a second run.
    remaining = keep_images
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, UserMessage | AssistantMessage | ToolResultMessage):
            continue
        blocks: list[Any] = list(message.content)
        for position in range(len(blocks) - 1, -1, -1):
            if isinstance(blocks[position], ImageContent):
                if remaining > 0:
                    remaining -= 1
                else:
                    blocks[position] = TextContent(text=IMAGE_REMOVED)
                    dropped += 1
        if blocks != message.content:
            replaced[index] = message.model_copy(update={"content": blocks})

    if dedup:
        seen: set[bytes] = set()
        for index in range(len(messages) - 1, -1, -1):
            current = replaced.get(index, messages[index])
            if not isinstance(current, ToolResultMessage):
                continue
            text = _only_text(current)
            if text is None or len(text) < min_result_chars or is_pass_stub(text):
                continue
            digest = hashlib.sha256(text.encode()).digest()
            if digest in seen:
                replaced[index] = _with_text(current, DUPLICATE_TOOL_RESULT)
                deduped += 1
            else:
                seen.add(digest)

    for index in range(protected):
        current = replaced.get(index, messages[index])
        if isinstance(current, ToolResultMessage):
            text = _only_text(current)
            if text is None or len(text) <= min_result_chars or is_pass_stub(text):
                continue
            stub = tool_result_stub(answered.get(index), current)
            if text_of(stub) < text_of(text):
                replaced[index] = _with_text(current, stub)
                stubbed += 1
        elif isinstance(current, AssistantMessage) and current.tool_calls:
            content = list(current.content)
            for position, block in enumerate(content):
                if isinstance(block, ToolCall):
                    smaller = _shrink_arguments(block, max_argument_chars, max_string_chars)
                    if smaller is not None:
                        content[position] = smaller
                        shrunk += 1
            if content != current.content:
                replaced[index] = current.model_copy(update={"content": content})

    return _finish(
        messages,
        replaced,
        counter,
        stubbed=stubbed,
        deduped=deduped,
        arguments_shrunk=shrunk,
        images_dropped=dropped,
    )
