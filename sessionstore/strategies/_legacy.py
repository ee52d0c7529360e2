"""The legacy, stateless compaction: a message list shortened in three levels to fit a budget.

This is the seed's `compact_messages`, kept exactly. It needs no database: it takes the
messages the agent holds in memory and returns a shorter list, trying each level only
when the previous one was not enough:

1. truncate long tool outputs to their first and last lines;
2. replace old assistant turns with one-line `[Summary] ...` user messages;
3. drop the middle, keeping the first `keep_first` and last `keep_recent` messages, and
   finally the most recent messages that fit.

>>> from sessionstore.config import ContextConfig
>>> from sessionstore.models import UserMessage
>>> compact_messages([UserMessage(content="hi")], ContextConfig()) == [UserMessage(content="hi")]
True

The seed's choices that a caller should know:

- The budget is `max_context_tokens - system_prompt_tokens`, counted with
  `sessionstore.message_tokens`.
- The `[Context compacted: ...]` marker that `keep_within_budget` adds is not counted
  against the budget, so that last resort can exceed it by the marker's few tokens.
- The levels do not keep tool calls and results paired: the recent messages kept by
  levels 2 and 3 can start with a tool result whose call was summarised or dropped, and
  the first messages kept by level 3 can end with a call whose result was dropped. Use
  `DefaultCompaction(safe_tool_pairs=True)` when the result goes to a provider that
  refuses such messages. (The database path, `build_context`, has its own guarantees.)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sessionstore._tokens import message_tokens
from sessionstore.config import ContextConfig
from sessionstore.models import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "DefaultCompaction",
    "compact_messages",
    "count_lines",
    "keep_within_budget",
    "level1_truncate_tool_outputs",
    "level2_summarize_old_turns",
    "level3_drop_middle",
    "lines_cut_marker",
    "total_tokens",
    "truncate_head_tail",
    "truncate_tool_result",
]

SHORT_TEXT_CHARS = 200
"""Level 2 keeps an assistant text in its summary when it is at most this many characters."""


def total_tokens(messages: Sequence[Message]) -> int:
    """Return the heuristic token count of `messages` (`message_tokens` summed)."""
    return sum(message_tokens(message) for message in messages)


def compact_messages(
    messages: Sequence[Message], config: ContextConfig | None = None
) -> list[Message]:
    """Return `messages` shortened to fit the budget, trying each of the three levels in turn.

    The budget is `config.max_context_tokens - config.system_prompt_tokens`. Messages
    that already fit come back unchanged (as a new list of the same objects).

    Args:
        messages: the whole conversation, oldest first.
        config: the budget and the knobs of each level; `ContextConfig()` when None.
    """
    config = config or ContextConfig()
    budget = config.budget
    if total_tokens(messages) <= budget:
        return list(messages)
    compacted = level1_truncate_tool_outputs(messages, config.tool_output_max_lines)
    if total_tokens(compacted) <= budget:
        return compacted
    compacted = level2_summarize_old_turns(compacted, config.keep_recent)
    if total_tokens(compacted) <= budget:
        return compacted
    return level3_drop_middle(compacted, config, budget)


# ── level 1 ────────────────────────────────────────────────────────────────────


def level1_truncate_tool_outputs(messages: Sequence[Message], max_lines: int) -> list[Message]:
    """Return `messages` with every text block of every tool result cut by `truncate_head_tail`.

    Other messages, and tool results that need no cut, are the same objects as before.
    """
    return [
        truncate_tool_result(message, max_lines)
        if isinstance(message, ToolResultMessage)
        else message
        for message in messages
    ]


def truncate_tool_result(
    message: ToolResultMessage,
    max_lines: int,
    cut: Callable[[str, int], str] | None = None,
) -> ToolResultMessage:
    """Return the tool result with its text blocks cut to `max_lines` lines (itself if uncut).

    Each block is cut by `cut` (`truncate_head_tail` by default, the seed's level 1).
    """
    content = list(message.content)
    changed = False
    shorten = truncate_head_tail if cut is None else cut
    for index, block in enumerate(content):
        if isinstance(block, TextContent):
            text = shorten(block.text, max_lines)
            if text != block.text:
                content[index] = TextContent(text=text)  # cheaper than a model_copy
                changed = True
    return message.model_copy(update={"content": content}) if changed else message


def lines_cut_marker(omitted: int) -> str:
    """What stands for the lines a head-and-tail cut leaves out (`truncate_head_tail`)."""
    return f"\n\n[... {omitted} lines truncated ...]\n\n"


def count_lines(text: str) -> int:
    """The lines of `text` as `truncate_head_tail` counts them (a final newline ends one)."""
    return text.count("\n") + (0 if text == "" or text.endswith("\n") else 1)


def truncate_head_tail(text: str, max_lines: int) -> str:
    r"""Return `text` cut to its first and last lines when it has more than `max_lines` lines.

    The first `max_lines // 2` lines and the last `max_lines - max_lines // 2` are kept,
    joined by `"\n"`, around the marker `"\n\n[... {omitted} lines truncated ...]\n\n"`.
    A text that is short enough is returned as it is (the same object).

    Lines are counted like Rust's `str::lines` (the seed's `split_lines`): they end at
    `"\n"` or `"\r\n"`, and a final line ending does not start another line, so
    `"a\nb\n"` is two lines. Python's `str.splitlines()` would also split on form
    feeds, vertical tabs and Unicode separators, which tool output (source files, logs)
    carries as content; a plain `split("\n")` would count a trailing newline as an extra
    empty line and cut 50-line outputs that end in a newline at `max_lines=50`.

    Raises:
        ValueError: `max_lines` is negative.
    """
    if max_lines < 0:
        raise ValueError(f"max_lines must not be negative, got {max_lines}")
    line_count = count_lines(text)
    if line_count <= max_lines:
        return text
    head_count = max_lines // 2
    tail_count = max_lines - head_count
    omitted = line_count - head_count - tail_count
    # Split off only the lines that are kept: a huge output costs two partial splits.
    ends_with_newline = text.endswith("\n")
    body = text[:-1] if ends_with_newline else text
    head = body.split("\n", head_count)[:head_count]
    tail = body.rsplit("\n", tail_count)[1:] if tail_count else []
    # "\r\n" ends a line as "\n" does, so its "\r" goes; a bare "\r" at the very end of
    # an unterminated text is content and stays.
    head = [line.removesuffix("\r") for line in head]
    tail = [
        line if index == len(tail) - 1 and not ends_with_newline else line.removesuffix("\r")
        for index, line in enumerate(tail)
    ]
    return "\n".join(head) + lines_cut_marker(omitted) + "\n".join(tail)


# ── level 2 ────────────────────────────────────────────────────────────────────


def level2_summarize_old_turns(messages: Sequence[Message], keep_recent: int) -> list[Message]:
    """Keep the last `keep_recent` messages; replace older assistant turns with one-line summaries.

    Before the boundary (`len(messages) - keep_recent`):

    - an assistant message becomes a user message `"[Summary] {summary}"`, where the
      summary is its text blocks of at most 200 characters joined by a space, else
      `"[Assistant used {n} tool(s)]"` when it made tool calls, else
      `"[Assistant response]"`; the tool results right after it (before the boundary)
      are dropped with it;
    - any other tool result (an orphan) is dropped;
    - every other message (user, system, bash execution, custom, summaries) is kept.

    The seed's "join" names no separator; a space keeps the summary on one line and the
    texts apart. Its "t.len <= 200" is read as characters (Rust's `len` counts UTF-8
    bytes; the two agree on ASCII). An empty text block is short, so an assistant
    message with one gets the summary `"[Summary] "` (as in the seed).

    Raises:
        ValueError: `keep_recent` is negative.
    """
    if keep_recent < 0:
        raise ValueError(f"keep_recent must not be negative, got {keep_recent}")
    if len(messages) <= keep_recent:
        return list(messages)
    boundary = len(messages) - keep_recent
    result: list[Message] = []
    i = 0
    while i < boundary:
        message = messages[i]
        if isinstance(message, AssistantMessage):
            result.append(UserMessage(content=[TextContent(text=_summary_text(message))]))
            i += 1
            while i < boundary and isinstance(messages[i], ToolResultMessage):
                i += 1
            continue
        if not isinstance(message, ToolResultMessage):
            result.append(message)
        i += 1
    result.extend(messages[boundary:])
    return result


def _summary_text(message: AssistantMessage) -> str:
    short_texts = [
        block.text
        for block in message.content
        if isinstance(block, TextContent) and len(block.text) <= SHORT_TEXT_CHARS
    ]
    tool_count = sum(isinstance(block, ToolCall) for block in message.content)
    if short_texts:
        summary = " ".join(short_texts)
    elif tool_count > 0:
        summary = f"[Assistant used {tool_count} tool(s)]"
    else:
        summary = "[Assistant response]"
    return f"[Summary] {summary}"


# ── level 3 ────────────────────────────────────────────────────────────────────


def level3_drop_middle(
    messages: Sequence[Message], config: ContextConfig, budget: int
) -> list[Message]:
    """Keep the first `keep_first` and last `keep_recent` messages, with a marker between.

    The marker is the user message
    `"[Context compacted: {removed} messages removed to fit context window]"`. When the
    two ends overlap, or the result still exceeds `budget`, `keep_within_budget` decides.
    """
    length = len(messages)
    first_end = min(config.keep_first, length)
    recent_start = max(0, length - config.keep_recent)
    if first_end >= recent_start:
        return keep_within_budget(messages, budget)
    removed = recent_start - first_end
    marker = _marker(f"[Context compacted: {removed} messages removed to fit context window]")
    result = [*messages[:first_end], marker, *messages[recent_start:]]
    if total_tokens(result) > budget:
        return keep_within_budget(result, budget)
    return result


def keep_within_budget(messages: Sequence[Message], budget: int) -> list[Message]:
    """Keep the most recent messages that fit `budget`, behind a marker if any were removed.

    Walking back from the newest message, it stops at the first message that does not
    fit, even if an older, smaller one would (the seed's `BREAK`): what is kept is always
    one contiguous, most recent run. The marker, `"[Context compacted: {removed} messages
    removed]"`, is not counted against `budget`.
    """
    kept: list[Message] = []
    remaining = budget
    for message in reversed(messages):
        tokens = message_tokens(message)
        if tokens > remaining:
            break
        remaining -= tokens
        kept.append(message)
    kept.reverse()
    if len(kept) < len(messages):
        removed = len(messages) - len(kept)
        kept.insert(0, _marker(f"[Context compacted: {removed} messages removed]"))
    return kept


def _marker(text: str) -> UserMessage:
    return UserMessage(content=[TextContent(text=text)])


# ── strategies ─────────────────────────────────────────────────────────────────


class DefaultCompaction:
    """The built-in `CompactionStrategy`: `compact_messages`, the seed's three levels.

    Args:
        safe_tool_pairs: after compacting, drop tool results whose call is not in the
            assistant message right before them, and tool calls whose result does not
            follow (an assistant message left with no content is dropped). Off by
            default, so the output is exactly the seed's.
    """

    def __init__(self, *, safe_tool_pairs: bool = False) -> None:
        self.safe_tool_pairs = safe_tool_pairs

    def __repr__(self) -> str:
        return f"DefaultCompaction(safe_tool_pairs={self.safe_tool_pairs})"

    def compact(self, messages: Sequence[Message], config: ContextConfig) -> list[Message]:
        """Return `compact_messages(messages, config)`, tool pairs repaired when asked."""
        result = compact_messages(messages, config)
        return _pair_tool_messages(result) if self.safe_tool_pairs else result


def _pair_tool_messages(messages: Sequence[Message]) -> list[Message]:
    """Drop unanswered tool calls and tool results that answer no call right before them.

    A tool result pairs with the assistant message that opens the run of tool results it
    is in, the rule `TurnAssigner` uses; call ids may repeat within a conversation, so
    pairing by id across the whole list would not be enough.
    """
    paired: list[Message] = []
    open_call_ids: frozenset[str] = frozenset()
    for message in messages:
        if isinstance(message, ToolResultMessage):
            if message.tool_call_id in open_call_ids:
                paired.append(message)
            continue
        if isinstance(message, AssistantMessage):
            open_call_ids = frozenset(call.id for call in message.tool_calls)
        else:
            open_call_ids = frozenset()
        paired.append(message)

    result: list[Message] = []
    for index, message in enumerate(paired):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answered: set[str] = set()
            later = index + 1
            while later < len(paired):
                result_message = paired[later]
                if not isinstance(result_message, ToolResultMessage):
                    break
                answered.add(result_message.tool_call_id)
                later += 1
            if any(call.id not in answered for call in message.tool_calls):
                content = [
                    block
                    for block in message.content
                    if not isinstance(block, ToolCall) or block.id in answered
                ]
                if not content:
                    continue
                message = message.model_copy(update={"content": content})
        result.append(message)
    return result
