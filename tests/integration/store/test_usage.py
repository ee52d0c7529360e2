"""Provider usage per model call, summed per turn, loop and session, on every backend."""

from __future__ import annotations

import pytest

from sessionstore import (
    AssistantMessage,
    Message,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from sessionstore.errors import LoopNotFoundError, NotFoundError, SessionNotFoundError
from sessionstore.models import message_payload


async def _session(store: SessionStore, user: str = "ada") -> str:
    return (await store.create_session(app_name="app", user_id=user)).id


def _answer(text: str, usage: Usage | None, **fields: object) -> AssistantMessage:
    return AssistantMessage(content=text, model="m-1", usage=usage, **fields)


async def test_an_appended_assistant_message_records_its_usage_on_its_turn(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    first = Usage(input_tokens=100, output_tokens=20, cache_read_tokens=80, cache_write_tokens=5)
    second = Usage(input_tokens=150, output_tokens=10, cache_read_tokens=120)
    stored = await store.append_messages(
        sid,
        [
            UserMessage(content="list files"),
            AssistantMessage(content=[ToolCall(id="c1", name="ls")], model="m-1", usage=first),
            ToolResultMessage(tool_call_id="c1", content="a.py"),
            _answer("a.py", second),
            _answer("no usage here", None),
        ],
    )
    report = await store.usage(sid)
    assert report.session_id == sid
    assert report.calls == 2
    assert report.usage == first + second
    (loop,) = report.loops
    assert loop.loop_id == stored[0].loop_id
    assert loop.usage == first + second
    assert [(t.turn_index, t.calls, t.usage) for t in loop.turns] == [
        (stored[1].turn_index, 1, first),
        (stored[3].turn_index, 1, second),
    ]


async def test_reasoning_tokens_are_summed_and_a_zero_leaves_the_payload_as_before(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    await store.append_messages(
        sid,
        [
            UserMessage(content="q"),
            _answer("a", Usage(output_tokens=50, reasoning_tokens=30)),
            UserMessage(content="q2"),
            _answer("b", Usage(output_tokens=5, reasoning_tokens=4)),
        ],
    )
    assert (await store.usage(sid)).usage == Usage(output_tokens=55, reasoning_tokens=34)
    # Payloads written before the field existed hash the same: a zero is not serialised.
    plain = message_payload(_answer("a", Usage(output_tokens=1)))
    assert plain["usage"] == {
        "input_tokens": 0,
        "output_tokens": 1,
        "cache_read_tokens": 0,
        "cache_write_tokens": 0,
    }
    assert (
        message_payload(_answer("a", Usage(reasoning_tokens=2)))["usage"]["reasoning_tokens"] == 2
    )


async def test_a_retried_append_does_not_count_usage_twice(store: SessionStore) -> None:
    sid = await _session(store)
    batch: list[Message] = [
        UserMessage(content="hi", client_id="u1"),
        _answer("hello", Usage(input_tokens=10, output_tokens=2), client_id="a1"),
    ]
    await store.append_messages(sid, batch)
    await store.append_messages(sid, batch)
    assert (await store.usage(sid)).calls == 1


async def test_record_usage_defaults_to_the_last_turn_of_the_active_loop(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    stored = await store.append_messages(sid, [UserMessage(content="q"), _answer("a", None)])
    retry = Usage(input_tokens=40, output_tokens=0)
    record = await store.record_usage(sid, retry, model="m-2")
    assert (record.loop_id, record.turn_index) == (stored[1].loop_id, stored[1].turn_index)
    assert (record.message_id, record.model, record.usage) == (None, "m-2", retry)
    explicit = await store.record_usage(
        sid, Usage(output_tokens=3), loop_id=stored[0].loop_id, turn_index=0
    )
    assert explicit.turn_index == 0
    report = await store.usage(sid)
    assert [(t.turn_index, t.calls) for t in report.loops[0].turns] == [(0, 1), (1, 1)]
    assert report.usage == Usage(input_tokens=40, output_tokens=3)


async def test_calls_on_one_turn_are_summed_and_loops_are_totalled(store: SessionStore) -> None:
    sid = await _session(store)
    one = await store.append_messages(sid, [UserMessage(content="q1"), _answer("a1", None)])
    await store.record_usage(sid, Usage(input_tokens=1))
    await store.record_usage(sid, Usage(input_tokens=2))
    new_loop = await store.start_loop(sid)
    await store.append_messages(
        sid, [UserMessage(content="q2"), _answer("a2", Usage(output_tokens=7))]
    )
    report = await store.usage(sid)
    assert [(loop.loop_id, loop.calls, loop.usage) for loop in report.loops] == [
        (one[0].loop_id, 2, Usage(input_tokens=3)),
        (new_loop.id, 1, Usage(output_tokens=7)),
    ]
    assert report.loops[0].turns[0].calls == 2
    assert report.usage == Usage(input_tokens=3, output_tokens=7)
    assert report.calls == 3


async def test_record_usage_refuses_a_turn_or_loop_that_does_not_exist(
    store: SessionStore,
) -> None:
    sid = await _session(store)
    with pytest.raises(NotFoundError, match="no loop"):
        await store.record_usage(sid, Usage(input_tokens=1))
    stored = await store.append_messages(sid, [UserMessage(content="q")])
    with pytest.raises(NotFoundError, match="no turn 1"):
        await store.record_usage(sid, Usage(input_tokens=1), turn_index=1)
    with pytest.raises(ValueError, match="turn_index -1 is out of range"):
        await store.record_usage(sid, Usage(input_tokens=1), turn_index=-1)
    with pytest.raises(ValueError, match="loop_id"):
        await store.record_usage(sid, Usage(input_tokens=1), loop_id=2**63)
    with pytest.raises(LoopNotFoundError):
        await store.record_usage(sid, Usage(input_tokens=1), loop_id=stored[0].loop_id + 99)
    with pytest.raises(TypeError, match="Usage"):
        await store.record_usage(sid, {"input_tokens": 1})  # type: ignore[arg-type]  # the refusal under test
    assert (await store.usage(sid)).calls == 0


async def test_usage_is_scoped_to_the_tenant_and_goes_with_its_session(
    store: SessionStore,
) -> None:
    ada = await _session(store, "ada")
    await store.append_messages(
        ada, [UserMessage(content="q"), _answer("a", Usage(input_tokens=5))]
    )
    as_bob = store.for_tenant("app", "bob")
    with pytest.raises(SessionNotFoundError):
        await as_bob.usage(ada)
    with pytest.raises(SessionNotFoundError):
        await as_bob.record_usage(ada, Usage(input_tokens=1))
    assert (await store.for_tenant("app", "ada").usage(ada)).calls == 1
    await store.delete_session(ada)
    with pytest.raises(SessionNotFoundError):
        await store.usage(ada)


async def test_a_session_without_usage_reports_zero(store: SessionStore) -> None:
    sid = await _session(store)
    report = await store.usage(sid)
    assert (report.calls, report.usage, report.loops) == (0, Usage(), [])


MAX = 2**63 - 1
FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@pytest.mark.parametrize("field", [*FIELDS, "reasoning_tokens"])
async def test_a_count_past_64_bits_is_the_same_value_error_on_every_backend(
    store: SessionStore, field: str
) -> None:
    """Issue 17, item 6: it was `OverflowError` on SQLite and `StorageError` on PostgreSQL."""
    sid = await _session(store)
    await store.append_messages(sid, [UserMessage(content="q")])
    with pytest.raises(ValueError, match=f"{field} {2**63} is out of range"):
        await store.append_messages(sid, [_answer("a", Usage(**{field: 2**63}))])
    with pytest.raises(ValueError, match=field):
        await store.append_messages(
            sid,
            [AssistantMessage.model_validate({"content": "a", "usage": {field: 2**63}})],
        )
    with pytest.raises(ValueError, match=field):
        await store.record_usage(sid, Usage(**{field: 2**63}))
    # A Usage built without validation is refused by the store, before anything is written.
    with pytest.raises(ValueError, match=f"usage.{field} {2**63} is out of range"):
        await store.record_usage(sid, Usage.model_construct(None, **{field: 2**63}))
    unchecked = _answer("a", Usage.model_construct(None, **{field: 2**63}))
    with pytest.raises(ValueError, match=f"usage.{field}"):
        await store.append_messages(sid, [unchecked])
    assert len(await store.get_messages(sid)) == 1
    assert (await store.usage(sid)).calls == 0


async def test_totals_past_64_bits_are_summed_exactly_on_every_backend(
    store: SessionStore,
) -> None:
    """The largest count is accepted, and a session's total may pass it (SQLite's SUM
    would overflow)."""
    sid = await _session(store)
    biggest = Usage(**dict.fromkeys(FIELDS, MAX))
    await store.append_messages(sid, [UserMessage(content="q"), _answer("a", biggest)])
    await store.record_usage(sid, biggest)
    await store.record_usage(sid, Usage(input_tokens=3))
    report = await store.usage(sid)
    assert report.calls == 3
    assert report.usage.input_tokens == 2 * MAX + 3
    assert report.usage.output_tokens == 2 * MAX
    assert report.loops[0].turns[0].usage == report.usage
