"""The pydantic-ai history helpers against what an agent expects of a `message_history`.

pydantic-ai resumes an agent from `message_history=`, the list `result.all_messages()` holds:
every message of earlier runs, oldest first, each tool call followed by its return. Written
from that contract, on SQLite and PostgreSQL:

- a session never written has the empty history (the first run);
- with room, `build_message_history` gives back exactly what was saved, every message, in
  order (the issue's chat: 16 of 19 messages came back);
- saves append in order, and concurrent saves (first saves on a new session too) lose
  nothing and keep each run whole;
- without room, the history fits the window, pairs every call with its return, holds the
  latest request, and an agent resumes from it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sessionstore import SessionStore, TenantStore, message_tokens
from sessionstore.formats.pydantic_ai import from_pydantic_ai
from sessionstore.integrations.pydantic_ai import (
    build_message_history,
    history_engine,
    save_model_messages,
)


def tenant(store: SessionStore) -> TenantStore:
    return store.for_tenant("pai-conformance", "user-1")


def model(words: int = 4) -> FunctionModel:
    """Call `add(n, n)` for "task n", then answer with the sum it returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart):
            n = int(str(last.content).split()[1])
            return ModelResponse(
                parts=[ToolCallPart("add", {"a": n, "b": n}, tool_call_id=f"c{n}")]
            )
        assert isinstance(last, ToolReturnPart)
        return ModelResponse(parts=[TextPart(f"it is {last.content} " + "so " * words)])

    return FunctionModel(respond)


def agent(words: int = 4) -> Agent[None, str]:
    made = Agent(model(words), instructions="Add numbers.")

    @made.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return made


def dumped(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Messages as pydantic-ai's own JSON round trip sees them."""
    return ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(list(messages))
    )


def same(left: Sequence[ModelMessage], right: Sequence[ModelMessage]) -> bool:
    ours = ModelMessagesTypeAdapter.dump_python(list(left))
    return bool(ours == ModelMessagesTypeAdapter.dump_python(dumped(right)))


async def runs(store: SessionStore, count: int, session_id: str = "chat") -> list[ModelMessage]:
    """Run an agent `count` times, saving each run, resuming from the built history."""
    history: list[ModelMessage] = []
    result = None
    for n in range(count):
        result = await agent().run(f"task {n}", message_history=history)
        await save_model_messages(tenant(store), session_id, result.new_messages())
        history = await build_message_history(tenant(store), session_id, max_context_tokens=128_000)
    assert result is not None
    return result.all_messages()


def paired(messages: Sequence[ModelMessage]) -> bool:
    calls = [
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    ]
    returns = [
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    return sorted(calls) == sorted(returns)


async def test_a_session_never_written_has_the_empty_history(store: SessionStore) -> None:
    """Issue 19, item 5: the first call raised SessionNotFoundError."""
    history = await build_message_history(tenant(store), "new", max_context_tokens=10_000)
    assert history == []
    result = await agent().run("task 1", message_history=history)
    assert result.output.startswith("it is 2")


async def test_with_room_every_message_comes_back_in_order(store: SessionStore) -> None:
    """Defect 1: 16 of 19 messages came back (the newest four runs)."""
    everything = await runs(store, 6)
    assert len(everything) == 6 * 4
    tokens = sum(message_tokens(m) for m in from_pydantic_ai(everything))
    assert tokens < 2_000

    history = await build_message_history(tenant(store), "chat", max_context_tokens=128_000)

    assert same(history, everything)
    assert await tenant(store).list_compaction_events("chat") == []


async def test_saves_append_in_order(store: SessionStore) -> None:
    first = (await agent().run("task 1")).new_messages()
    second = (await agent().run("task 2", message_history=first)).new_messages()
    await save_model_messages(tenant(store), "chat", first[:2])
    assert await save_model_messages(tenant(store), "chat", []) == []
    await save_model_messages(tenant(store), "chat", first[2:])
    await save_model_messages(tenant(store), "chat", second)
    history = await build_message_history(tenant(store), "chat", max_context_tokens=128_000)
    assert same(history, [*first, *second])


@pytest.mark.parametrize("fresh", [True, False], ids=["first-saves", "later-saves"])
async def test_concurrent_saves_lose_nothing_and_keep_each_run_whole(
    store: SessionStore, fresh: bool
) -> None:
    if not fresh:
        await save_model_messages(
            tenant(store), "chat", (await agent().run("task 0")).new_messages()
        )
    batches = [(await agent().run(f"task {n}")).new_messages() for n in range(1, 7)]

    await asyncio.gather(*(save_model_messages(tenant(store), "chat", b) for b in batches))

    history = await build_message_history(tenant(store), "chat", max_context_tokens=128_000)
    assert len(history) == 4 * 6 + (0 if fresh else 4)
    assert paired(history)
    plain = ModelMessagesTypeAdapter.dump_python(history)
    for batch in batches:
        want = ModelMessagesTypeAdapter.dump_python(dumped(batch))
        start = plain.index(want[0])
        assert plain[start : start + len(want)] == want
    assert len((await tenant(store).list_sessions()).items) == 1


async def test_without_room_the_history_fits_pairs_and_keeps_the_latest_request(
    store: SessionStore,
) -> None:
    tenant_store = tenant(store)
    engine = history_engine(tenant_store, "chat", max_context_tokens=1_500)
    history: list[ModelMessage] = []
    for n in range(10):
        result = await agent(words=300).run(f"task {n}", message_history=history)
        await save_model_messages(tenant_store, "chat", result.new_messages())
        history = await build_message_history(
            tenant_store, "chat", max_context_tokens=1_500, engine=engine
        )
        assert sum(message_tokens(m) for m in from_pydantic_ai(history)) <= 1_500
        assert paired(history)
        requests = [
            p.content
            for m in history
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ]
        assert requests[-1] == f"task {n}"
    # The engine compacted on its own; an agent resumes from the compacted history.
    assert await tenant_store.list_compaction_events("chat")
    resumed = await agent().run("task 10", message_history=history)
    assert resumed.output.startswith("it is 20")
