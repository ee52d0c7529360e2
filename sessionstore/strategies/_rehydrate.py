"""Rehydrate: after a compaction, give back the freshest file reads that were folded away.

Seed 003's post-pass (`rehydrate_recent_reads`), pure: given the messages a compaction
folds and the messages it keeps, find the newest reads of files whose content the
folded part held (a read tool's result, or a shell `cat` / `sed -n` / `head` / `nl` of
one file), skip any file whose content the kept messages still show, and build one
`[Restored file after compaction]` user message per file. `apply_rehydrate` is the
strict-shrink guard: it keeps only as many restored files as leave the compacted
context smaller than the original.

Pass the folded messages as they were before any pass blanked them (the passes keep
indices, so the raw messages at the same positions will do): a cleared or stubbed
result has nothing left to restore and is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessionstore._framing import RESTORED_FILE_PREFIX
from sessionstore._tokens import TokenCounter, estimate_tokens, message_tokens
from sessionstore._tool_calls import (
    file_read,
    shell_command,
    shell_exit_code,
    shell_file_read,
    written_paths,
)
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    Message,
    TextContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.strategies._passes import is_pass_stub, truncate_head_tail_tokens
from sessionstore.strategies._units import answered_calls

__all__ = [
    "DEFAULT_MAX_FILES",
    "DEFAULT_REHYDRATE_TOKENS",
    "RESTORED_FILE_PREFIX",
    "RestoredFile",
    "apply_rehydrate",
    "rehydrate_recent_reads",
    "restored_path",
]


DEFAULT_MAX_FILES = 5
"""At most this many files are restored (seed 003)."""

DEFAULT_REHYDRATE_TOKENS = 8000
"""The restored messages use at most this many tokens together (seed 003)."""

_EDITED_NOTE = "Note: the file was changed after this read; its content may differ now."
_PARTIAL_NOTE = "Note: this read showed only part of the file."


@dataclass(frozen=True, slots=True)
class RestoredFile:
    """One restored file read: the message to insert and where its content came from."""

    message: UserMessage
    """`[Restored file after compaction] <path>`, notes, then the content."""
    source: int
    """The index, in the folded messages, of the tool result (or shell run) restored."""
    path: str
    """The file's path, as the read named it."""
    tokens: int
    """The message's token count."""
    truncated: bool = False
    """True when the content was cut to its first and last lines to fit the budget."""
    edited_after: bool = False
    """True when a later call (folded or kept) changed the file after this read."""


@dataclass(frozen=True, slots=True)
class _Read:
    index: int
    path: str
    body: str
    partial: bool


def restored_path(message: Message) -> str | None:
    """Return the path a restored-file message names, or None for any other message."""
    if not isinstance(message, UserMessage):
        return None
    first_line = message.text.split("\n", 1)[0]
    if not first_line.startswith(RESTORED_FILE_PREFIX + " "):
        return None
    return first_line[len(RESTORED_FILE_PREFIX) + 1 :] or None


def _reads(messages: Sequence[Message]) -> list[_Read]:
    """Every successful one-file read in `messages`, oldest first."""
    reads: list[_Read] = []
    for index, call in sorted(answered_calls(messages).items()):
        result = messages[index]
        assert isinstance(result, ToolResultMessage)  # answered_calls maps results only
        found = file_read(call)
        if found is None or result.is_error:
            continue
        body = result.text
        if shell_command(call) is not None and shell_exit_code(body) not in (None, 0):
            continue
        reads.append(_Read(index, found.path, body, found.partial))
    for index, message in enumerate(messages):
        if isinstance(message, BashExecutionMessage) and message.exit_code == 0:
            shown = shell_file_read(message.command)
            if shown is not None:
                reads.append(_Read(index, shown.path, message.output, shown.partial))
    reads.sort(key=lambda read: read.index)
    return [r for r in reads if r.body.strip() and not is_pass_stub(r.body.strip())]


def _visible_paths(kept: Sequence[Message]) -> set[str]:
    """Paths whose content the kept messages show: a read there, or a restored file.

    A kept read whose result was blanked or stubbed by a pass shows nothing, so it does
    not count.
    """
    paths = {read.path for read in _reads(kept)}
    for message in kept:
        restored = restored_path(message)
        if restored is not None:
            paths.add(restored)
    return paths


def _writes_after(folded: Sequence[Message], kept: Sequence[Message]) -> list[tuple[int, str]]:
    """(position, path) of every file change, positions running on from folded into kept."""
    writes: list[tuple[int, str]] = []
    for offset, part in ((0, folded), (len(folded), kept)):
        for index, message in enumerate(part):
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    writes.extend((offset + index, path) for path in written_paths(call))
    return writes


