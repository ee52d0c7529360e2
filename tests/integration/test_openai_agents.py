"""`SessionStoreSession` under the openai-agents SDK's real `Runner`, on SQLite and PostgreSQL.

The model is scripted: it implements the SDK's `Model` interface and answers with the
responses it was given, so a multi-turn tool-using run goes through the whole SDK without a
network. Skipped when the `openai-agents` extra is not installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, function_tool
from agents.agent_output import AgentOutputSchemaBase
from agents.handoffs import Handoff
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.memory import OpenAIResponsesCompactionSession, Session
from agents.model_settings import ModelSettings
from agents.models.interface import Model, ModelTracing
from agents.tool import Tool
from agents.tracing import set_tracing_disabled
from agents.usage import Usage
from openai.types.responses import (
    ResponseCodeInterpreterToolCall,
    ResponseCompactionItem,
    ResponseComputerToolCall,
    ResponseCustomToolCall,
    ResponseFileSearchToolCall,
    ResponseFunctionToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_computer_tool_call import ActionClick
from openai.types.responses.response_function_web_search import ActionSearch
from openai.types.responses.response_output_item import (
    ImageGenerationCall,
    LocalShellCall,
    LocalShellCallAction,
    McpApprovalRequest,
    McpCall,
    McpListTools,
)
from openai.types.responses.response_prompt_param import ResponsePromptParam
from openai.types.responses.response_reasoning_item import Content, Summary

from sessionstore import (
    CompactionConfig,
    ConfigurationError,
    CustomMessage,
    FormatError,
    SessionStore,
    TenantStore,
    ToolResultMessage,
    from_openai_responses,
    to_openai_responses,
)
from sessionstore.integrations.openai_agents import SessionStoreSession

set_tracing_disabled(True)


class ScriptedModel(Model):
    """Answers each call with the next scripted output and records what it was sent."""

    def __init__(self, script: Sequence[list[ResponseOutputItem]]) -> None:
        self.script = list(script)
        self.inputs: list[list[TResponseInputItem]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        assert isinstance(input, list)
        self.inputs.append(json.loads(json.dumps(input)))
        return ModelResponse(output=self.script.pop(0), usage=Usage(), response_id=None)

    def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model does not stream")


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def tool_turn(n: int, a: int, b: int) -> list[ResponseOutputItem]:
    return [
        ResponseReasoningItem(
            id=f"rs_{n}",
            type="reasoning",
            summary=[Summary(text=f"I should add {a} and {b}", type="summary_text")],
            encrypted_content=f"opaque-{n}",
        ),
        ResponseFunctionToolCall(
            id=f"fc_{n}",
            call_id=f"call_{n}",
            name="add",
            arguments=json.dumps({"a": a, "b": b}),
            type="function_call",
            status="completed",
        ),
    ]


def answer(n: int, text: str) -> list[ResponseOutputItem]:
    return [
        ResponseOutputMessage(
            id=f"msg_{n}",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
        )
    ]


Item = dict[str, Any]


def sdk(items: Sequence[Item]) -> list[TResponseInputItem]:
    """Plain dicts as the SDK's item type (a union of TypedDicts)."""
    return cast(list[TResponseInputItem], list(items))


def plain(items: Sequence[TResponseInputItem]) -> list[Item]:
    return [dict(item) for item in items]


async def read(session: SessionStoreSession, limit: int | None = None) -> list[Item]:
    return plain(await session.get_items(limit))


def dumped(items: Sequence[ResponseOutputItem]) -> list[Item]:
    return [item.model_dump(exclude_unset=True) for item in items]


def types(items: Sequence[Item] | Sequence[TResponseInputItem]) -> list[str]:
    return [str(dict(item).get("type", "message")) for item in items]


def tenant(store: SessionStore) -> TenantStore:
    return store.for_tenant("agents-app", "user-1")


async def test_it_is_a_session_of_the_sdk(store: SessionStore) -> None:
    session: Session = SessionStoreSession("s", tenant(store))
    assert isinstance(session, Session)
    assert session.session_id == "s"
    assert session.session_settings is not None


