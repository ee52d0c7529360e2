"""Every limit is checked up front, the same on both backends, and a refusal writes nothing.

Regression tests for issue 10: lone surrogates (defect 2), integers out of range (4),
deep JSON (5), overlay names (7), limits that differed by backend (8) and an unnamed NaN
(12). Each refusal is a `ValueError` (a `pydantic.ValidationError` from a model, which
names the field) and leaves the database exactly as it was.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast

import pytest
from pydantic import ValidationError

from sessionstore import (
    AssistantMessage,
    CompactionBlock,
    CompactionEnded,
    CustomMessage,
    Message,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.models import (
    MAX_JSON_DEPTH,
    CompactedSection,
    ReplacementMessage,
)
from tests.dump import dump
from tests.factories import conversation

SURROGATE = "\ud800"
TOO_BIG = 2**63


def _raw(message: dict[str, Any]) -> Message:
    """A message as a dict: `append_messages` validates it (as it does for JSON input)."""
    return cast(Message, message)


def _deep(levels: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(levels):
        value = {"a": value}
    return value


async def _seeded(store: SessionStore) -> str:
    session = await store.create_session(app_name="app", user_id="ada", title="kept")
    await store.append_messages(session.id, conversation(turns=3))
    return session.id


async def _refused_unchanged(
    store: SessionStore, call: Callable[[], Awaitable[object]], *, names: str
) -> None:
    """`call` raises a ValueError whose text names `names`, and changes no row."""
    before = await dump(store)
    with pytest.raises(ValueError, match=names):
        await call()
    assert await dump(store) == before


# ── defect 2: lone surrogates ──────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: UserMessage(content=f"a{SURROGATE}b"), "text"),
        (lambda: UserMessage(content="a", name=SURROGATE), "name"),
        (lambda: ToolCall(id=SURROGATE, name="n"), "id"),
        (lambda: ToolCall(id="c", name=SURROGATE), "name"),
        (lambda: ToolCall(id="c", name="n", arguments=f'{{"x": "{SURROGATE}"}}'), "arguments"),
        (lambda: ToolCall(id="c", name="n", arguments={"x": SURROGATE}), "arguments"),
        (lambda: ToolResultMessage(tool_call_id="c", tool_name=SURROGATE), "tool_name"),
        (lambda: CustomMessage(custom_type="t", data={SURROGATE: 1}), "data"),
        (lambda: CustomMessage(custom_type="t", data=[1, SURROGATE]), "data"),
        (lambda: UserMessage(content="a", extra={"openai": {"k": SURROGATE}}), "extra"),
        (lambda: UserMessage(content="a", client_id=SURROGATE), "client_id"),
        (lambda: CustomMessage(custom_type=SURROGATE), "custom_type"),
        (lambda: AssistantMessage(content="a", model=SURROGATE), "model"),
        (
            lambda: ToolResultMessage(
                tool_call_id="c", content=[{"type": "text", "text": SURROGATE}]
            ),
            "text",
        ),
        (lambda: CompactionBlock(config={"k": SURROGATE}), "config"),
        (lambda: CompactionBlock(strategy=SURROGATE), "strategy"),
    ],
)
def test_a_model_refuses_a_lone_surrogate_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(ValidationError, match=field) as caught:
        build()
    # our check says "lone surrogate"; pydantic-core's own (plain text) "unicode string"
    assert re.search("surrogate|unicode string", str(caught.value))


async def test_a_message_with_a_lone_surrogate_is_refused_and_nothing_is_written(
    store: SessionStore,
) -> None:
    sid = await _seeded(store)
    await _refused_unchanged(
        store,
        lambda: store.append_messages(sid, [_raw({"kind": "user", "content": f"x{SURROGATE}"})]),
        names="text",
    )


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"title": SURROGATE}, "title"),
        ({"app_name": SURROGATE}, "app_name"),
        ({"user_id": SURROGATE}, "user_id"),
        ({"session_id": SURROGATE}, "session_id"),
        ({"metadata": {"k": SURROGATE}}, "metadata"),
        ({"metadata": {SURROGATE: "v"}}, "metadata"),
    ],
)
async def test_a_session_with_a_lone_surrogate_is_refused_naming_the_field(
    store: SessionStore, arguments: dict[str, Any], field: str
) -> None:
    await _seeded(store)
    values = {"app_name": "app", "user_id": "ada", **arguments}
    await _refused_unchanged(store, lambda: store.create_session(**values), names=field)
    await _refused_unchanged(
        store,
        lambda: store.import_session([[UserMessage(content="hi")]], **values),
        names=field,
    )


async def test_event_details_with_a_lone_surrogate_are_refused(store: SessionStore) -> None:
    sid = await _seeded(store)
    await _refused_unchanged(
        store,
        lambda: store.record_compaction_event(
            sid, event="started", tokens_before=1, details={"k": SURROGATE}
        ),
        names="details",
    )


async def test_a_lookup_by_text_that_is_not_unicode_is_a_bad_argument(
    store: SessionStore,
) -> None:
    sid = await _seeded(store)
    with pytest.raises(ValueError, match="session_id"):
        await store.get_session(SURROGATE)
    with pytest.raises(ValueError, match="session_id"):
        await store.append_messages(SURROGATE, [UserMessage(content="x")])
    with pytest.raises(ValueError, match="app_name"):
        store.for_tenant(SURROGATE, "ada")
    with pytest.raises(ValueError, match="app_name"):
        await store.list_sessions(app_name=SURROGATE)
    assert (await store.get_session(sid)).title == "kept"


# ── defect 4: integers out of range ────────────────────────────────────────────


async def test_ids_out_of_range_are_bad_arguments_on_every_backend(store: SessionStore) -> None:
    sid = await _seeded(store)
    calls: list[tuple[str, Callable[[], Awaitable[object]]]] = [
        ("loop_id", lambda: store.get_loop(sid, TOO_BIG)),
        ("loop_id", lambda: store.get_messages(sid, TOO_BIG)),
        ("loop_id", lambda: store.get_history(sid, loop_id=TOO_BIG)),
        ("message_ids", lambda: store.get_messages_by_id(sid, [1, TOO_BIG])),
        ("message_ids", lambda: store.get_messages_by_id(sid, [-TOO_BIG - 1])),
        ("loop_id", lambda: store.append_messages(sid, conversation(1), loop_id=TOO_BIG)),
        ("parent_loop_id", lambda: store.start_loop(sid, parent_loop_id=TOO_BIG)),
        ("replacement_id", lambda: store.get_replacement_message(sid, TOO_BIG)),
        (
            "tokens_before",
            lambda: store.record_compaction_event(sid, event="started", tokens_before=TOO_BIG),
        ),
        (
            "tokens_before",
            lambda: store.record_compaction_event(sid, event="started", tokens_before=-1),
        ),
        (
            "tokens_after",
            lambda: store.record_compaction_event(
                sid, event="ended", tokens_before=1, tokens_after=TOO_BIG
            ),
        ),
        (
            "duration_ms",
            lambda: store.record_compaction_event(
                sid, event="ended", tokens_before=1, duration_ms=math.nan
            ),
        ),
        (
            "loop_id",
            lambda: store.record_compaction_event(
                sid, event="started", tokens_before=1, loop_id=TOO_BIG
            ),
        ),
        (
            "block_id",
            lambda: store.record_compaction_event(
                sid, event="started", tokens_before=1, block_id=TOO_BIG
            ),
        ),
        ("generation", lambda: store.get_block(sid, 1, generation=2**31)),
        ("loop_id", lambda: store.get_block(sid, TOO_BIG)),
        ("loop_id", lambda: store.block_history(sid, TOO_BIG)),
        ("loop_id", lambda: store.switch_loop(sid, TOO_BIG)),
        ("loop_id", lambda: store.close_loop(sid, TOO_BIG)),
        ("as_of", lambda: store.read_context(sid, budget=1000, as_of=2**31)),
        ("as_of", lambda: store.read_context(sid, budget=1000, as_of=TOO_BIG)),
        ("last", lambda: store.get_messages(sid, last=TOO_BIG)),
        ("limit", lambda: store.active_chain(sid, limit=TOO_BIG)),
        ("expected_version", lambda: store.start_loop(sid, expected_version=TOO_BIG)),
    ]
    for name, call in calls:
        try:
            await _refused_unchanged(store, call, names=name)
        except BaseException as exc:
            raise AssertionError(f"the call naming {name}") from exc


async def test_a_generation_as_of_that_no_block_has_answers_alike(store: SessionStore) -> None:
    """In range, a generation the loop lacks is not found on both backends."""
    sid = await _seeded(store)
    from sessionstore.errors import BlockNotFoundError

    loop = (await store.active_chain(sid))[-1]
    await store.write_block(
        sid, loop.id, CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0))
    )
    with pytest.raises(BlockNotFoundError):
        await store.read_context(sid, budget=1000, as_of=2**31 - 1)


async def test_counts_in_a_block_out_of_range_are_refused(store: SessionStore) -> None:
    sid = await _seeded(store)
    loop = (await store.active_chain(sid))[-1]
    stored = await store.get_messages(sid)
    with pytest.raises(ValidationError, match="token_count"):
        ReplacementMessage(message=UserMessage(content="s"), covers=[1], token_count=2**31)
    at_limit = ReplacementMessage(
        message=UserMessage(content="s"), covers=[stored[0].id], token_count=2**31 - 1
    )
    section = CompactedSection(range=TurnRange(start_turn=0, end_turn=0), messages=[at_limit])
    written = await store.write_block(sid, loop.id, CompactionBlock(keep_compacted=section))
    assert written.keep_compacted is not None
    assert written.keep_compacted.messages[0].token_count == 2**31 - 1
    with pytest.raises(ValidationError, match="end_turn"):
        TurnRange(start_turn=0, end_turn=2**31)
    with pytest.raises(ValidationError, match="tokens_before"):
        CompactionBlock(tokens_before=TOO_BIG)
    with pytest.raises(ValidationError, match="covers"):
        ReplacementMessage(message=UserMessage(content="s"), covers=[TOO_BIG])


# ── defect 5: deep JSON ────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ToolCall(id="c", name="n", arguments=_deep(1000)), "arguments"),
        (lambda: ToolCall(id="c", name="n", arguments="[" * 1000 + "]" * 1000), "arguments"),
        (lambda: CustomMessage(custom_type="t", data=_deep(1000)), "data"),
        (lambda: UserMessage(content="a", extra={"x": _deep(1000)}), "extra"),
        (lambda: CompactionBlock(config=_deep(1000)), "config"),
    ],
)
def test_json_deeper_than_the_limit_is_refused_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(ValidationError, match=field) as caught:
        build()
    assert f"deeper than {MAX_JSON_DEPTH}" in str(caught.value)


def test_json_at_the_depth_limit_is_kept() -> None:
    data = _deep(MAX_JSON_DEPTH - 1, leaf=[])
    assert CustomMessage(custom_type="t", data=data).data == data
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert ToolCall(id="c", name="n", arguments=text).arguments == text
    quoted = '{"a": "' + "[" * 1000 + '"}'  # brackets inside a string are text
    assert ToolCall(id="c", name="n", arguments=quoted).arguments == quoted


async def test_deep_json_is_refused_before_anything_is_written(store: SessionStore) -> None:
    sid = await _seeded(store)
    await _refused_unchanged(
        store,
        lambda: store.create_session(app_name="a", user_id="u", metadata=_deep(1000)),
        names="metadata",
    )
    await _refused_unchanged(
        store,
        lambda: store.record_compaction_event(
            sid, event="started", tokens_before=1, details=_deep(MAX_JSON_DEPTH + 1)
        ),
        names="details",
    )
    ended = CompactionEnded(
        session_id=sid,
        current_loop_id=1,
        loop_ids=[],
        tokens_before=1,
        tokens_after=1,
        blocks=[],
        duration_ms=1.0,
        details={"x": _deep(1000)},
    )
    await _refused_unchanged(
        store, lambda: store.write_blocks(sid, [], events=[ended]), names="details"
    )
    await _refused_unchanged(
        store,
        lambda: store.append_messages(
            sid,
            [
                _raw(
                    {
                        "kind": "assistant",
                        "content": [
                            {"type": "tool_call", "id": "c", "name": "n", "arguments": _deep(1000)}
                        ],
                    }
                )
            ],
        ),
        names="arguments",
    )


# ── defect 7: overlay names ────────────────────────────────────────────────────


@pytest.mark.parametrize("name", ["", "x" * 65, "a b", "a/b", SURROGATE, "é", "-lead"])
async def test_an_invalid_overlay_name_is_refused_everywhere(
    store: SessionStore, name: str
) -> None:
    sid = await _seeded(store)
    loop = (await store.active_chain(sid))[-1]
    with pytest.raises(ValidationError, match="overlay"):
        CompactionBlock(overlay=name)
    block = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0))
    bypass = block.model_copy(update={"overlay": name})  # model_copy does not validate
    await _refused_unchanged(
        store, lambda: store.write_block(sid, loop.id, bypass), names="overlay"
    )
    for call in (
        lambda: store.get_block(sid, loop.id, overlay=name),
        lambda: store.block_history(sid, loop.id, overlay=name),
        lambda: store.chain_blocks(sid, overlay=name),
        lambda: store.read_context(sid, budget=1000, overlay=name),
        lambda: store.get_digest(sid, overlay=name),
    ):
        await _refused_unchanged(store, call, names="overlay")


@pytest.mark.parametrize("name", ["default", "cheap", "v2.summary", "team:a_b-c", "x" * 64])
def test_valid_overlay_names(name: str) -> None:
    assert CompactionBlock(overlay=name).overlay == name


# ── defect 8: the same limits on both backends ─────────────────────────────────


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"title": "t" * 513}, "title"),
        ({"app_name": "a" * 129}, "app_name"),
        ({"user_id": "u" * 129}, "user_id"),
        ({"session_id": "s" * 129}, "session_id"),
        ({"metadata": {"x": math.nan}}, "metadata"),
        ({"metadata": {"x": [math.inf]}}, "metadata"),
        ({"metadata": {"x": -math.inf}}, "metadata"),
    ],
)
async def test_session_limits_are_checked_up_front(
    store: SessionStore, arguments: dict[str, Any], field: str
) -> None:
    await _seeded(store)
    values = {"app_name": "app", "user_id": "ada", **arguments}
    await _refused_unchanged(store, lambda: store.create_session(**values), names=field)


async def test_session_values_at_the_limits_are_kept(store: SessionStore) -> None:
    session = await store.create_session(
        session_id="s" * 128, app_name="a" * 128, user_id="u" * 128, title="t" * 512
    )
    assert await store.get_session(session.id) == session


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ToolCall(id="i" * 256, name="n"), "id"),
        (lambda: ToolCall(id="i", name="n" * 256), "name"),
        (lambda: ToolResultMessage(tool_call_id="i" * 256), "tool_call_id"),
        (lambda: ToolResultMessage(tool_call_id="i", tool_name="n" * 256), "tool_name"),
        (lambda: CompactionBlock(strategy="s" * 129), "strategy"),
        (lambda: CompactionBlock(config={"x": math.nan}), "config"),
        (lambda: CompactionBlock(config={"x": math.inf}), "config"),
        (lambda: UserMessage(content="a", extra={"x": math.nan}), "extra"),
        (lambda: ToolCall(id="c", name="n", arguments={"x": math.nan}), "arguments"),
    ],
)
def test_message_and_block_limits_name_the_field(build: Callable[[], object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        build()


async def test_tool_ids_over_the_limit_write_nothing(store: SessionStore) -> None:
    sid = await _seeded(store)
    too_long = {"kind": "tool_result", "tool_call_id": "i" * 256, "tool_name": "n"}
    await _refused_unchanged(
        store, lambda: store.append_messages(sid, [_raw(too_long)]), names="tool_call_id"
    )
    at_limit: list[Message] = [
        AssistantMessage(content=[ToolCall(id="i" * 255, name="n" * 255)]),
        ToolResultMessage(tool_call_id="i" * 255, tool_name="n" * 255, content="ok"),
    ]
    stored = await store.append_messages(sid, at_limit)
    assert [m.message for m in stored] == at_limit


# ── defect 12: NaN names its field ─────────────────────────────────────────────


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, {"x": [math.nan]}])
def test_custom_data_that_is_not_json_names_the_field(value: Any) -> None:
    with pytest.raises(ValidationError, match="data") as caught:
        CustomMessage(custom_type="t", data=value)
    assert "finite" in str(caught.value)


async def test_stored_values_read_back_exactly(store: SessionStore) -> None:
    """What is accepted comes back exactly, on both backends."""
    metadata = {"k": "v\u00e9\U0001f600", "n": [1, 2.5, -0.5, None, True], "d": _deep(10)}
    session = await store.create_session(
        app_name="app", user_id="ada", title="\u00e9\U0001f600", metadata=metadata
    )
    assert (await store.get_session(session.id)).metadata == metadata


@pytest.mark.parametrize(
    ("update", "field"),
    [
        ({"config": _deep(1000)}, "config"),
        ({"config": {"x": math.nan}}, "config"),
        ({"tokens_before": -1}, "tokens_before"),
        ({"tokens_after": TOO_BIG}, "tokens_after"),
        ({"strategy": "s" * 129}, "strategy"),
    ],
)
async def test_a_block_changed_with_model_copy_is_checked_before_it_is_written(
    store: SessionStore, update: dict[str, Any], field: str
) -> None:
    """`model_copy(update=...)` does not validate; the store checks the block again, so what
    it writes always reads back (found by tests/reliability/test_hostile_input.py)."""
    sid = await _seeded(store)
    loop = (await store.active_chain(sid))[-1]
    block = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0)).model_copy(
        update=update
    )
    await _refused_unchanged(store, lambda: store.write_block(sid, loop.id, block), names=field)
    assert await store.block_history(sid, loop.id) == []


class _HugeCounter:
    """A token counter that answers more than a token-count column holds."""

    def count_text(self, text: str) -> int:
        return 2**31

    def count_message(self, message: Message) -> int:
        return 2**31


async def test_a_token_count_past_its_column_is_refused(store: SessionStore) -> None:
    sid = await _seeded(store)
    huge = SessionStore(store.engine, token_counter=_HugeCounter())
    await _refused_unchanged(
        store, lambda: huge.append_messages(sid, conversation(1)), names="token_count"
    )
    loop = (await store.active_chain(sid))[-1]
    stored = await store.get_messages(sid)
    section = CompactedSection(
        range=TurnRange(start_turn=0, end_turn=0),
        messages=[ReplacementMessage(message=UserMessage(content="s"), covers=[stored[0].id])],
    )
    block = CompactionBlock(keep_compacted=section)
    await _refused_unchanged(
        store, lambda: huge.write_block(sid, loop.id, block), names="token_count"
    )
