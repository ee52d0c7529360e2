"""`verify`: check stored sessions against the store's invariants (both handles have it)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from sessionstore.models import IntegrityReport
from sessionstore.store._handle import _Handle

__all__ = ["IntegrityMethods"]


class IntegrityMethods(_Handle):
    """The integrity check of `SessionStore` and `TenantStore`."""

    async def verify(
        self, *, progress: Callable[[int, int], None] | None = None
    ) -> IntegrityReport:
        """Check every stored session against the store's invariants and report what is wrong.

        Recomputes each message's content hash and turn, and checks each loop's positions
        (contiguous from 0) and counters, the chain of loops, and each block's turn ranges
        and provenance. Each session is read in its own transaction; nothing is written.
        A tenant handle checks its tenant's sessions only.

        Args:
            progress: Called with `(sessions done, sessions in all)` after each session.

        Returns:
            What was checked and every problem found (`report.is_ok` when none).
        """
        # Imported here: a command that never verifies (`context`) does not load the checks.
        from sessionstore.store import _verify

        keys = await self._read(lambda db: _verify.session_keys(db, self._tenant))
        counts = {"sessions": 0, "loops": 0, "messages": 0, "blocks": 0}
        problems = []
        for done, key in enumerate(keys, 1):
            found = await self._read(functools.partial(_verify.verify_session, key=key))
            counts["sessions"] += 1
            counts["loops"] += found.loops
            counts["messages"] += found.messages
            counts["blocks"] += found.blocks
            problems.extend(found.problems)
            if progress is not None:
                progress(done, len(keys))
        return IntegrityReport(**counts, problems=problems)