async def test_a_multi_turn_tool_run_end_to_end(store: SessionStore) -> None:
    model = ScriptedModel([tool_turn(1, 1, 2), answer(1, "3"), tool_turn(2, 3, 4), answer(2, "7")])
    agent = Agent(name="adder", instructions="Add.", model=model, tools=[add])
    session = SessionStoreSession("run-1", tenant(store))

    first = await Runner.run(agent, "add 1 and 2", session=session)
    second = await Runner.run(agent, "now 3 and 4", session=session)

    assert (first.final_output, second.final_output) == ("3", "7")
    items = await read(session)
    assert (
        types(items)
        == [
            "message",
            "reasoning",
            "function_call",
            "function_call_output",
            "message",
        ]
        * 2
    )
    # The second run's first model call was sent the whole first run, exactly as stored.
    assert model.inputs[2][:5] == items[:5]
    assert model.inputs[2][5] == {"content": "now 3 and 4", "role": "user"}
    # One loop per run, chained; the tool results know their tool.
    loops = await tenant(store).list_loops("run-1")
    assert [loop.parent_loop_id for loop in loops] == [None, loops[0].id]
    history = await tenant(store).get_history("run-1")
    names = {m.message.tool_name for m in history if isinstance(m.message, ToolResultMessage)}
    assert names == {"add"}
    # A fresh session object (a restarted process) resumes the same history.
    assert await read(SessionStoreSession("run-1", tenant(store))) == items


async def test_the_built_context_is_sent_within_the_budget(store: SessionStore) -> None:
    long = "word " * 400
    script: list[list[ResponseOutputItem]] = []
    for n in range(6):
        script += [tool_turn(n, n, n), answer(n, long)]
    model = ScriptedModel(script)
    agent = Agent(name="adder", model=model, tools=[add])
    session = SessionStoreSession(
        "ctx",
        tenant(store),
        max_context_tokens=2_000,
        compaction=CompactionConfig(keep_first_turns=1, keep_recent_turns=2),
    )
    for n in range(6):
        await Runner.run(agent, f"task {n}: {long}", session=session)

    sent = plain(model.inputs[-1])
    raw = await read(SessionStoreSession("ctx", tenant(store)))
    assert len(raw) == 6 * 5
    assert len(sent) < len(raw)
    assert sum(len(json.dumps(item)) for item in sent) < 4 * 2_000 * 1.5
    # The latest request and this run's tool call are there, verbatim.
    assert sent[-4] == {"content": f"task 5: {long}", "role": "user"}
    assert types(sent[-3:]) == ["reasoning", "function_call", "function_call_output"]
    check_paired(sent)
    # Compaction wrote overlays; the raw items are untouched.
    assert raw[0] == {"content": f"task 0: {long}", "role": "user"}
    assert await tenant(store).list_compaction_events("ctx")


async def test_short_runs_the_window_leaves_out_are_never_lost_from_the_context(
    store: SessionStore,
) -> None:
    """Runs too short to compact: the first compactions save nothing (anti-thrashing stops
    automatic ones), yet every run the window leaves out stays in the context, folded into
    the session digest (it vanished, no marker, no digest: the SDK's recommended mode)."""
    session = SessionStoreSession("short", tenant(store), max_context_tokens=1_500)
    runs = 25
    for run in range(runs):
        call = {"command": f"pytest tests/test_{run}.py"}
        await session.add_items(
            [{"role": "user", "content": f"Run {run}: fix bug B{run:03d} in module_{run}.py"}]
        )
        await session.add_items(
            [
                {
                    "type": "function_call",
                    "call_id": f"c{run}",
                    "name": "bash",
                    "arguments": json.dumps(call),
                },
                {
                    "type": "function_call_output",
                    "call_id": f"c{run}",
                    "output": f"FAILED tests/test_{run}.py - AssertionError B{run:03d}\n"
                    + "collected 1 item\n" * 20,
                },
                {"role": "assistant", "content": f"Fixed B{run:03d} in module_{run}.py."},
            ]
        )
        items = plain(await session.get_items())
        check_paired(items)
        text = json.dumps(items)
        # Each run so far is in the context: raw, or named in the digest of earlier runs.
        missing = [r for r in range(run + 1) if f"module_{r}.py" not in text]
        assert not missing, (run, missing)
    engine = session.engine
    assert engine is not None
    status = engine.get_status()
    assert status.thrashing  # automatic compaction of the loops stopped: they are too short
    events = await tenant(store).list_compaction_events("short")
    folds = [e for e in events if e.event == "ended" and e.details.get("digest_loops")]
    assert folds  # what kept them: folds into the session digest
    raw = await read(SessionStoreSession("short", tenant(store)))
    assert len(raw) == runs * 4  # raw is untouched


