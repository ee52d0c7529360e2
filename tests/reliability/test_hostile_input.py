"""Hostile input, on every backend: a typed error and nothing written, or stored verbatim.

Hypothesis throws what an attacker (or a buggy agent) would at the public API: huge and
deeply nested values, NUL characters, lone surrogates, integers out of every column's
range, SQL-looking ids, malformed JSONL lines and bad configurations. Every call must end
one of two ways:

- refused with a typed error (`ValueError` / `TypeError` for bad input, a
  `SessionStoreError` for an outcome) and the database exactly as before (a dump of every
  table is compared), or
- accepted, and what is read back is exactly what was written (the content hash of each
  message read back is the one stored).

A `StorageError` is never an acceptable answer to bad input (it means a backend refused
what the checks let through). NUL (U+0000) is stored on both backends (issue 10, defect 3).

Three surfaces without a database (issue 17): trajectory lines for `trajectories compress`
(a numbered `TrajectoryLineError`, or a line written back exactly; lines nested up to 50,000
levels deep included), a summarizer server that lies (a `SummarizerError` or a digest within
its budget, and the API key in neither), and stored text on its way to a terminal (printable,
and exact in JSON).

As in `tests/property/`, the `store` fixture is shared by the examples of a test (each
example starts from an empty database), examples are derandomized, so CI runs the same
ones every time, and failures are reported as drawn, without shrinking.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from typing import Any, cast
from urllib.parse import quote, quote_plus

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from sessionstore import (
    CompactionBlock,
    CompactionConfig,
    ContextConfig,
    CustomMessage,
    Message,
    SessionStore,
    SessionStoreError,
    TurnRange,
    compact_session_loops,
    import_jsonl,
)
from sessionstore._tokens import estimate_tokens
from sessionstore._trajectories import (
    TrajectoryResult,
    compress_trajectory,
    compress_trajectory_lines,
    record_line,
)
from sessionstore.cli._render import json_text, printable
from sessionstore.errors import (
    ImportLineError,
    StorageError,
    SummarizerError,
    TrajectoryLineError,
)
from sessionstore.models import (
    MAX_JSON_DEPTH,
    MESSAGE_ADAPTER,
    canonical_payload,
    content_hash,
    message_payload,
)
from sessionstore.summarizers import OpenAICompatibleSummarizer, SummaryRequest
from tests.dump import dump, empty
from tests.factories import conversation

HOSTILE = settings(
    max_examples=120,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
"""The database tests draw 120 cases each (fewer for the costly ones): 550 per backend;
the model test draws 2,500 without a database, the trajectory and summarizer tests 400 each,
the terminal test 2,000. About 6,400 cases in all, in about a minute and a half."""


# ── strategies ─────────────────────────────────────────────────────────────────

SPECIAL_TEXT = [
    "",
    "\x00",
    "nul\x00inside",
    "\ud800",
    "a\udfffb",
    "\U0001f600\u202e\u200b",
    "'; DROP TABLE sessionstore_sessions; --",
    "1 OR 1=1",
    '" OR ""="',
    "%_\\",
    "NaN",
    "default",
    "../../etc/passwd",
]
LENGTHS = [63, 64, 65, 127, 128, 129, 254, 255, 256, 511, 512, 513, 100_000]

texts = st.one_of(
    st.text(max_size=30),
    st.text(st.characters(categories=["Cs", "Cc", "Zs", "L"]), max_size=30),
    st.sampled_from(SPECIAL_TEXT),
    st.sampled_from(LENGTHS).map(lambda n: "x" * n),
)
BOUNDARY_INTS = [0, -1, 1, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64]
ints = st.one_of(st.integers(-(2**70), 2**70), st.sampled_from(BOUNDARY_INTS))


def _deep(levels: int, kind: str) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value] if kind == "list" else {"k": value}
    return value


deep_values = st.builds(
    _deep,
    st.sampled_from([MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 300, 1200]),
    st.sampled_from(["list", "dict"]),
)


def json_values(store: SessionStore | None) -> st.SearchStrategy[Any]:
    # Every float, on every backend: PostgreSQL keeps them exactly too (issue 17, item 13).
    floats = st.floats(allow_nan=True, allow_infinity=True)
    leaves = st.one_of(st.none(), st.booleans(), ints, floats, texts)
    nested = st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)
        ),
        max_leaves=12,
    )
    return st.one_of(nested, deep_values)


def json_objects(store: SessionStore | None) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(texts, json_values(store), max_size=4)


# ── how every call must end ────────────────────────────────────────────────────


def _has_nul(value: Any) -> bool:
    """Whether `value` holds a NUL, raw or as a JSON escape (in a line to import)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        return "\x00" in value or "\\u0000" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


