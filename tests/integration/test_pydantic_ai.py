"""A pydantic-ai agent persisted in the store and resumed from a built context, on both backends.

The model is pydantic-ai's `FunctionModel`: a scripted function, no network. Skipped when the
`pydantic-ai` extra is not installed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from sessionstore import CompactionConfig, RecordCache, SessionStore, compact_session_loops
from sessionstore.formats.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from sessionstore.integrations.pydantic_ai import (
    build_message_history,
    save_model_messages,
)


def scripted(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Call `add(n, 1)` for the prompt "task n: ...", then answer with the sum it returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1].parts[-1]
        if isinstance(last, UserPromptPart):
            n = int(str(last.content).split()[1].rstrip(":"))
            return ModelResponse(
                parts=[
                    ThinkingPart("I will add", signature=f"sig-{n}"),
                    ToolCallPart("add", {"a": n, "b": 1}, tool_call_id=f"call-{n}"),
                ]
            )
        assert isinstance(last, ToolReturnPart)
        return ModelResponse(parts=[TextPart(f"the sum is {last.content} " + "padding " * 80)])

    return FunctionModel(respond)


def make_agent(seen: list[list[ModelMessage]]) -> Agent[None, str]:
    agent = Agent(scripted(seen), instructions="Add numbers.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    return agent


def check_paired(messages: list[ModelMessage]) -> None:
    calls = {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelResponse)
        for p in m.parts
        if isinstance(p, ToolCallPart)
    }
    returns = {
        p.tool_call_id
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    }
    assert calls == returns


async def test_a_history_round_trips_through_the_store(store: SessionStore) -> None:
    seen: list[list[ModelMessage]] = []
    result = await make_agent(seen).run("task 1: add")
    tenant = store.for_tenant("pai", "u")
    await save_model_messages(tenant, "s", result.all_messages())
    stored = [m.message for m in await tenant.get_history("s")]
    assert [m.kind for m in stored] == ["user", "assistant", "tool_result", "assistant"]
    dump = ModelMessagesTypeAdapter.dump_python
    assert dump(to_pydantic_ai(stored), mode="json") == dump(result.all_messages(), mode="json")
    assert to_pydantic_ai(from_pydantic_ai(result.all_messages())) == result.all_messages()


async def test_an_agent_is_persisted_and_resumed_from_a_compacted_context(
    store: SessionStore,
) -> None:
    seen: list[list[ModelMessage]] = []
    agent = make_agent(seen)
    tenant = store.for_tenant("pai", "u")
    history: list[ModelMessage] = []
    cache = RecordCache()  # kept from run to run: each build decodes what was written since
    for run in range(6):
        result = await agent.run(f"task {run}: add", message_history=history)
        await save_model_messages(tenant, "resume", result.new_messages())
        history = await build_message_history(
            tenant, "resume", max_context_tokens=100_000, records=cache
        )
        assert history == await build_message_history(tenant, "resume", max_context_tokens=100_000)
    assert result.output.startswith("the sum is 6")
    # One loop per run. The whole chain fits the window, so the context holds every loop,
    # as it was (a context is scoped by its budget, not by compaction's FixedCount(3)).
    assert len(await tenant.list_loops("resume")) == 6
    assert len(history) == 6 * 4
    assert history[0].parts[0].content == "task 0: add"  # type: ignore[union-attr]

    config = CompactionConfig(keep_first_turns=1, keep_recent_turns=2)
    await compact_session_loops(tenant, "resume", config=config)
    small = await build_message_history(tenant, "resume", max_context_tokens=1_500, config=config)
    assert len(small) < len(history)
    check_paired(small)
    resumed = await agent.run("task 6: add", message_history=small)
    assert resumed.output.startswith("the sum is 7")
    check_paired(seen[-1])
    # The raw history is untouched by compaction.
    assert len(await tenant.get_history("resume")) == 6 * 4


def test_the_guide_example_runs(tmp_path: Path) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "pydantic-ai.md").read_text()
    code = re.findall(r"```python\n(.*?)```", guide, flags=re.DOTALL)[0]  # the whole example
    script = tmp_path / "example.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("6 messages;")
