"""The session digest's update: the loops that left a compaction's scope, folded into it.

A compaction (`_compaction.compact_session_loops`) writes blocks for the loops in its
scope; the loops of the chain before the scope go into the session digest, updated
here from the digest before it, within a room sized to the raw history it stands for.
"""

from __future__ import annotations

from sessionstore._redact import redact, redact_message
from sessionstore._tokens import message_tokens
from sessionstore.config import CompactionConfig
from sessionstore.models import CompactionSummaryMessage, LoopRecord, SessionDigest
from sessionstore.store import SessionStore, TenantStore
from sessionstore.summarizers import Summarizer, SummaryRequest, summary_budget
from sessionstore.summarizers._protocol import digest_text

__all__ = ["HISTORY_TOKENS", "next_digest"]


async def next_digest(
    store: SessionStore | TenantStore,
    session_id: str,
    current: LoopRecord,
    first_in_scope: LoopRecord,
    overlay: str,
    policy: CompactionConfig,
    summarizer: Summarizer,
) -> SessionDigest | None:
    """Return the session digest updated with the loops that left the scope, or None.

    The loops of the chain before the scope that the previous digest does not fold yet
    are folded into it (an iterative update of the previous digest, as seed 003 does),
    so the original task and the key facts survive any number of loops. The new digest
    names the loops it folded and the digest it extends: what a compaction writes does
    not grow with the chain.
    """
    prior, pending = await store.digest_inputs(
        session_id, first_in_scope=first_in_scope.id, loop_id=current.id, overlay=overlay
    )
    if not pending:
        return None
    messages = [
        redact_message(stored.message)
        for loop in pending
        for stored in await store.get_messages(session_id, loop.id)
    ]
    pending_tokens = sum(loop.token_total for loop in pending)
    folded_tokens = pending_tokens + (0 if prior is None else prior.token_count)
    # The room is a share of the history the digest stands for, not of the shorter text
    # it updates: a digest updated loop by loop would otherwise get a fifth of a fifth
    # and shed the records it read (a user's reservations, payment ids), where one
    # digest of the same loops written at once keeps them.
    history_tokens = pending_tokens + _history_tokens(prior)
    budget = summary_budget(history_tokens, max_tokens=policy.max_summary_tokens)
    if prior is not None:
        # An update never has less room than the digest it extends had (up to the cap):
        # a fifth of a short loop and the prior digest would make every fold of a short
        # loop cut what the digest held, the task statement with it, for good.
        budget = max(budget, min(prior.token_count, policy.max_summary_tokens))
    summary = await summarizer.summarize(
        SummaryRequest(
            messages=messages,
            prior_digest=None if prior is None else redact(prior.message.summary),
            budget_tokens=budget,
            scope="session",
        )
    )
    text = redact(digest_text(summary))  # an empty answer folds nothing: nothing is written
    message = CompactionSummaryMessage(summary=text, tokens_before=folded_tokens)
    return SessionDigest(
        overlay=overlay,
        head_loop_id=current.id,
        through_loop_id=pending[-1].id,
        folded=[(loop.id, loop.message_count) for loop in pending],
        extends_id=None if prior is None else prior.id,
        message=message,
        token_count=message_tokens(message),
        details={
            "model": summary.model,
            "prompt_version": summary.prompt_version,
            "duration_ms": round(summary.duration_ms, 3),
            "budget_tokens": budget,
            HISTORY_TOKENS: history_tokens,
        },
    )


HISTORY_TOKENS = "history_tokens"
"""The `details` key of a session digest: the raw tokens of every loop it stands for."""


def _history_tokens(digest: SessionDigest | None) -> int:
    """Return the raw tokens of the loops `digest` stands for (0 for none).

    A digest written before the key was recorded gives what it replaced (its
    `tokens_before`: its own loops and the digest it extended), a lower bound.
    """
    if digest is None:
        return 0
    recorded = digest.details.get(HISTORY_TOKENS)
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 0:
        return recorded
    return digest.message.tokens_before or digest.token_count
