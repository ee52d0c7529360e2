"""What a compaction tells its user: the headline, the token line and the notes (pure).

The wording follows Hermes Agent's `summarize_manual_compression`: a compaction that
changed nothing says so (`No changes from compression: N messages`), one that did says
`Compressed: N → M messages`, and fewer messages that cost more tokens get a note.
Beyond the seed, sessionstore also says why a loop was left as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sessionstore._framing import shown_section
from sessionstore._loop_messages import message_columns
from sessionstore._overlay import segments
from sessionstore.models import (
    CompactionBlock,
    StoredMessage,
)

__all__ = ["CompactionFeedback", "Shown", "compaction_feedback", "shown"]


@dataclass(frozen=True, slots=True)
class Shown:
    """What the model is shown of one loop: how many messages, and their tokens."""

    messages: int
    tokens: int


def shown(messages: Sequence[StoredMessage], block: CompactionBlock | None) -> Shown:
    """Return what the loader shows of a loop (its raw `messages`) under `block`.

    Raw turns count their messages and cached tokens; a section counts each run of
    summaries as one framed message (as the loader merges them) and its other
    replacement messages one by one.
    """
    _, turn_indexes, token_counts = message_columns(messages)
    if block is None:
        return Shown(len(messages), sum(token_counts))
    turn_count = max(turn_indexes, default=-1) + 1
    count = tokens = 0
    for span, kind in segments(turn_count, block):
        if kind == "raw":
            first, last = span.start_turn, span.end_turn
            raw = [
                n
                for turn, n in zip(turn_indexes, token_counts, strict=True)
                if first <= turn <= last
            ]
            count += len(raw)
            tokens += sum(raw)
            continue
        section = block.keep_compacted if kind == "compacted" else block.keep_recent
        assert section is not None
        runs, cost = shown_section([r.message for r in section.messages])
        count += runs
        tokens += cost
    return Shown(count, tokens)


@dataclass(frozen=True, slots=True)
class CompactionFeedback:
    """What to tell the user after a compaction."""

    noop: bool
    """True when nothing was written: every loop was already compacted this way."""
    headline: str
    token_line: str
    notes: list[str] = field(default_factory=list)
    """Why loops were left as they were, and the seed's note on denser summaries."""

    def lines(self) -> list[str]:
        """Return the feedback as lines of text, headline first."""
        return [self.headline, self.token_line, *self.notes]

    def to_dict(self) -> dict[str, object]:
        """Return the feedback as JSON data (recorded in the `ended` event)."""
        return {
            "noop": self.noop,
            "headline": self.headline,
            "token_line": self.token_line,
            "notes": list(self.notes),
        }


def compaction_feedback(
    before: Shown, after: Shown, *, noop: bool, notes: Sequence[str] = ()
) -> CompactionFeedback:
    """Return the feedback of a compaction that showed `before` and now shows `after`."""
    if noop:
        headline = f"No changes from compression: {before.messages:,} messages"
    else:
        headline = f"Compressed: {before.messages:,} → {after.messages:,} messages"
    if before.tokens == after.tokens:
        token_line = f"Rough transcript estimate: ~{before.tokens:,} tokens (unchanged)"
    else:
        token_line = f"Rough transcript estimate: ~{before.tokens:,} → ~{after.tokens:,} tokens"
    all_notes = list(notes)
    if not noop and after.messages < before.messages and after.tokens > before.tokens:
        all_notes.append(
            "Note: fewer messages can still raise this rough transcript estimate when "
            "compression rewrites the transcript into denser summaries."
        )
    return CompactionFeedback(noop, headline, token_line, all_notes)
