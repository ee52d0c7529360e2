"""The recall tools: plain functions, openai-agents and pydantic-ai tools, and `sessionstore mcp`.

A session with a summarised loop is written through the store; the tools find the raw
history behind the summary, open the summary to what it stands for, and read turns, and
never show another tenant's data. The MCP server is driven over stdio by the `mcp` client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sessionstore import SessionStore
from sessionstore.models import (
    AssistantMessage,
    CompactedSection,
    CompactionBlock,
    ReplacementMessage,
    ToolCall,
    ToolResultMessage,
    TurnRange,
    UserMessage,
)
from sessionstore.recall import RecallTools, recall_tools

APP, USER = "agent", "ada"
SECRET = "zanzibar"
ROOT = Path(__file__).resolve().parents[2]


async def write_history(store: SessionStore, *, user: str = USER, sid: str = "chat") -> int:
    """Write a loop of 4 turns whose turns 1-2 are summarised; return the summary's id."""
    tenant = store.for_tenant(APP, user)
    await tenant.create_session(session_id=sid)
    stored = await tenant.append_messages(
        sid,
        [
            UserMessage(content=f"deploy the {SECRET} service"),
            AssistantMessage(
                content=[ToolCall(id="c1", name="bash", arguments={"cmd": "make deploy"})]
            ),
            ToolResultMessage(tool_call_id="c1", tool_name="bash", content="error: port 8080 busy"),
            AssistantMessage(content="The port was busy; I freed it and deployed."),
            UserMessage(content="thanks"),
        ],
    )
    loop_id = stored[0].loop_id
    covered = [m for m in stored if 1 <= m.turn_index <= 2]
    block = await tenant.write_block(
        sid,
        loop_id,
        CompactionBlock(
            keep_first=TurnRange(start_turn=0, end_turn=0),
            keep_compacted=CompactedSection(
                range=TurnRange(start_turn=1, end_turn=2),
                messages=[
                    ReplacementMessage(
                        message=UserMessage(content="Deployed after freeing a busy port."),
                        covers=[m.id for m in covered],
                    )
                ],
            ),
            strategy="test",
        ),
    )
    assert block.keep_compacted is not None
    summary_id = block.keep_compacted.messages[0].id
    assert summary_id is not None
    return summary_id


async def test_the_tools_look_back_behind_a_summary(store: SessionStore) -> None:
    summary_id = await write_history(store)
    search, list_loops, expand, read = recall_tools(store.for_tenant(APP, USER), session_id="chat")

    found = (await search("port busy"))["hits"]
    raw = [hit for hit in found if "message_id" in hit]
    assert sorted((hit["kind"], hit["turn"]) for hit in raw) == [
        ("assistant", 2),
        ("tool_result", 1),
    ]
    assert [hit["summary_id"] for hit in found if "summary_id" in hit] == [summary_id]
    summaries = await search("freeing")
    assert summaries["hits"][0]["summary_id"] == summary_id
    assert summaries["hits"][0]["covers"] == 3

    loops = (await list_loops())["loops"]
    assert len(loops) == 1
    assert loops[0]["turns"] == 4
    assert loops[0]["summaries"][0]["summary_id"] == summary_id
    assert loops[0]["summaries"][0]["preview"].startswith("Deployed")

    opened = await expand(summary_id)
    assert [m["kind"] for m in opened["messages"]] == ["assistant", "tool_result", "assistant"]
    assert "make deploy" in opened["messages"][0]["text"]
    assert "port 8080 busy" in opened["messages"][1]["text"]

    first = await read(loops[0]["loop_id"], 0, 0)
    assert [m["text"] for m in first["messages"]] == [f"deploy the {SECRET} service"]
    everything = await read(loops[0]["loop_id"], 0, 99)
    assert (everything["end_turn"], len(everything["messages"])) == (3, 5)


async def test_refusals_come_back_as_errors_for_the_model(store: SessionStore) -> None:
    await write_history(store)
    tools = RecallTools(store.for_tenant(APP, USER))
    assert "session_id" in (await tools.list_loops())["error"]
    assert "error" in await tools.search_history("   ")
    assert "error" in await tools.search_history("x", limit=0)
    assert "error" in await tools.expand_summary(10**9, session_id="chat")
    assert "error" in await tools.read_messages(10**9, session_id="chat")
    loop_id = (await tools.list_loops(session_id="chat"))["loops"][0]["loop_id"]
    assert "4 turns" in (await tools.read_messages(loop_id, 7, session_id="chat"))["error"]


async def test_long_messages_are_cut_with_a_marker(store: SessionStore) -> None:
    tenant = store.for_tenant(APP, USER)
    await tenant.create_session(session_id="long")
    stored = await tenant.append_messages("long", [UserMessage(content="word " * 500)])
    tools = RecallTools(tenant, session_id="long", message_chars=100)
    read = await tools.read_messages(stored[0].loop_id)
    assert read["messages"][0]["text"].endswith("[... 2400 more characters]")


