"""OpenAICompatibleSummarizer against a real HTTP server on 127.0.0.1 that the tests start.

The server speaks just enough HTTP/1.1 for `/v1/chat/completions`: it records every
request (path, headers, JSON body) and answers from a script of replies (a status and a
body, a hang, a dropped connection). Nothing leaves the loopback interface.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from sessionstore._tokens import estimate_tokens
from sessionstore.errors import (
    ConfigurationError,
    SessionStoreError,
    SummarizerAuthError,
    SummarizerError,
    SummarizerResponseError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.models import (
    AssistantMessage,
    Message,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore.summarizers import Summarizer, SummaryRequest
from sessionstore.summarizers._openai_compatible import OpenAICompatibleSummarizer
from sessionstore.summarizers._prompt import HANDOFF_SECTIONS, PROMPT_VERSION, SUMMARIZER_PREAMBLE

KEY_ENV = "SESSIONSTORE_TEST_SUMMARIZER_KEY"
API_KEY = "sk-test-9f8e7d6c5b4a39281706fedcba"  # what the test server is sent, never echoed
SECRET = "sk-proj-Zq81mX0vK2pL7sT4wY6uN3"  # a secret inside the conversation

DIGEST = (
    "## Active Task\nUser asked: 'fix the failing test in tests/test_api.py'\n\n## Goal\nGreen CI"
)


# ── the loopback server ────────────────────────────────────────────────────────


@dataclass
class Reply:
    status: int = 200
    body: bytes | dict[str, Any] = b""
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False
    drop: bool = False


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def system(self) -> str:
        return str(self.body["messages"][0]["content"])

    @property
    def user(self) -> str:
        return str(self.body["messages"][1]["content"])


def completion(text: str, *, model: str = "served-model-1") -> Reply:
    return Reply(
        body={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


class ChatServer:
    """A scripted `/v1/chat/completions` server on 127.0.0.1, on a free port."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.received: list[Received] = []
        self.release = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    def reply(self, *replies: Reply) -> None:
        self.script.extend(replies)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)

    async def stop(self) -> None:
        self.release.set()
        for writer in self._writers:
            writer.close()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        try:
            request_line = await reader.readline()
            if not request_line:
                return
            _, path, _ = request_line.decode().split(" ", 2)
            headers: dict[str, str] = {}
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode().partition(":")
                headers[name.strip().lower()] = value.strip()
            raw = await reader.readexactly(int(headers.get("content-length", "0")))
            self.received.append(Received(path, headers, json.loads(raw)))
            reply = self.script.popleft() if self.script else completion(DIGEST)
            if reply.hang:
                await self.release.wait()
                return
            if reply.drop:
                return
            payload = (
                reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            )
            head = [
                f"HTTP/1.1 {reply.status} Scripted",
                "Content-Type: application/json",
                f"Content-Length: {len(payload)}",
                "Connection: close",
                *(f"{name}: {value}" for name, value in reply.headers.items()),
            ]
            writer.write("\r\n".join(head).encode() + b"\r\n\r\n" + payload)
            await writer.drain()
        finally:
            writer.close()


@pytest.fixture
async def server() -> AsyncIterator[ChatServer]:
    chat = ChatServer()
    await chat.start()
    try:
        yield chat
    finally:
        await chat.stop()


def summarizer(server: ChatServer, **options: Any) -> OpenAICompatibleSummarizer:
    settings: dict[str, Any] = {
        "api_key_env": KEY_ENV,
        "timeout": 5.0,
        "max_retries": 2,
        "backoff": 0.01,
    }
    settings.update(options)
    return OpenAICompatibleSummarizer(server.base_url, "test-model", **settings)


def conversation() -> list[UserMessage | AssistantMessage | ToolResultMessage]:
    return [
        UserMessage(content="The tests fail; my key is " + SECRET + ". Fix tests/test_api.py"),
        AssistantMessage(
            content=[
                TextContent(text="Running the tests."),
                ToolCall(
                    id="call_1",
                    name="bash",
                    arguments=json.dumps({"command": "pytest -x tests/test_api.py"}),
                ),
            ]
        ),
        ToolResultMessage(
            tool_call_id="call_1",
            tool_name="bash",
            content=(
                "collected 12 items\nFAILED tests/test_api.py::test_get - KeyError: 'id'\n1 failed"
            ),
            is_error=True,
        ),
    ]


