"""An audit with the secrets of its messages redacted, for `audit --redact-secrets`.

The audit shows raw messages (their first words in the tables, their whole text in the
web page); a report to share should not show the credentials an agent printed. Token
counts are left as they are: they describe the stored messages.
"""

from __future__ import annotations

import dataclasses

from sessionstore._audit import (
    AuditedMessage,
    AuditedTurn,
    AuditSnapshot,
    LoopAudit,
    SessionAudit,
)
from sessionstore._redact import redact_message
from sessionstore.models import ReplacementMessage

__all__ = ["redacted_audit", "redacted_snapshots"]


def _message(audited: AuditedMessage) -> AuditedMessage:
    stored = audited.message
    return dataclasses.replace(
        audited, message=stored.model_copy(update={"message": redact_message(stored.message)})
    )


def _replacement(replacement: ReplacementMessage) -> ReplacementMessage:
    return replacement.model_copy(update={"message": redact_message(replacement.message)})


def _turn(turn: AuditedTurn) -> AuditedTurn:
    return dataclasses.replace(
        turn,
        messages=[_message(m) for m in turn.messages],
        replacements=[_replacement(r) for r in turn.replacements],
    )


def _loop(loop: LoopAudit) -> LoopAudit:
    return dataclasses.replace(loop, turns=[_turn(turn) for turn in loop.turns])


def redacted_audit(audit: SessionAudit) -> SessionAudit:
    """Return `audit` with every message it shows redacted (`redact_message`)."""
    digest = audit.digest
    if digest is not None:
        digest = digest.model_copy(update={"message": redact_message(digest.message)})
    return dataclasses.replace(audit, loops=[_loop(loop) for loop in audit.loops], digest=digest)


def redacted_snapshots(snapshots: list[AuditSnapshot]) -> list[AuditSnapshot]:
    """Return the snapshots of `audit --html` with their audits redacted."""
    return [dataclasses.replace(s, audit=redacted_audit(s.audit)) for s in snapshots]
