"""`TenantStore`: a handle on one tenant's sessions, and nothing else.

`SessionStore.for_tenant(app_name, user_id)` returns one. It has every call on sessions,
loops, messages, blocks and events, each scoped to its tenant: another tenant's session,
loop or block is answered exactly as one that does not exist. It has no engine, no
migrations and no way to reach another tenant; it shares its parent's runner, so the
parent closes it.
"""

from __future__ import annotations

from sessionstore._tokens import TokenCounter
from sessionstore.store._block_api import BlockMethods
from sessionstore.store._engine import TransactionRunner
from sessionstore.store._integrity_api import IntegrityMethods
from sessionstore.store._message_api import MessageMethods
from sessionstore.store._retention import RetentionMethods
from sessionstore.store._search_api import SearchMethods
from sessionstore.store._session_api import SessionMethods
from sessionstore.store._sessions import Tenant
from sessionstore.store._usage_api import UsageMethods

__all__ = ["TenantStore"]


class TenantStore(
    SessionMethods,
    MessageMethods,
    BlockMethods,
    RetentionMethods,
    SearchMethods,
    UsageMethods,
    IntegrityMethods,
):
    """A handle that sees, writes and deletes only the sessions of one tenant.

    Get one from `SessionStore.for_tenant(app_name, user_id)`; do not build it directly.
    Sessions it creates belong to its tenant; for a session, loop or block of another
    tenant every call raises the same `NotFoundError`, worded the same, as for one that
    does not exist.
    """

    def __init__(self, runner: TransactionRunner, counter: TokenCounter, tenant: Tenant) -> None:
        super().__init__(runner, counter, tenant)
        self._owner = tenant

    def __repr__(self) -> str:
        return f"TenantStore(app_name={self._owner.app_name!r}, user_id={self._owner.user_id!r})"

    @property
    def tenant(self) -> tuple[str, str]:
        """The `(app_name, user_id)` this handle is scoped to."""
        return (self._owner.app_name, self._owner.user_id)
