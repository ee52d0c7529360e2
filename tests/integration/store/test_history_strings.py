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


async def test_it_takes_a_known_string_by_id_and_hash_and_reads_the_others(
    store: SessionStore,
) -> None:
    sid = await new_session(store)
    await store.append_messages(sid, [_message(n, kept=n != 2) for n in range(4)], loop_id="new")
    first = await store._chain_strings(sid, PATH)
    assert first.found == ["[0]", "[1]", None, "[3]"]
    assert set(first.payloads) == {first.ids[2]}
    ids, digests = first.ids, first.digests
    # What is known with its hash is taken as it is (nothing read: the text below was never
    # stored); a wrong hash, an unknown id and a message without the string are read.
    known = {
        ids[0]: (digests[0], "[100]"),
        ids[1]: (digests[0], "[101]"),
        ids[2]: (digests[2], None),
    }
    await store.append_messages(sid, [_message(4, kept=True)])
    again = await store._chain_strings(sid, PATH, known=known)
    assert again.ids == [*ids, again.ids[-1]]
    assert again.digests[:4] == digests
    assert again.found == ["[100]", "[1]", None, "[3]", "[4]"]
    assert again.payloads == first.payloads
    newest = await store._chain_strings(sid, PATH, last=2, known=known)
    assert newest.found == ["[3]", "[4]"]
    assert newest.ids == again.ids[-2:]
    # The newest two, the one before them known.
    tail = await store._chain_strings(sid, PATH, last=3, known=known)
    assert tail.found == [None, "[3]", "[4]"]
    assert set(tail.payloads) == {ids[2]}
    with pytest.raises(SessionNotFoundError):
        await store._chain_strings("missing", PATH, known=known)