def request(**fields: Any) -> SummaryRequest:
    return SummaryRequest(messages=fields.pop("messages", conversation()), **fields)


# ── success and the request sent ───────────────────────────────────────────────


async def test_success_returns_the_digest_with_its_provenance(server: ChatServer) -> None:
    async with summarizer(server) as s:
        assert isinstance(s, Summarizer)
        summary = await s.summarize(request(budget_tokens=500))
    assert summary.text == DIGEST
    assert summary.model == "served-model-1"  # what the server reports, not what was asked
    assert summary.prompt_version == PROMPT_VERSION
    assert summary.duration_ms > 0
    (sent,) = server.received
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "test-model"
    assert sent.body["stream"] is False
    assert sent.body["temperature"] == pytest.approx(0.2)
    assert sent.body["max_tokens"] >= 500  # derived from the budget, with headroom
    assert [m["role"] for m in sent.body["messages"]] == ["system", "user"]
    assert sent.system == SUMMARIZER_PREAMBLE


async def test_turns_too_long_for_one_prompt_are_summarised_in_parts(server: ChatServer) -> None:
    """codex #29319, letta #3279: a fold bigger than the summarizer's own window failed."""
    turns: list[Message] = [UserMessage(content="Port the parser to the new API.")]
    for n in range(120):
        turns += [
            AssistantMessage(content=f"Step {n}: editing src/module_{n}.py. " + "x " * 600),
            UserMessage(content=f"ok {n}"),
        ]
    server.reply(*(completion(f"## Active Task\nPort the parser (part {i}).") for i in range(9)))
    async with summarizer(server, max_prompt_tokens=12_000) as s:
        assert estimate_tokens(s.prompt_for(request(messages=turns)).user) > 12_000
        summary = await s.summarize(request(messages=turns, prior_digest="## Active Task\nOld."))
    sent = list(server.received)
    assert len(sent) > 1
    for each in sent:  # every prompt fits the cap
        assert estimate_tokens(each.system) + estimate_tokens(each.user) <= 12_000
    # Every message went into exactly one prompt, in order; each prompt after the first
    # updates the digest the one before it returned.
    steps = [int(n) for each in sent for n in re.findall(r"Step (\d+):", each.user)]
    assert steps == list(range(120))
    assert "Old." in sent[0].user
    for index, each in enumerate(sent[1:]):
        assert f"Port the parser (part {index})." in each.user
    assert summary.text == f"## Active Task\nPort the parser (part {len(sent) - 1})."
    # Without the cap, one prompt; a cap too small to be useful is refused.
    async with summarizer(server, max_prompt_tokens=None) as s:
        await s.summarize(request(messages=turns))
    assert len(server.received) == len(sent) + 1
    with pytest.raises(ValueError, match="max_prompt_tokens"):
        summarizer(server, max_prompt_tokens=100)


async def test_the_request_holds_the_template_and_the_transcript(server: ChatServer) -> None:
    async with summarizer(server) as s:
        await s.summarize(request(budget_tokens=700))
    user = server.received[0].user
    positions = [user.index(f"## {title}\n") for title in HANDOFF_SECTIONS]
    assert positions == sorted(positions)
    assert "Target about 700 tokens" in user
    assert "Fix tests/test_api.py" in user
    assert '[assistant called bash (call_1)] {"command": "pytest -x tests/test_api.py"}' in user
    assert "FAILED tests/test_api.py::test_get - KeyError: 'id'" in user
    assert "PREVIOUS SUMMARY" not in user
    assert "FOCUS TOPIC" not in user
    assert "earlier part of this conversation" in user  # session framing