async def test_context_mode_reads_the_same_with_or_without_its_kept_records(
    store: SessionStore,
) -> None:
    # Each session object reads after each write: the one that keeps the records it
    # decoded takes them again, and returns what the one that keeps none returns. (No
    # engine: each would compact on its own gate, and the two reads would see two states.)
    options: dict[str, Any] = {"max_context_tokens": 3_000, "auto_compact": False}
    kept = SessionStoreSession("kept", tenant(store), **options)
    fresh = SessionStoreSession("kept", tenant(store), keep_records=False, **options)
    for n in range(12):
        request: Item = {"role": "user", "content": f"task {n} " + "word " * 300}
        await kept.add_items([request, *dumped(answer(n, "done"))])  # type: ignore[list-item]  # SDK items
        assert await read(kept) == await read(fresh)
        assert await read(kept, 3) == await read(fresh, 3)
    assert len(await read(kept)) < 24  # the window left the oldest runs out


def check_paired(items: Sequence[Item]) -> None:
    """Every output follows its call, and every call has its output."""
    seen: list[str] = []
    outputs: list[str] = []
    for item in items:
        if item.get("type") == "function_call":
            seen.append(item["call_id"])
        elif item.get("type") == "function_call_output":
            assert item["call_id"] in seen
            outputs.append(item["call_id"])
    assert sorted(seen) == sorted(outputs)


async def test_a_limit_never_cuts_between_a_call_and_its_output(store: SessionStore) -> None:
    """openai-agents #4322: `SessionSettings(limit=n)` sent an orphan function_call_output."""
    session = SessionStoreSession("limits", tenant(store))
    await session.add_items(sdk([{"role": "user", "content": "go"}]))
    for n in range(3):
        output = {"type": "function_call_output", "call_id": f"call_{n}", "output": str(n + 1)}
        await session.add_items(sdk([*dumped(tool_turn(n, n, 1)), output]))
    everything = await read(session)
    assert len(everything) == 1 + 3 * 3
    for limit in range(1, len(everything) + 2):
        window = await read(session, limit)
        assert len(window) <= limit
        assert window == everything[len(everything) - len(window) :]
        check_paired(window)
        assert not window or window[0].get("type") != "function_call_output"
    # The SDK's own setting goes through the same window.
    limited = SessionStoreSession("limits", tenant(store), session_settings={"limit": 2})
    assert await read(limited) == []  # [call, output] would split from its reasoning
    limited = SessionStoreSession("limits", tenant(store), session_settings={"limit": 3})
    assert types(await read(limited)) == [
        "reasoning",
        "function_call",
        "function_call_output",
    ]


async def test_an_unanswered_call_is_left_out_of_a_window(store: SessionStore) -> None:
    session = SessionStoreSession("pending", tenant(store))
    await session.add_items(sdk([{"role": "user", "content": "go"}]))
    await session.add_items(sdk(dumped(tool_turn(1, 1, 1))))
    assert types(await read(session)) == ["message", "reasoning", "function_call"]
    assert types(await read(session, 10)) == ["message"]


async def test_pop_item_branches_and_keeps_the_item_for_audit(store: SessionStore) -> None:
    session = SessionStoreSession("pop", tenant(store))
    assert await session.pop_item() is None
    turn = dumped(tool_turn(1, 2, 3))
    output = {"type": "function_call_output", "call_id": "call_1", "output": "5"}
    await session.add_items(sdk([{"role": "user", "content": "add"}, *turn, output]))

    assert await session.pop_item() == output
    assert await session.pop_item() == turn[1]
    assert await read(session) == [{"role": "user", "content": "add"}, turn[0]]
    assert await session.pop_item() == turn[0]
    assert await session.pop_item() == {"role": "user", "content": "add"}
    assert await read(session) == []
    assert await session.pop_item() is None

    # Nothing was deleted: the first loop still holds every item, as written.
    scoped = tenant(store)
    first = (await scoped.list_loops("pop"))[0]
    kept = await scoped.get_history("pop", loop_id=first.id)
    assert to_openai_responses([m.message for m in kept]) == [
        {"role": "user", "content": "add"},
        *turn,
        output,
    ]
    # And the session goes on after the pops.
    await session.add_items(sdk([{"role": "user", "content": "again"}]))
    assert await read(session) == [{"role": "user", "content": "again"}]


