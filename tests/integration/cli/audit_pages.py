"""A session for the audit page tests: two compactions of `default`, one of `tight`.

Its first and its latest user request carry markup, as hostile message text would.
"""

from __future__ import annotations

from sessionstore import (
    CompactionConfig,
    SessionStore,
    TextContent,
    UserMessage,
    compact_session_loops,
)
from tests.factories import conversation
from tests.integration.cli.runner import with_store

HOSTILE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> & "it"'
"""Markup in a message: the page must show it as text and never run it."""

# The seed's three levels: the page shows each of their sections (kept, truncated,
# summarised); the config's default strategy summarizes.
CONFIG = CompactionConfig(
    keep_first_turns=1, keep_recent_turns=2, max_summary_tokens=300, block_strategy="default"
)
TIGHT = CompactionConfig(
    keep_first_turns=0, keep_recent_turns=1, max_summary_tokens=200, block_strategy="default"
)


def hostile_request() -> UserMessage:
    return UserMessage(content=[TextContent(text=f"Please look at {HOSTILE}")])


async def _build(store: SessionStore) -> str:
    session = await store.create_session(app_name="audit-page", user_id="u")
    for index in range(4):
        await store.start_loop(session.id)
        messages = conversation(turns=6)
        if index == 0:
            messages[0] = hostile_request()
        await store.append_messages(session.id, messages)
        if index == 2:
            await compact_session_loops(store, session.id, config=CONFIG)
    await store.append_messages(session.id, [hostile_request()])
    await compact_session_loops(store, session.id, config=CONFIG)
    await compact_session_loops(store, session.id, config=TIGHT, overlay="tight")
    return session.id


async def many_loops(
    store: SessionStore,
    count: int,
    *,
    compact_after: tuple[int, ...] = (),
    config: CompactionConfig = CONFIG,
) -> str:
    """A session of `count` loops of two turns each, compacted (with `config`) after the
    loops whose index (from 0) is in `compact_after`; return its id."""
    session = await store.create_session(app_name="audit-page", user_id="u")
    for index in range(count):
        if index:
            await store.start_loop(session.id)
        await store.append_messages(session.id, conversation(turns=2))
        if index in compact_after:
            await compact_session_loops(store, session.id, config=config)
    return session.id


def audited_session(url: str) -> str:
    """Store the session and return its id.

    Views on the page: `default` after each of its two compactions and now (3), `tight`
    after its compaction and now (2). The first compaction saw three loops, the second four.
    """
    return with_store(url, _build)