async def test_no_secret_reaches_the_server(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    messages = [
        *conversation(),
        AssistantMessage(
            content=[
                ToolCall(
                    id="call_2",
                    name="http",
                    arguments=json.dumps(
                        {"url": "postgresql://app:hunter2@db:5432/prod", "password": "pa55word"}
                    ),
                )
            ]
        ),
        ToolResultMessage(
            tool_call_id="call_2", content="Authorization: Bearer abcdef0123456789xyz"
        ),
    ]
    async with summarizer(server) as s:
        await s.summarize(
            request(messages=messages, prior_digest=f"key {SECRET}", focus_topic=f"rotate {SECRET}")
        )
    (sent,) = server.received
    body = json.dumps(sent.body)
    for secret in (SECRET, "hunter2", "pa55word", "abcdef0123456789xyz", API_KEY):
        assert secret not in body
    assert body.count("[REDACTED]") >= 6
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"  # only in the header


async def test_no_key_is_sent_when_the_variable_is_unset(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    async with summarizer(server) as s:
        await s.summarize(request())
    assert "authorization" not in server.received[0].headers


async def test_prior_digest_focus_topic_and_branch_framing_are_sent(server: ChatServer) -> None:
    async with summarizer(server, temperature=None) as s:
        await s.summarize(
            request(
                prior_digest="## Active Task\nOld task: migrate the schema",
                focus_topic="the\x00 auth\n\x1b[2J module\u202e",
                scope="branch",
            )
        )
    (sent,) = server.received
    assert "temperature" not in sent.body
    user = sent.user
    assert "PREVIOUS SUMMARY:" in user
    assert "Old task: migrate the schema" in user
    assert "NEW TURNS TO INCORPORATE:" in user
    assert 'FOCUS TOPIC: "the auth [2J module"' in user
    for control in ("\x00", "\x1b", "\u202e"):
        assert control not in user
    assert "BRANCH of this conversation that was abandoned" in user


# ── retries ────────────────────────────────────────────────────────────────────


async def test_a_server_error_is_retried(server: ChatServer) -> None:
    server.reply(
        Reply(status=500, body={"error": {"message": "overloaded"}}),
        completion("## Active Task\nok"),
    )
    async with summarizer(server) as s:
        summary = await s.summarize(request())
    assert summary.text == "## Active Task\nok"
    assert len(server.received) == 2


async def test_a_dropped_connection_is_retried(server: ChatServer) -> None:
    server.reply(Reply(drop=True), completion("## Active Task\nok"))
    async with summarizer(server) as s:
        summary = await s.summarize(request())
    assert summary.text == "## Active Task\nok"
    assert len(server.received) == 2


async def test_server_errors_on_every_attempt_make_it_unavailable(server: ChatServer) -> None:
    server.reply(*[Reply(status=503, body={"error": "model loading"})] * 3)
    async with summarizer(server, max_retries=2) as s:
        with pytest.raises(SummarizerUnavailableError) as caught:
            await s.summarize(request())
    assert len(server.received) == 3
    error = caught.value
    assert (error.status_code, error.attempts) == (503, 3)
    assert "HTTP 503" in str(error)
    assert "model loading" in str(error)
    assert isinstance(error, SummarizerError)
    assert isinstance(error, SessionStoreError)


async def test_429_waits_as_long_as_retry_after_says(server: ChatServer) -> None:
    server.reply(
        Reply(status=429, headers={"Retry-After": "0.3"}), completion("## Active Task\nok")
    )
    async with summarizer(server, backoff=0.0) as s:
        start = time.perf_counter()
        summary = await s.summarize(request())
        elapsed = time.perf_counter() - start
    assert summary.text == "## Active Task\nok"
    assert len(server.received) == 2
    assert elapsed >= 0.3


async def test_an_unreasonable_retry_after_fails_at_once(server: ChatServer) -> None:
    server.reply(Reply(status=429, headers={"Retry-After": "3600"}))
    async with summarizer(server, max_backoff=5.0) as s:
        with pytest.raises(SummarizerUnavailableError) as caught:
            await s.summarize(request())
    assert len(server.received) == 1
    assert caught.value.retry_after == pytest.approx(3600)
    assert caught.value.status_code == 429
    assert "rate limiting" in str(caught.value)


async def test_a_retry_after_date_in_the_past_retries_at_once(server: ChatServer) -> None:
    past = "Wed, 21 Oct 2015 07:28:00 GMT"
    server.reply(Reply(status=503, headers={"Retry-After": past}), completion("## Active Task\nok"))
    async with summarizer(server, backoff=2.0) as s:
        start = time.perf_counter()
        await s.summarize(request())
    assert time.perf_counter() - start < 1.5  # the date (0 s), not the 2 s backoff


async def test_a_hanging_server_times_out(server: ChatServer) -> None:
    server.reply(Reply(hang=True), Reply(hang=True))
    async with summarizer(server, timeout=0.3, max_retries=1) as s:
        start = time.perf_counter()
        with pytest.raises(SummarizerTimeoutError) as caught:
            await s.summarize(request())
        elapsed = time.perf_counter() - start
    assert len(server.received) == 2
    assert caught.value.attempts == 2
    assert 0.6 <= elapsed < 3.0
    assert "0.3 s" in str(caught.value)


async def test_a_refused_connection_is_unavailable() -> None:
    # A port bound and never listened on refuses connections, and while it stays bound
    # no other process of the run can take it: a port closed before the call could be
    # another worker's test server by then (it answered, and took that test's reply).
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        s = OpenAICompatibleSummarizer(
            f"http://127.0.0.1:{port}/v1", "m", max_retries=1, backoff=0.01, api_key_env=None
        )
        async with s:
            with pytest.raises(SummarizerUnavailableError) as caught:
                await s.summarize(request())
    assert caught.value.attempts == 2
    assert caught.value.status_code is None
    assert "could not reach" in str(caught.value)
    assert "ConnectError" in str(caught.value)
    # httpx's exception is not chained: its request carries the API key in its headers.
    assert caught.value.__cause__ is None
    assert caught.value.__context__ is None


# ── errors that are not retried ────────────────────────────────────────────────


async def test_401_is_an_auth_error_that_never_shows_the_key(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, API_KEY)
    server.reply(Reply(status=401, body={"error": {"message": f"Incorrect API key: {API_KEY}"}}))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerAuthError) as caught:
            await s.summarize(request())
    assert len(server.received) == 1
    assert caught.value.status_code == 401
    message = str(caught.value)
    assert API_KEY not in message
    assert "Incorrect API key: [REDACTED]" in message
    assert KEY_ENV in message
    assert API_KEY not in repr(s)


async def test_403_without_a_key_says_to_set_the_variable(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    server.reply(Reply(status=403, body=b"forbidden"))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerAuthError, match=f"{KEY_ENV} is not set"):
            await s.summarize(request())


async def test_404_is_a_response_error_naming_the_model(server: ChatServer) -> None:
    server.reply(Reply(status=404, body={"error": {"message": "model 'test-model' not found"}}))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerResponseError, match="HTTP 404") as caught:
            await s.summarize(request())
    assert len(server.received) == 1
    assert "'test-model'" in str(caught.value)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        pytest.param(b"<html>502 Bad Gateway</html>", "not JSON", id="malformed-json"),
        pytest.param(b"[1, 2]", "JSON list", id="not-an-object"),
        pytest.param({"choices": []}, "no choices", id="empty-choices"),
        pytest.param({"error": {"message": "context too long"}}, "context too long", id="error"),
        pytest.param(
            {"choices": [{"message": {"content": "  \n"}, "finish_reason": "length"}]},
            "empty",
            id="empty-text",
        ),
        pytest.param(
            {"choices": [{"message": {"content": None, "tool_calls": []}}]}, "empty", id="no-text"
        ),
        pytest.param(
            {"choices": [{"message": {"content": "<think>hmm, let me see"}}]},
            "empty",
            id="only-thinking",
        ),
    ],
)
async def test_an_unusable_answer_is_a_response_error(
    server: ChatServer, body: bytes | dict[str, Any], reason: str
) -> None:
    server.reply(Reply(body=body))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerResponseError, match=reason) as caught:
            await s.summarize(request())
    assert len(server.received) == 1  # a bad answer is not retried
    assert caught.value.status_code == 200