def _restored_message(path: str, notes: Sequence[str], body: str) -> UserMessage:
    header = "\n".join([f"{RESTORED_FILE_PREFIX} {path}", *notes])
    return UserMessage(content=[TextContent(text=f"{header}\n{body}")])


def rehydrate_recent_reads(
    folded: Sequence[Message],
    kept: Sequence[Message],
    *,
    max_files: int = DEFAULT_MAX_FILES,
    token_budget: int = DEFAULT_REHYDRATE_TOKENS,
    counter: TokenCounter | None = None,
) -> list[RestoredFile]:
    """Return restored-file messages for the freshest file reads that `folded` holds.

    Seed 003's rule: collect the successful one-file reads in `folded` (a read tool's
    result, a shell view such as `cat f`, `sed -n '1,80p' f`, `nl -ba f | sed -n ...`,
    or a user's shell run of one), keep the freshest read of each path, leave out any
    path whose content `kept` still shows (a read there that no pass blanked, or a
    restored file), then take the most recent first, up to `max_files`, stopping before
    the one that would take the messages past `token_budget`. The freshest is always
    restored: when it alone is over the budget, its content is cut to its first and last
    lines to fit (seed 003 would send it whole).

    A read whose file a later call changed (an edit or write tool, `sed -i`, a `>`
    redirect) carries a note saying the content may be stale, and so does a read of
    only some lines.

    Args:
        folded: The messages the compaction folds away.
        kept: The messages it keeps verbatim.
        max_files: The most files to restore.
        token_budget: The most tokens the restored messages may use together.
        counter: Counts tokens (the seed heuristic by default).

    Returns:
        The restored files, oldest read first (so they read in order after a summary);
        empty when nothing can be restored.

    Raises:
        ValueError: `max_files` or `token_budget` is negative.
    """
    for name, value in (("max_files", max_files), ("token_budget", token_budget)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    if max_files == 0:
        return []
    count = message_tokens if counter is None else counter.count_message
    visible = _visible_paths(kept)
    freshest: dict[str, _Read] = {}
    for read in _reads(folded):
        freshest[read.path] = read
    candidates = sorted(
        (read for path, read in freshest.items() if path not in visible),
        key=lambda read: read.index,
        reverse=True,
    )[:max_files]
    writes = _writes_after(folded, kept)
    restored: list[RestoredFile] = []
    used = 0
    for read in candidates:
        edited = any(position > read.index and path == read.path for position, path in writes)
        notes = [
            note for flag, note in ((edited, _EDITED_NOTE), (read.partial, _PARTIAL_NOTE)) if flag
        ]
        message = _restored_message(read.path, notes, read.body)
        tokens = count(message)
        truncated = False
        if used + tokens > token_budget:
            if restored:
                break
            # The freshest read alone is over the budget: cut its content to fit.
            overhead = count(_restored_message(read.path, notes, ""))
            text_budget = max(token_budget - overhead, 0)
            count_text = estimate_tokens if counter is None else counter.count_text
            body = truncate_head_tail_tokens(read.body, text_budget, counter=counter)
            # Framing may round differently from the text alone; trim until it fits.
            while body and count(_restored_message(read.path, notes, body)) > token_budget:
                text_budget -= max(1, count_text(body) // 20)
                body = truncate_head_tail_tokens(read.body, max(text_budget, 0), counter=counter)
            message = _restored_message(read.path, notes, body)
            tokens = count(message)
            truncated = True
        restored.append(RestoredFile(message, read.index, read.path, tokens, truncated, edited))
        used += tokens
    restored.reverse()
    return restored


def apply_rehydrate(
    compacted_tokens: int,
    original_tokens: int,
    restored: Sequence[RestoredFile],
    *,
    compacted_count: int | None = None,
    original_count: int | None = None,
) -> list[RestoredFile]:
    """Keep only the restored files that leave the compacted context smaller than the original.

    The strict-shrink guard. Freshest first, a restored file is kept while
    `compacted_tokens` plus the kept files' tokens stays strictly below
    `original_tokens`; the first that does not fit stops the walk. When both counts are
    given, the message count must stay strictly below too (seed 003's count guard,
    `1 + restored < dropped`).

    Args:
        compacted_tokens: Tokens of the compacted context without the restored files.
        original_tokens: Tokens of what it replaces.
        restored: What `rehydrate_recent_reads` returned (oldest first).
        compacted_count: Messages of the compacted context without the restored files.
        original_count: Messages of what it replaces.

    Returns:
        The kept files, in the order given.
    """
    budget = original_tokens - compacted_tokens
    room = (
        original_count - compacted_count
        if original_count is not None and compacted_count is not None
        else None
    )
    kept: list[RestoredFile] = []
    used = 0
    for item in reversed(restored):
        if used + item.tokens >= budget or (room is not None and len(kept) + 1 >= room):
            break
        kept.append(item)
        used += item.tokens
    kept.reverse()
    return kept