async def test_the_tools_never_reach_another_tenant(store: SessionStore) -> None:
    theirs = await write_history(store, user="bob", sid="bobs-chat")
    mine = RecallTools(store.for_tenant(APP, USER))
    assert (await mine.search_history(SECRET))["hits"] == []
    for answer in [
        await mine.search_history(SECRET, session_id="bobs-chat"),
        await mine.list_loops(session_id="bobs-chat"),
        await mine.expand_summary(theirs, session_id="bobs-chat"),
        await mine.read_messages(1, session_id="bobs-chat"),
    ]:
        assert set(answer) == {"error"}
        assert SECRET not in json.dumps(answer)
    # The same summary id, asked of a session of one's own, is not there either.
    await store.for_tenant(APP, USER).create_session(session_id="mine")
    assert "error" in await mine.expand_summary(theirs, session_id="mine")


def test_the_tools_need_a_tenant_handle(store: SessionStore) -> None:
    with pytest.raises(TypeError, match="for_tenant"):
        RecallTools(store)  # type: ignore[arg-type]


async def test_as_openai_agents_tools(store: SessionStore) -> None:
    pytest.importorskip("agents")
    from agents import RunContextWrapper
    from agents.tool_context import ToolContext

    from sessionstore.recall.openai_agents import recall_function_tools

    summary_id = await write_history(store)
    tools = {
        t.name: t for t in recall_function_tools(store.for_tenant(APP, USER), session_id="chat")
    }
    assert sorted(tools) == ["expand_summary", "list_loops", "read_messages", "search_history"]
    assert (
        tools["expand_summary"].params_json_schema["properties"]["summary_id"]["type"] == "integer"
    )
    context = ToolContext(
        context=None, tool_name="expand_summary", tool_call_id="t1", tool_arguments="{}"
    )
    del RunContextWrapper
    out = await tools["expand_summary"].on_invoke_tool(
        context, json.dumps({"summary_id": summary_id, "session_id": None})
    )
    assert "port 8080 busy" in str(out)


async def test_as_pydantic_ai_tools(store: SessionStore) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from sessionstore.recall.pydantic_ai import recall_pydantic_tools

    summary_id = await write_history(store)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = sorted(tool.name for tool in info.function_tools)
        assert names == ["expand_summary", "list_loops", "read_messages", "search_history"]
        returns = [
            part
            for message in messages
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("expand_summary", {"summary_id": summary_id})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(
        FunctionModel(model),
        tools=recall_pydantic_tools(store.for_tenant(APP, USER), session_id="chat"),
    )
    result = await agent.run("what happened?")
    returned = [
        part.content
        for message in result.all_messages()
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert "port 8080 busy" in json.dumps(returned)


# ── the MCP server over stdio ───────────────────────────────────────────────────


async def test_sessionstore_mcp_answers_over_stdio(db_url: str, tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async with SessionStore.from_url(db_url) as store:
        summary_id = await write_history(store)
        await write_history(store, user="bob", sid="bobs-chat")

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sessionstore", "--url", db_url, "mcp", "--app", APP, "--user", USER],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )

    async def call(client: ClientSession, name: str, arguments: dict[str, Any]) -> Any:
        result = await client.call_tool(name, arguments)
        assert not result.is_error, result
        return json.loads(result.content[0].text)  # type: ignore[union-attr]

    with (tmp_path / "server.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            listed = await client.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            assert sorted(tools) == [
                "expand_summary",
                "list_loops",
                "read_messages",
                "search_history",
            ]
            assert tools["read_messages"].input_schema["required"] == ["loop_id"]

            hits = (await call(client, "search_history", {"query": "8080"}))["hits"]
            assert [(h["session_id"], h["kind"]) for h in hits] == [("chat", "tool_result")]
            loops = (await call(client, "list_loops", {"session_id": "chat"}))["loops"]
            assert loops[0]["summaries"][0]["summary_id"] == summary_id
            opened = await call(
                client, "expand_summary", {"summary_id": summary_id, "session_id": "chat"}
            )
            assert len(opened["messages"]) == 3
            read = await call(
                client,
                "read_messages",
                {"loop_id": loops[0]["loop_id"], "start_turn": 0, "session_id": "chat"},
            )
            assert read["messages"][0]["text"] == f"deploy the {SECRET} service"

            # Bob's session is not there for this tenant, by search or by name.
            only_mine = await call(client, "search_history", {"query": SECRET})
            assert {h["session_id"] for h in only_mine["hits"]} == {"chat"}
            refused = await call(client, "list_loops", {"session_id": "bobs-chat"})
            assert set(refused) == {"error"}


def test_sessionstore_mcp_needs_a_tenant() -> None:
    from click.testing import CliRunner

    from sessionstore.cli import main

    result = CliRunner().invoke(main, ["mcp", "--app", APP])
    assert result.exit_code == 2
    assert "--user" in result.output


def test_sessionstore_mcp_without_the_extra_names_it(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "from sessionstore.cli import main\n"
        "main(['mcp', '--app', 'a', '--user', 'u'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert result.returncode == 1
    assert 'pip install "sessionstore[mcp]"' in result.stderr
    assert "Traceback" not in result.stderr