# ── what comes back ────────────────────────────────────────────────────────────


async def test_an_answer_over_budget_is_cut_at_a_line_boundary(
    server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [f"{n}. EDIT src/module_{n}.py - renamed the helper [tool: patch]" for n in range(200)]
    server.reply(completion("## Completed Actions\n" + "\n".join(lines)))
    async with summarizer(server) as s:
        with caplog.at_level(logging.WARNING, logger="sessionstore.summarizers"):
            summary = await s.summarize(request(budget_tokens=200))
    assert estimate_tokens(summary.text) <= 200
    kept = summary.text.split("\n")
    assert kept[0] == "## Completed Actions"
    assert kept[1:] == lines[: len(kept) - 1]  # whole lines, in order
    assert len(kept) > 5
    assert "over its budget of 200" in caplog.text


async def test_a_single_line_over_budget_is_cut_at_a_space(server: ChatServer) -> None:
    server.reply(completion("word " * 2_000))
    async with summarizer(server) as s:
        summary = await s.summarize(request(budget_tokens=200))
    assert 0 < estimate_tokens(summary.text) <= 200
    assert set(summary.text.split()) == {"word"}


async def test_secrets_in_the_answer_are_redacted(server: ChatServer) -> None:
    server.reply(
        completion(
            f"## Critical Context\nThe key is {SECRET}; the database is "
            "postgres://admin:s3cr3t@db.internal/app"
        )
    )
    async with summarizer(server) as s:
        summary = await s.summarize(request())
    assert SECRET not in summary.text
    assert "s3cr3t" not in summary.text
    assert "postgres://admin:[REDACTED]@db.internal/app" in summary.text


async def test_text_parts_and_a_thinking_block_are_read(server: ChatServer) -> None:
    parts = [{"type": "text", "text": "<think>plan the digest</think>\n## Active Task\n"}]
    parts.append({"type": "text", "text": "None."})
    server.reply(Reply(body={"choices": [{"message": {"content": parts}}]}))
    async with summarizer(server) as s:
        summary = await s.summarize(request())
    assert summary.text == "## Active Task\nNone."
    assert summary.model == "test-model"  # the server named none: the configured one


# ── configuration and lifecycle ────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("base_url", "endpoint"),
    [
        ("http://localhost:8000/v1", "http://localhost:8000/v1/chat/completions"),
        ("http://localhost:8000/v1/", "http://localhost:8000/v1/chat/completions"),
        ("http://localhost:11434", "http://localhost:11434/v1/chat/completions"),
        ("https://api.example.com/openai/v1", "https://api.example.com/openai/v1/chat/completions"),
        ("http://h:1/v1/chat/completions", "http://h:1/v1/chat/completions"),
        (
            "https://x.example/v1?api-version=2",
            "https://x.example/v1/chat/completions?api-version=2",
        ),
    ],
)
def test_the_endpoint_is_built_from_the_base_url(base_url: str, endpoint: str) -> None:
    assert str(OpenAICompatibleSummarizer(base_url, "m").endpoint) == endpoint