async def test_pop_item_skips_what_the_sdk_never_saw(store: SessionStore) -> None:
    session = SessionStoreSession("hidden", tenant(store))
    await session.add_items(sdk([{"role": "user", "content": "hi"}]))
    await tenant(store).append_messages(
        "hidden", [CustomMessage(custom_type="note", data={"x": 1}, display=False)]
    )
    assert await read(session) == [{"role": "user", "content": "hi"}]
    assert await session.pop_item() == {"role": "user", "content": "hi"}
    assert await read(session) == []


async def test_clear_then_add_keeps_the_old_history_for_audit(store: SessionStore) -> None:
    """openai-agents #3116: a clear followed by a failed add lost the whole history."""
    session = SessionStoreSession("clear", tenant(store))
    old = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]
    await session.add_items(sdk(old))
    await session.clear_session()
    assert await read(session) == []
    with pytest.raises(FormatError):
        await session.add_items(sdk([{"role": "robot", "content": "bad"}]))
    assert await read(session) == []
    with pytest.raises(FormatError):
        await session.replace_items(sdk([{"role": "robot", "content": "bad"}]))
    loops = await tenant(store).list_loops("clear")
    audit = await tenant(store).get_history("clear", loop_id=loops[0].id)
    assert to_openai_responses([m.message for m in audit]) == old
    # replace_items is a clear and an add in one transaction.
    await session.replace_items(sdk([{"role": "user", "content": "summary of before"}]))
    assert await read(session) == [{"role": "user", "content": "summary of before"}]
    assert len(await tenant(store).list_loops("clear")) == 3


async def test_a_session_is_created_on_first_write_only(store: SessionStore) -> None:
    session = SessionStoreSession("lazy", store, app_name="agents-app", user_id="user-1")
    assert await read(session) == []
    await session.clear_session()
    assert (await tenant(store).list_sessions()).items == []
    await session.add_items(sdk([{"role": "user", "content": "hi"}]))
    assert (await tenant(store).get_session("lazy")).app_name == "agents-app"
    other = SessionStoreSession("lazy", store.for_tenant("agents-app", "someone-else"))
    assert await read(other) == []


def test_it_needs_a_tenant(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="tenant"):
        SessionStoreSession("s", store)
    with pytest.raises(ValueError, match="max_context_tokens"):
        SessionStoreSession("s", tenant(store), max_context_tokens=0)
    with pytest.raises(ConfigurationError):
        SessionStoreSession("s", tenant(store), max_context_tokens=10, compaction={"x": 1})
    with pytest.raises(ConfigurationError):
        SessionStoreSession("s", tenant(store), compaction="often")  # type: ignore[arg-type]
    session = SessionStoreSession("s", tenant(store), compaction={"keep_recent_turns": 3})
    assert session._compaction == CompactionConfig(keep_recent_turns=3)


async def test_sdk_items_round_trip_through_the_store_exactly(store: SessionStore) -> None:
    model = ScriptedModel([tool_turn(1, 1, 2), answer(1, "3")])
    agent = Agent(name="adder", model=model, tools=[add])
    session = SessionStoreSession("exact", tenant(store))
    await Runner.run(agent, "add", session=session)
    items = await read(session)
    assert len(items) == 5
    assert to_openai_responses(from_openai_responses(items)) == items


README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


async def test_the_readme_drop_in_runs(store: SessionStore) -> None:
    readme = README
    (code,) = [
        block
        for block in re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
        if "SessionStoreSession" in block
    ]
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    agent = Agent(
        name="adder", model=ScriptedModel([tool_turn(1, 1, 2), answer(1, "3")]), tools=[add]
    )
    assert await namespace["reply"](store, agent, "add 1 and 2") == "3"
    items = await read(SessionStoreSession("chat-42", store.for_tenant("my-agent", "user-42")))
    assert types(items) == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
    ]