async def _call(
    store: SessionStore, call: Callable[[], Awaitable[Any]], given_input: Any
) -> tuple[bool, Any]:
    """Run `call`: return (True, result), or (False, error) after checking the refusal."""
    before = await dump(store)
    try:
        return True, await call()
    except (ValueError, TypeError, SessionStoreError) as error:
        refused = error
    if isinstance(refused, StorageError):
        pytest.fail(f"a StorageError for bad input: {refused}")
    assert str(refused), "a refusal says what is wrong"
    assert await dump(store) == before, f"refused ({refused!r}) but the database changed"
    return False, refused


async def _assert_stored_exactly(store: SessionStore, session_id: str) -> None:
    """Every message of the session reads back with the content hash it was stored with."""
    for loop in await store.list_loops(session_id):
        for stored in await store.get_messages(session_id, loop.id):
            assert content_hash(message_payload(stored.message)) == stored.content_hash


# ── sessions ───────────────────────────────────────────────────────────────────


@HOSTILE
@given(data=st.data())
async def test_a_hostile_session_is_refused_or_stored_verbatim(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    values: dict[str, Any] = {
        "session_id": data.draw(st.none() | texts, "session_id"),
        "app_name": data.draw(texts, "app_name"),
        "user_id": data.draw(texts, "user_id"),
        "title": data.draw(st.none() | texts, "title"),
        "metadata": data.draw(json_objects(store), "metadata"),
    }
    done, session = await _call(store, lambda: store.create_session(**values), values)
    if not done:
        return
    read = await store.get_session(session.id)
    assert read == session
    assert (read.title, read.metadata) == (values["title"], values["metadata"])
    tenant = store.for_tenant(values["app_name"], values["user_id"])
    assert session.id in [s.id for s in (await tenant.list_sessions(limit=1000)).items]
    json.dumps(read.model_dump(mode="json"), allow_nan=False).encode()  # prints cleanly


# ── messages ───────────────────────────────────────────────────────────────────


def message_dicts(store: SessionStore | None) -> st.SearchStrategy[dict[str, Any]]:
    tool_call = st.fixed_dictionaries(
        {
            "type": st.just("tool_call"),
            "id": texts,
            "name": texts,
            "arguments": st.one_of(texts, json_objects(store), deep_values.map(json.dumps)),
        }
    )
    text_block = st.fixed_dictionaries({"type": st.just("text"), "text": texts})
    extra = st.one_of(st.just({}), json_objects(store))
    return st.one_of(
        st.fixed_dictionaries({"kind": st.just("user"), "content": texts, "extra": extra}),
        st.fixed_dictionaries(
            {
                "kind": st.just("assistant"),
                "content": st.lists(st.one_of(text_block, tool_call), max_size=3),
                "model": st.none() | texts,
            }
        ),
        st.fixed_dictionaries(
            {
                "kind": st.just("tool_result"),
                "tool_call_id": texts,
                "tool_name": texts,
                "content": texts,
            }
        ),
        st.fixed_dictionaries(
            {"kind": st.just("custom"), "custom_type": texts, "data": json_values(store)}
        ),
        st.fixed_dictionaries(
            {"kind": st.just("bash_execution"), "command": texts, "exit_code": st.none() | ints}
        ),
        st.fixed_dictionaries(
            {"kind": st.just("user"), "content": st.just("x"), "client_id": texts}
        ),
    )


@settings(HOSTILE, max_examples=100)
@given(data=st.data())
async def test_hostile_messages_are_refused_or_stored_verbatim(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    session = await store.create_session(app_name="hostile", user_id="u")
    drawn = data.draw(st.lists(message_dicts(store), min_size=1, max_size=3), "batch")
    batch = cast(list[Message], drawn)  # dicts: append_messages validates them
    done, stored = await _call(store, lambda: store.append_messages(session.id, batch), batch)
    if not done:
        return
    read = {m.id: m.message for m in await store.get_messages(session.id)}
    assert read == {m.id: m.message for m in stored}  # a repeated client_id is stored once
    await _assert_stored_exactly(store, session.id)


@settings(HOSTILE, max_examples=2500)
@given(message=message_dicts(None))
def test_a_hostile_message_is_a_typed_error_or_round_trips(message: dict[str, Any]) -> None:
    """Without a database: the model refuses it naming a field, or its JSON reads back equal."""
    try:
        validated = MESSAGE_ADAPTER.validate_python(message)
    except ValidationError as error:
        refused: ValidationError | None = error
    else:
        refused = None
    if refused is not None:
        assert refused.errors()[0]["loc"], "the refusal names the field"
        return
    payload = message_payload(validated)
    text = canonical_payload(payload)  # valid UTF-8 JSON: no NaN, no surrogate
    again = MESSAGE_ADAPTER.validate_json(validated.model_dump_json())
    assert again == validated
    assert canonical_payload(message_payload(again)) == text


# ── ids and numbers ────────────────────────────────────────────────────────────

ids = st.one_of(ints, st.sampled_from(["1", "1 OR 1=1", None, 1.5, True]))


@HOSTILE
@given(data=st.data())
async def test_hostile_ids_and_numbers_are_refused_or_answered(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    session = await store.create_session(app_name="hostile", user_id="u")
    await store.append_messages(session.id, conversation(turns=2))
    sid = data.draw(st.one_of(st.just(session.id), texts), "session_id")
    number: Any = data.draw(ids, "number")  # of any type: that is the point
    overlay = data.draw(st.one_of(st.just("default"), texts), "overlay")
    calls: list[Callable[[], Awaitable[Any]]] = [
        lambda: store.get_loop(sid, number),
        lambda: store.get_messages(sid, number),
        lambda: store.get_messages(sid, last=number),
        lambda: store.get_messages_by_id(sid, [number]),
        lambda: store.get_history(sid, loop_id=number),
        lambda: store.start_loop(sid, parent_loop_id=number),
        lambda: store.switch_loop(sid, number),
        lambda: store.close_loop(sid, number),
        lambda: store.active_chain(sid, limit=number),
        lambda: store.get_replacement_message(sid, number),
        lambda: store.get_block(sid, number, overlay=overlay),
        lambda: store.get_block(sid, 1, generation=number),
        lambda: store.block_history(sid, number, overlay=overlay),
        lambda: store.read_context(sid, budget=1000, as_of=number, overlay=overlay),
        lambda: store.get_digest(sid, loop_id=number, overlay=overlay),
        lambda: store.append_messages(sid, conversation(1), loop_id=number),
        lambda: store.append_messages(sid, conversation(1), expected_version=number),
        lambda: store.record_compaction_event(sid, event="started", tokens_before=number),
        lambda: store.record_compaction_event(
            sid, event="ended", tokens_before=1, loop_id=number, tokens_after=number
        ),
    ]
    call = calls[data.draw(st.integers(0, len(calls) - 1), "call")]
    await _call(store, call, [sid, number, overlay])


# ── compaction events and blocks ───────────────────────────────────────────────


@settings(HOSTILE, max_examples=50)
@given(data=st.data())
async def test_hostile_events_and_blocks_are_refused_or_stored_verbatim(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    session = await store.create_session(app_name="hostile", user_id="u")
    (first, *_) = await store.append_messages(session.id, conversation(turns=2))
    details = data.draw(json_objects(store), "details")
    duration = data.draw(st.none() | st.floats(allow_nan=True, allow_infinity=True), "duration")
    done, event = await _call(
        store,
        lambda: store.record_compaction_event(
            session.id, event="ended", tokens_before=1, duration_ms=duration, details=details
        ),
        details,
    )
    if done:
        assert (await store.list_compaction_events(session.id)) == [event]
        assert event.details == details

    fields = {
        "overlay": data.draw(st.one_of(st.just("default"), texts), "overlay"),
        "strategy": data.draw(texts, "strategy"),
        "config": data.draw(json_objects(store), "config"),
        "tokens_before": data.draw(ints, "tokens_before"),
    }
    try:
        block = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0), **fields)
    except ValueError:
        block = CompactionBlock(keep_first=TurnRange(start_turn=0, end_turn=0)).model_copy(
            update=fields  # what a careless strategy could hand the store
        )
    done, written = await _call(
        store, lambda: store.write_block(session.id, first.loop_id, block), fields
    )
    if done:
        assert await store.get_block(session.id, first.loop_id, overlay=block.overlay) == written
        assert (written.config, written.strategy) == (block.config, block.strategy)


# ── malformed JSONL ────────────────────────────────────────────────────────────


def jsonl_lines(store: SessionStore) -> st.SearchStrategy[str | bytes]:
    conversation_objects = st.fixed_dictionaries(
        {
            "id": st.one_of(texts, ints, st.none()),
            "messages": st.lists(
                st.fixed_dictionaries(
                    {
                        "role": st.sampled_from(["user", "assistant", "tool", "system", "robot"]),
                        "content": st.one_of(texts, st.none(), json_values(store)),
                    }
                ),
                max_size=3,
            ),
        },
        optional={"title": st.one_of(texts, ints), "metadata": json_values(store)},
    )
    encoded = conversation_objects.map(
        lambda obj: json.dumps(obj, ensure_ascii=True, allow_nan=True)
    )
    return st.one_of(
        encoded,
        encoded.map(lambda line: line[: len(line) // 2]),  # truncated
        st.binary(max_size=60),
        st.text(max_size=60),
        st.sampled_from(
            [
                "[" * 100_000 + "]" * 100_000,
                '{"id": "x", "messages": ' + "[" * 5_000 + "]" * 5_000 + "}",
                '{"id": "x", "messages": [], "metadata": {"a": NaN}}',
                '{"id": "\\ud800", "messages": []}',
                b'{"id": "\xff\xfe", "messages": []}',
                '{"id": "x\\u0000", "messages": [{"role": "user", "content": "a\\u0000"}]}',
            ]
        ),
    )


@HOSTILE
@given(data=st.data())
async def test_a_malformed_jsonl_line_is_a_numbered_error_or_imported_verbatim(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    line = data.draw(jsonl_lines(store), "line")
    done, outcome = await _call(
        store, lambda: import_jsonl(store, [line], app_name="hostile", user_id="u"), line
    )
    if not done:
        assert isinstance(outcome, ImportLineError)
        assert outcome.line_number == 1
        assert not isinstance(outcome.__cause__, StorageError), outcome
        return
    for session_id in outcome.imported:
        await store.get_session(session_id)
        await _assert_stored_exactly(store, session_id)


# ── bad configurations ─────────────────────────────────────────────────────────

config_values = st.one_of(
    ints, st.floats(allow_nan=True, allow_infinity=True), texts, st.none(), st.booleans()
)


@settings(HOSTILE, max_examples=40)
@given(data=st.data())
async def test_a_bad_configuration_is_refused_before_anything_is_written(
    store: SessionStore, data: st.DataObject
) -> None:
    await empty(store)  # each example starts empty, so the dumps stay small
    session = await store.create_session(app_name="hostile", user_id="u")
    await store.append_messages(session.id, conversation(turns=6))
    names = [*CompactionConfig.model_fields, *ContextConfig.model_fields, "unknown"]
    config = data.draw(st.dictionaries(st.sampled_from(names), config_values, max_size=3), "config")
    window = data.draw(st.one_of(ints, st.just(4000)), "window")
    overlay = data.draw(st.one_of(st.just("default"), texts), "overlay")
    await _call(
        store,
        lambda: compact_session_loops(
            store, session.id, config=config, max_context_tokens=window, overlay=overlay
        ),
        [config, overlay],
    )


@pytest.mark.parametrize("value", [1e300, 1e16, 1.2345678901234567e20, -0.0])
async def test_json_floats_read_back_exactly(store: SessionStore, value: float) -> None:
    """A float in JSON reads back as the same float, so its content hash still holds."""
    session = await store.create_session(app_name="a", user_id="u", metadata={"f": value})
    read = (await store.get_session(session.id)).metadata["f"]
    assert isinstance(read, float)
    assert math.copysign(1, read) == math.copysign(1, value)
    assert read == value
    (stored,) = await store.append_messages(
        session.id, [CustomMessage(custom_type="t", data=value)]
    )
    (back,) = await store.get_messages(session.id)
    assert content_hash(message_payload(back.message)) == stored.content_hash


# ── trajectories (issue 17) ────────────────────────────────────────────────────

KEY = "corp.gateway.7f3a19c2b8e4d6a0/K+q=="
"""An API key that looks like no provider's: only its value can find it."""
KEY_FORMS = [KEY, json.dumps(KEY)[1:-1], quote(KEY, safe=""), quote_plus(KEY)]


def _nested_text(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "1" + "}" * depth


deep_texts = st.builds(
    _nested_text,
    st.sampled_from([64, 900, 3_000, 10_000, 50_000]),
    st.sampled_from(["list", "obj"]),
)


def trajectory_lines() -> st.SearchStrategy[str | bytes]:
    sharegpt_turns = st.fixed_dictionaries(
        {
            "from": st.sampled_from(["system", "human", "gpt", "tool", "function_call", "robot"]),
            "value": st.one_of(
                texts,
                deep_texts.map(lambda deep: '<tool_call>{"name": "f", "arguments": ' + deep + "}"),
                json_values(None),
            ),
        }
    )
    openai_turns = st.fixed_dictionaries(
        {
            "role": st.sampled_from(["system", "user", "assistant", "tool", "robot"]),
            "content": st.one_of(texts, st.none(), json_values(None)),
        }
    )
    records = st.one_of(
        st.fixed_dictionaries({"conversations": st.lists(sharegpt_turns, max_size=8)}),
        st.fixed_dictionaries({"messages": st.lists(openai_turns, max_size=8)}),
        json_objects(None),
    ).flatmap(
        lambda record: st.fixed_dictionaries(
            {k: st.just(v) for k, v in record.items()},
            optional={"extra": json_values(None), "id": st.one_of(texts, ints)},
        )
    )
    encoded = records.map(lambda obj: json.dumps(obj, ensure_ascii=True, allow_nan=True))
    with_deep = st.tuples(encoded, deep_texts).map(
        lambda pair: pair[0][:-1] + (", " if len(pair[0]) > 2 else "") + '"deep": ' + pair[1] + "}"
    )
    return st.one_of(
        encoded,
        with_deep,
        encoded.map(lambda line: line[: len(line) // 2]),  # truncated
        deep_texts,
        st.binary(max_size=60),
        st.text(max_size=60),
    )


def _canonical(text: str | bytes) -> str:
    return json.dumps(json.loads(text), sort_keys=True, allow_nan=True)


@settings(HOSTILE, max_examples=400)
@given(lines=st.lists(trajectory_lines(), min_size=1, max_size=3))
async def test_a_hostile_trajectory_is_a_numbered_error_or_written_exactly(
    lines: list[str | bytes],
) -> None:
    """`trajectories compress`'s path: a typed error naming its line, or a line that reads
    back as the input (unchanged) or as a valid record in the input's form (compressed)."""
    results = []

    def compress(record: dict[str, Any]) -> Awaitable[TrajectoryResult]:
        return compress_trajectory(record, target_max_tokens=40, protect_last=1)

    refused: TrajectoryLineError | None = None
    try:
        async for number, result in compress_trajectory_lines(lines, compress, workers=2):
            results.append((number, result, record_line(number, result.record)))
    except TrajectoryLineError as error:
        refused = error
    if refused is not None:
        assert 1 <= refused.line_number <= len(lines)
        assert str(refused).startswith(f"line {refused.line_number}: ")
        return
    for number, result, text in results:
        line = lines[number - 1]
        written = json.loads(text)
        assert isinstance(written, dict)
        if not result.metrics.compressed:
            assert _canonical(text) == _canonical(line)


# ── the summarizer client (issue 17) ───────────────────────────────────────────

keyed_texts = st.one_of(texts, st.sampled_from(KEY_FORMS), st.sampled_from(KEY_FORMS).map("x".join))


def summarizer_answers() -> st.SearchStrategy[bytes]:
    messages = st.fixed_dictionaries(
        {"content": st.one_of(keyed_texts, json_values(None), st.lists(json_values(None)))},
        optional={"role": keyed_texts},
    )
    choices = st.one_of(
        json_values(None),
        st.lists(
            st.fixed_dictionaries(
                {"message": st.one_of(messages, json_values(None))},
                optional={"finish_reason": json_values(None)},
            ),
            max_size=2,
        ),
    )
    bodies = st.fixed_dictionaries(
        {},
        optional={
            "choices": choices,
            "model": st.one_of(keyed_texts, json_values(None)),
            "error": st.one_of(keyed_texts, st.fixed_dictionaries({"message": keyed_texts})),
            "detail": keyed_texts,
        },
    )
    encoded = st.one_of(bodies, json_values(None)).map(
        lambda body: json.dumps(body, allow_nan=True).encode()
    )
    return st.one_of(
        encoded,
        st.binary(max_size=80),
        st.sampled_from(KEY_FORMS).map(lambda key: f"<html>{key}</html>".encode()),
        deep_texts.map(str.encode),
        deep_texts.map(lambda deep: ('{"choices": ' + deep + "}").encode()),
        st.sampled_from([b"x" * (5 * 1024 * 1024), b'{"choices": "' + b"x" * 70_000 + b'"}']),
    )


@settings(HOSTILE, max_examples=400)
@given(
    answer=summarizer_answers(),
    status=st.sampled_from([200, 200, 200, 201, 400, 401, 403, 404, 422, 429, 500, 503]),
)
async def test_a_lying_summarizer_server_is_a_typed_error_or_a_clean_digest(
    answer: bytes, status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever a server answers: a `SummarizerError` or a digest within its budget, and the
    API key nowhere (not in the digest, the model name, the error or its args)."""
    monkeypatch.setenv("SESSIONSTORE_TEST_HOSTILE_KEY", KEY)

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=answer, headers={"Retry-After": "0"})

    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(reply)) as client,
        OpenAICompatibleSummarizer(
            "http://summarizer.invalid/v1",
            "m",
            api_key_env="SESSIONSTORE_TEST_HOSTILE_KEY",
            client=client,
            max_retries=1,
            backoff=0,
            max_response_bytes=64 * 1024,
        ) as summarizer,
    ):
        request = SummaryRequest(messages=conversation(turns=2), budget_tokens=200)
        try:
            summary = await summarizer.summarize(request)
        except SummarizerError as error:
            shown = [str(error), repr(error.args), str(error.url)]
        else:
            shown = []
    if shown:
        assert not [form for form in KEY_FORMS for text in shown if form in text], shown
        return
    assert 0 < estimate_tokens(summary.text) <= 200
    for form in KEY_FORMS:
        assert form not in summary.text
        assert form not in summary.model


# ── the terminal (issue 17) ────────────────────────────────────────────────────

UNPRINTABLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\u2028\u2029\ud800-\udfff]|\r(?!\n)"
)
"""What a terminal could obey: controls but tab, newline and a CRLF's carriage return."""

SURROGATE = re.compile("[\ud800-\udfff]")


@settings(HOSTILE, max_examples=2000)
@given(text=st.one_of(st.text(), texts, st.text(st.characters(categories=["Cc", "Cf", "Cs"]))))
def test_stored_text_reaches_a_terminal_printable_and_json_exact(text: str) -> None:
    shown = printable(text)
    assert UNPRINTABLE.search(shown) is None
    if UNPRINTABLE.search(text) is None:
        assert shown == text
    document = json_text(json.dumps({"text": text}, ensure_ascii=False))
    assert UNPRINTABLE.search(document.replace("\n", "")) is None
    if not SURROGATE.search(text):  # stored text has none (JSON joins two into a pair)
        assert json.loads(document) == {"text": text}
