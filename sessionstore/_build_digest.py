"""The digest a build writes for the raw turns it drops to fit the budget (pure).

When `fit_context` must leave raw turns out and no stored digest covers them, their
errors, test results, paths and commands would vanish from the context. A
`FoldedTurns` stands for them instead: the offline `ExtractiveSummarizer`'s structured
handoff of exactly the dropped turns, merged into the summary right before them (the
session digest or a loop's handoff, as the summarizer updates a prior digest) or, when
there is none to merge into, in a digest of their own. It is computed at build time
from what the build already loaded, never written anywhere (a build writes nothing),
and the same turns always give the same text. The item it is sent as has the source
`built` and `covers` every raw message it stands for (the merged summary's too).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from sessionstore.models import Message

if TYPE_CHECKING:
    from sessionstore.summarizers import ExtractiveSummarizer

__all__ = ["BUILD_DIGEST_SHARE", "FoldedTurns"]

BUILD_DIGEST_SHARE = 0.5
"""The share of the budget a digest of dropped turns may take before summaries shorten
(a summary it is merged into keeps at least its own size)."""
MAX_FOLDED_MESSAGES = 80
"""The most messages a build digests: the newest dropped units up to this many (at least
one unit). Older dropped turns are left out as before; this keeps a build's time bounded
whatever the loop's length (the summarizer reads each message once per size tried)."""
WHOLE = 1_000_000
"""The summarizer's budget for the whole digest: the trimmer fits it to the room left."""


@cache
def _summarizer() -> ExtractiveSummarizer:
    # Imported on first use: a context that fits drops nothing and never loads the
    # summarizers (`sessionstore context` starts without them).
    from sessionstore.summarizers import ExtractiveSummarizer

    return ExtractiveSummarizer()


class FoldedTurns:
    """The digests of the first `count` dropped units, for any `count`, computed once each.

    Only the newest of them, up to `MAX_FOLDED_MESSAGES` messages, are read.

    Args:
        units: The messages of each droppable unit, in the order they are dropped
            (oldest first).
        covers: The raw message ids each unit stands for, in the same order.
        prior: The handoff text the digest updates (the summary it is merged into), if any.
    """

    def __init__(
        self,
        units: Sequence[Sequence[Message]],
        covers: Sequence[tuple[int, ...]],
        prior: str | None,
    ) -> None:
        self.units = units
        self.unit_covers = covers
        self.prior = prior
        self._texts: dict[int, str] = {}

    def first(self, count: int) -> int:
        """Return the oldest of the first `count` units the digest reads (see the cap)."""
        start, total = count, 0
        while start > 0 and (
            start == count or total + len(self.units[start - 1]) <= MAX_FOLDED_MESSAGES
        ):
            start -= 1
            total += len(self.units[start])
        return start

    def text(self, count: int) -> str:
        """Return the digest of the first `count` units, merged into the prior summary."""
        cached = self._texts.get(count)
        if cached is None:
            units = self.units[self.first(count) : count]
            messages = [message for unit in units for message in unit]
            from sessionstore._redact import redact
            from sessionstore.summarizers import SummaryRequest

            request = SummaryRequest(
                messages=messages, prior_digest=self.prior, budget_tokens=WHOLE
            )
            # Redacted as every stored summary is: the digest copies commands and output
            # word for word, and a summary is where a key must never come back from.
            cached = self._texts[count] = redact(_summarizer().digest(request))
        return cached

    def covers(self, count: int) -> tuple[int, ...]:
        """Return the raw message ids the first `count` units stand for, in order."""
        units = self.unit_covers[self.first(count) : count]
        return tuple(raw_id for unit in units for raw_id in unit)