class CompactingResponses:
    """The one call of the OpenAI client the SDK's compaction session makes."""

    def __init__(self, output: list[Item]) -> None:
        self.output = output
        self.inputs: list[Any] = []

    async def compact(self, **kwargs: Any) -> Any:
        self.inputs.append(kwargs.get("input"))
        return SimpleNamespace(output=self.output, usage=None)


async def test_the_sdks_compaction_session_replaces_the_history_atomically(
    store: SessionStore,
) -> None:
    """openai-agents #3116, through the SDK's own OpenAIResponsesCompactionSession."""
    inner = SessionStoreSession("compact", tenant(store))
    old = [{"role": "user", "content": f"question {n}"} for n in range(3)]
    await inner.add_items(sdk(old))
    summary = {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}
    for output, ok in ([summary, {"role": "robot"}], False), ([summary], True):
        responses = CompactingResponses(output)
        outer = OpenAIResponsesCompactionSession(
            "compact",
            underlying_session=inner,
            client=cast(Any, SimpleNamespace(responses=responses)),
            compaction_mode="input",
        )
        if ok:
            await outer.run_compaction({"force": True})
            assert await read(inner) == [summary]
        else:  # a replacement that cannot be stored changes nothing
            with pytest.raises(FormatError):
                await outer.run_compaction({"force": True})
            assert await read(inner) == old
        assert responses.inputs == [old]
    # Nothing was deleted: the first chain still holds the questions.
    first = (await tenant(store).list_loops("compact"))[0]
    kept = await tenant(store).get_history("compact", loop_id=first.id)
    assert to_openai_responses([m.message for m in kept]) == old


async def test_the_sdks_compaction_summarises_the_whole_history_not_the_limit_window(
    store: SessionStore,
) -> None:
    """openai-agents #5010: with a settings `limit`, the SDK's compaction session summarised
    the window alone and replaced the whole history with it (its own stores still do)."""
    inner = SessionStoreSession("window", tenant(store), session_settings={"limit": 2})
    questions = [{"role": "user", "content": f"q{n}"} for n in range(6)]
    for question in questions:
        await inner.add_items(sdk([question]))
    assert await read(inner) == questions[-2:]  # the settings' window, as before
    summary = {"type": "compaction", "id": "cmp_2", "encrypted_content": "opaque"}
    responses = CompactingResponses([summary])
    outer = OpenAIResponsesCompactionSession(
        "window",
        underlying_session=inner,
        client=cast(Any, SimpleNamespace(responses=responses)),
        compaction_mode="input",
    )
    await outer.run_compaction({"force": True})
    assert responses.inputs == [questions]  # every question went into the summary
    assert await read(inner, 100) == [summary]
    # The hook's answer for a bounded read: whole, or nothing and not complete.
    follow_up = {"role": "user", "content": "next"}
    await inner.add_items(sdk([follow_up]))
    items, complete = await inner._read_compaction_items(2)
    assert (plain(items), complete) == ([summary, follow_up], True)
    assert await inner._read_compaction_items(1) == ([], False)


