"""`_history_strings`: one string kept in each payload of the active chain, for SDK adapters."""

from __future__ import annotations

import json

import pytest

from sessionstore import SessionStore, UserMessage
from sessionstore.errors import SessionNotFoundError
from tests.integration.store._helpers import new_session

PATH = ("extra", "kept", "text")


def _message(n: int, *, kept: bool) -> UserMessage:
    extra = {"kept": {"text": f"[{n}]"}} if kept else {}
    return UserMessage(content=f"message {n}", extra=extra)


async def test_it_reads_the_string_or_the_payload_over_the_chain(store: SessionStore) -> None:
    sid = await new_session(store)
    numbers = list(range(12))
    for start in range(0, 12, 3):  # four loops of three
        batch = [_message(n, kept=n % 4 != 1) for n in numbers[start : start + 3]]
        await store.append_messages(sid, batch, loop_id="new")
    # A branch off the third loop: the chain is loops 1, 2 and the branch.
    loops = await store.list_loops(sid)
    branch = await store.start_loop(sid, parent_loop_id=loops[1].id)
    await store.append_messages(sid, [_message(99, kept=True)], loop_id=branch.id)
    expected = [0, 1, 2, 3, 4, 5, 99]

    def numbers_of(rows: list[tuple[str | None, str | None]]) -> list[int]:
        found = []
        for text, payload in rows:
            if text is not None:
                assert payload is None
                found.append(json.loads(text)[0])
            else:
                assert payload is not None
                found.append(int(json.loads(payload)["content"][0]["text"].split()[-1]))
        return found

    assert numbers_of(await store._history_strings(sid, PATH)) == expected
    for last in range(len(expected) + 2):
        rows = await store._history_strings(sid, PATH, last=last)
        assert numbers_of(rows) == (expected[-last:] if last else [])


async def test_it_refuses_a_bad_path_and_says_when_there_is_no_session(
    store: SessionStore,
) -> None:
    sid = await new_session(store)
    assert await store._history_strings(sid, PATH) == []
    assert await store._history_strings(sid, PATH, last=5) == []
    with pytest.raises(ValueError, match="plain names"):
        await store._history_strings(sid, ("extra", "x') --"))
    with pytest.raises(SessionNotFoundError):
        await store._history_strings("missing", PATH)
    with pytest.raises(SessionNotFoundError):
        await store._history_strings("missing", PATH, last=3)