@pytest.mark.parametrize("base_url", ["localhost:8000", "ftp://h/v1", "http://", "not a url", ""])
def test_a_bad_base_url_is_a_configuration_error(base_url: str) -> None:
    with pytest.raises(ConfigurationError, match="base_url"):
        OpenAICompatibleSummarizer(base_url, "m")


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"model": ""}, ValueError),
        ({"model": 3}, TypeError),
        ({"timeout": 0}, ValueError),
        ({"max_retries": -1}, ValueError),
        ({"max_retries": 1.5}, TypeError),
        ({"temperature": 3.0}, ValueError),
        ({"backoff": -1.0}, ValueError),
    ],
)
def test_bad_arguments_are_rejected(options: dict[str, Any], error: type[Exception]) -> None:
    settings = {"model": "m", **options}
    with pytest.raises(error):
        OpenAICompatibleSummarizer("http://localhost:8000/v1", **settings)


def test_credentials_in_the_base_url_are_not_shown() -> None:
    s = OpenAICompatibleSummarizer("https://user:pa55word@proxy.example/v1", "m")
    assert "pa55word" not in repr(s)


async def test_a_closed_summarizer_refuses_to_summarize(server: ChatServer) -> None:
    s = summarizer(server)
    await s.summarize(request())
    await s.aclose()
    await s.aclose()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        await s.summarize(request())


async def test_a_client_passed_in_is_not_closed(server: ChatServer) -> None:
    async with httpx.AsyncClient() as client:
        async with summarizer(server, client=client) as s:
            await s.summarize(request())
        assert not client.is_closed
        response = await client.post(f"{server.base_url}/chat/completions", json={"x": 1})
        assert response.status_code == 200
    assert len(server.received) == 2


async def test_the_client_it_created_is_closed(server: ChatServer) -> None:
    async with summarizer(server) as s:
        await s.summarize(request())
        client = s._client
    assert client is not None
    assert client.is_closed