async def test_every_output_item_type_round_trips_through_the_store(store: SessionStore) -> None:
    """The items the SDK makes of a model's output, as `ModelResponse.to_input_items` does."""
    output: list[ResponseOutputItem] = [
        ResponseReasoningItem(
            id="rs",
            type="reasoning",
            summary=[Summary(text="s", type="summary_text")],
            content=[Content(text="c", type="reasoning_text")],
            encrypted_content="e",
            status="completed",
        ),
        ResponseOutputMessage(
            id="m",
            type="message",
            role="assistant",
            status="completed",
            content=[
                ResponseOutputText(text="t", type="output_text", annotations=[]),
                ResponseOutputRefusal(refusal="no", type="refusal"),
            ],
        ),
        ResponseFunctionToolCall(
            id="fc",
            call_id="c1",
            name="f",
            arguments="{}",
            type="function_call",
            status="completed",
        ),
        ResponseCustomToolCall(
            id="ct", call_id="c2", name="g", input="raw", type="custom_tool_call"
        ),
        ResponseFunctionWebSearch(
            id="ws",
            status="completed",
            type="web_search_call",
            action=ActionSearch(type="search", query="q"),
        ),
        ResponseFileSearchToolCall(
            id="fs", queries=["q"], status="completed", type="file_search_call"
        ),
        ResponseComputerToolCall(
            id="cu",
            call_id="c3",
            pending_safety_checks=[],
            status="completed",
            type="computer_call",
            action=ActionClick(type="click", x=1, y=2, button="left"),
        ),
        ImageGenerationCall(
            id="ig", result="aGk=", status="completed", type="image_generation_call"
        ),
        ResponseCodeInterpreterToolCall(
            id="ci",
            code="1",
            container_id="k",
            outputs=None,
            status="completed",
            type="code_interpreter_call",
        ),
        LocalShellCall(
            id="ls",
            call_id="c4",
            status="completed",
            type="local_shell_call",
            action=LocalShellCallAction(command=["ls"], env={}, type="exec"),
        ),
        McpCall(id="mc", arguments="{}", name="n", server_label="s", type="mcp_call"),
        McpListTools(id="ml", server_label="s", tools=[], type="mcp_list_tools"),
        McpApprovalRequest(
            id="ma", arguments="{}", name="n", server_label="s", type="mcp_approval_request"
        ),
        ResponseCompactionItem(id="cp", encrypted_content="x", type="compaction"),
    ]
    items = ModelResponse(output=output, usage=Usage(), response_id=None).to_input_items()
    outputs: list[Item] = [
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "2"},
        {
            "type": "computer_call_output",
            "call_id": "c3",
            "output": {"type": "computer_screenshot", "image_url": "https://example.com/s.png"},
        },
        {"type": "local_shell_call_output", "id": "c4", "output": "a b"},
        {"type": "mcp_approval_response", "approval_request_id": "ma", "approve": True},
    ]
    session = SessionStoreSession("every-type", tenant(store))
    await session.add_items(sdk([{"role": "user", "content": "go"}, *plain(items), *outputs]))
    assert await read(session) == [{"role": "user", "content": "go"}, *plain(items), *outputs]


def _model_path_window(messages: list[Any], limit: int | None) -> list[dict[str, Any]]:
    """What `get_items(limit)` answered when it built every message as a model."""
    from sessionstore.integrations import _responses_window

    if limit is not None:
        if limit <= 0:
            return []
        messages = messages[-limit:]
    units = [to_openai_responses([m]) for m in messages]
    if limit is None:
        return [item for unit in units for item in unit]
    return _responses_window.window(
        [not _responses_window.is_output(m) for m in messages], units, limit
    )


async def test_raw_reads_answer_from_the_kept_json_as_the_models_would(
    store: SessionStore,
) -> None:
    """Items of every origin, over several loops and a branch: the same as the model path."""
    scoped = tenant(store)
    session = SessionStoreSession("origins", scoped)
    await session.add_items(sdk([{"role": "user", "content": "first"}]))
    # Through the store: imported without the kept JSON (as older versions stored them),
    # and written by hand.
    call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    await scoped.append_messages("origins", from_openai_responses([call]))
    await scoped.append_messages(
        "origins", [ToolResultMessage(tool_call_id="c1", tool_name="f", content="out")]
    )
    await session.add_items(sdk([{"role": "assistant", "content": "done"}]))
    for n in range(3):  # each user request starts a loop
        output = {"type": "function_call_output", "call_id": f"call_{n}", "output": str(n)}
        await session.add_items(sdk([{"role": "user", "content": f"again {n}"}]))
        await session.add_items(sdk([*dumped(tool_turn(n, n, 1)), output]))
    assert await session.pop_item() is not None  # the active chain now ends on a branch
    stored = await scoped.get_history("origins")
    kept = stored[0].message.extra["openai_responses"]
    assert json.loads(kept["json"]) == [{"role": "user", "content": "first"}]  # type: ignore[index, call-overload, arg-type]
    messages = [s.message for s in stored]
    everything = await read(session)
    assert everything == _model_path_window(messages, None)
    assert everything[:4] == [
        {"role": "user", "content": "first"},
        call,
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
        {"role": "assistant", "content": "done"},
    ]
    for limit in range(len(everything) + 2):
        assert await read(session, limit) == _model_path_window(messages, limit), limit
    # Another tenant's id, and no session at all: no items.
    assert await read(SessionStoreSession("origins", store.for_tenant("agents", "bob"))) == []
    assert await read(SessionStoreSession("none", scoped)) == []


async def test_a_kept_text_that_is_not_items_reads_through_the_models(store: SessionStore) -> None:
    """A message written by hand with a kept text that is not a list of items."""
    scoped = tenant(store)
    session = SessionStoreSession("forged", scoped)
    await session.add_items(sdk([{"role": "user", "content": "first"}]))
    for bad in ("{}", "not json", "[1]"):
        message = from_openai_responses([{"role": "user", "content": bad}])[0]
        hints = {**message.extra["openai_responses"], "json": bad}  # type: ignore[dict-item]
        await scoped.append_messages(
            "forged", [message.model_copy(update={"extra": {"openai_responses": hints}})]
        )
    expected = [{"role": "user", "content": text} for text in ("first", "{}", "not json", "[1]")]
    assert await read(session) == expected
    assert await read(session, 2) == expected[-2:]


async def test_a_session_object_reads_what_other_writers_changed_since_its_last_read(
    store: SessionStore,
) -> None:
    """Its reads reuse the texts it read before (by message id and hash) and see every change."""
    scoped = tenant(store)
    reader = SessionStoreSession("shared", scoped)
    writer = SessionStoreSession("shared", scoped)

    async def fresh(limit: int | None = None) -> list[Item]:
        return await read(SessionStoreSession("shared", scoped), limit)

    async def same(limit: int | None = None) -> None:
        assert await read(reader, limit) == await fresh(limit), limit

    await writer.add_items(sdk([{"role": "user", "content": "one"}]))
    await writer.add_items(sdk([*dumped(tool_turn(0, 1, 2))]))
    await same()
    await writer.add_items(
        sdk([{"type": "function_call_output", "call_id": "call_0", "output": "3"}])
    )
    await same(2)
    await same()
    # Through the store, without the kept JSON.
    await scoped.append_messages(
        "shared", from_openai_responses([{"role": "assistant", "content": "three"}])
    )
    await same()
    await same(1)
    assert await writer.pop_item() == {"role": "assistant", "content": "three"}
    await same(1)
    await same()
    await writer.clear_session()
    assert await read(reader) == []
    await writer.add_items(sdk([{"role": "user", "content": "two"}]))
    assert await read(reader) == [{"role": "user", "content": "two"}]
    assert await read(reader, 5) == [{"role": "user", "content": "two"}]


async def test_a_fresh_session_object_reads_back_exactly_what_was_added(
    store: SessionStore,
) -> None:
    """Its first read decodes every kept text in one parse: one item, and many, exactly."""
    scoped = tenant(store)
    writer = SessionStoreSession("exact", scoped)
    first = {"role": "user", "content": 'quotes " and \\ backslashes, é, 🙂, \n'}
    await writer.add_items(sdk([first]))
    assert await read(SessionStoreSession("exact", scoped)) == [first]
    # Repeated keys and short values (the parser caches only the keys), nested arguments.
    added = [first]
    for n in range(3):
        turn = [
            {"role": "user", "content": "go"},
            {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": '{"a": [1]}'},
            {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"},
            {"role": "assistant", "content": "go"},
        ]
        await writer.add_items(sdk(turn))
        added += turn
    got = await read(SessionStoreSession("exact", scoped))
    assert got == added
    assert [json.dumps(item) for item in got] == [json.dumps(item) for item in added]
    assert await read(SessionStoreSession("exact", scoped), 5) == added[-5:]


async def test_a_whole_read_leaves_the_kept_texts_for_the_next_read(store: SessionStore) -> None:
    """The texts a whole read returned are remembered, by message id and hash, when next used."""
    scoped = tenant(store)
    writer = SessionStoreSession("remembered", scoped)
    added = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}]
    await writer.add_items(sdk(added))
    reader = SessionStoreSession("remembered", scoped)
    assert await read(reader) == added
    chained = await scoped._chain_strings("remembered", ("extra", "openai_responses", "json"))
    expected = dict(zip(chained.ids, zip(chained.digests, chained.found, strict=True), strict=True))
    assert reader._known() == expected
    assert all(text is not None for _, text in expected.values())
    await writer.add_items(sdk([{"role": "user", "content": "three"}]))
    assert await read(reader) == [*added, {"role": "user", "content": "three"}]
    assert await read(reader, 1) == [{"role": "user", "content": "three"}]
    assert len(reader._known()) == 3
