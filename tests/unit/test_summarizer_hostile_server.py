"""A summarizer server that lies (issue 17, items 4, 5 and 14), on a loopback server.

- The configured API key comes back in the answer, in forms no redaction pattern knows
  (the key is not a provider's): it is removed by value from every error, the digest,
  the model name, the log and the exception's args.
- An answer nested 100,000 levels deep is a `SummarizerResponseError`, not a
  `RecursionError`.
- An answer far larger than a digest is not read past `max_response_bytes`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sessionstore.errors import (
    SummarizerAuthError,
    SummarizerError,
    SummarizerResponseError,
    SummarizerUnavailableError,
)
from sessionstore.summarizers._openai_compatible import (
    DEFAULT_MAX_RESPONSE_BYTES,
    OpenAICompatibleSummarizer,
)
from tests.unit.test_summarizer_openai_compatible import (
    KEY_ENV,
    ChatServer,
    Reply,
    completion,
    request,
    server,
    summarizer,
)

__all__ = ["server"]  # the fixture, imported to be used here

KEY = "corp.gateway.7f3a19c2b8e4d6a0/K+q=="
"""A key that looks like no provider's, so only its value can find it."""
FORMS = [KEY, json.dumps(KEY)[1:-1], "corp.gateway.7f3a19c2b8e4d6a0%2FK%2Bq%3D%3D"]


def _leaks(error: BaseException) -> list[str]:
    seen = [str(error), repr(error), repr(error.args), *map(str, vars(error).values())]
    return [form for form in FORMS for text in seen if form in text]


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(Reply(body={"error": {"message": f"bad key {KEY}"}}), id="2xx-no-choices"),
        pytest.param(Reply(body={"error": f"key {json.dumps(KEY)[1:-1]} refused"}), id="escaped"),
        pytest.param(Reply(body=("x" * 290 + KEY).encode()), id="not-json-key-at-the-cut"),
        pytest.param(Reply(body=f"<html>{FORMS[2]}</html>".encode()), id="url-encoded"),
        pytest.param(Reply(status=400, body={"error": {"message": KEY}}), id="400"),
        pytest.param(Reply(status=401, body=f"no: {KEY}".encode()), id="401"),
    ],
)
async def test_the_key_is_in_no_error(server: ChatServer, keyed: None, reply: Reply) -> None:
    server.reply(reply)
    async with summarizer(server) as s:
        with pytest.raises(SummarizerError) as caught:
            await s.summarize(request())
    assert server.received[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert _leaks(caught.value) == []
    assert "[REDACTED]" in str(caught.value) or isinstance(caught.value, SummarizerAuthError)


async def test_the_key_is_in_no_error_after_retries(server: ChatServer, keyed: None) -> None:
    server.reply(*[Reply(status=503, body={"error": f"overloaded, key {KEY}"})] * 3)
    async with summarizer(server) as s:
        with pytest.raises(SummarizerUnavailableError) as caught:
            await s.summarize(request())
    assert _leaks(caught.value) == []


async def test_the_key_is_not_in_the_digest_the_model_or_the_log(
    server: ChatServer, keyed: None, caplog: pytest.LogCaptureFixture
) -> None:
    text = f"## Active Task\nThe key is {KEY}.\n" + "filler line\n" * 400
    server.reply(completion(text, model=f"model-{KEY}"))
    async with summarizer(server) as s:
        with caplog.at_level(logging.DEBUG, logger="sessionstore.summarizers"):
            summary = await s.summarize(request(budget_tokens=200))
    assert "over its budget" in caplog.text  # the log names the model
    for form in FORMS:
        assert form not in summary.text
        assert form not in summary.model
        assert form not in caplog.text
    assert "The key is [REDACTED]." in summary.text


async def test_a_placeholder_key_is_left_in_the_digest(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "ollama")
    server.reply(completion("## Active Task\nServe the model with ollama."))
    async with summarizer(server) as s:
        summary = await s.summarize(request())
    assert summary.text.endswith("Serve the model with ollama.")


@pytest.mark.parametrize("depth", [3_000, 100_000])
async def test_an_answer_nested_too_deep_is_a_response_error(
    server: ChatServer, depth: int
) -> None:
    server.reply(Reply(body=b"[" * depth + b"]" * depth))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerResponseError, match="nested too deeply"):
            await s.summarize(request())
    assert len(server.received) == 1


async def test_an_error_nested_too_deep_is_still_explained(server: ChatServer) -> None:
    server.reply(Reply(status=400, body=b'{"error": ' + b"[" * 100_000))
    async with summarizer(server) as s:
        with pytest.raises(SummarizerResponseError, match="HTTP 400"):
            await s.summarize(request())


async def test_an_answer_past_the_cap_is_not_read(server: ChatServer) -> None:
    huge = completion("word " * 200_000)  # 1 MB of text
    server.reply(huge, huge)
    async with summarizer(server, max_response_bytes=64 * 1024) as s:
        with pytest.raises(SummarizerResponseError, match="max_response_bytes") as caught:
            await s.summarize(request())
    assert "65,536 bytes" in str(caught.value)
    assert len(server.received) == 1  # not retried


async def test_a_gigabyte_answer_is_read_no_further_than_the_cap() -> None:
    """A server streaming 1 GB without a length: the client stops pulling at the cap."""
    chunk = b"x" * 65_536
    pulled = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal pulled
        yield b'{"choices": [{"message": {"content": "'
        for _ in range(2**30 // len(chunk)):
            pulled += len(chunk)
            yield chunk

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body())

    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client,
        OpenAICompatibleSummarizer("http://127.0.0.1:1/v1", "m", client=client) as s,
    ):
        with pytest.raises(SummarizerResponseError, match="max_response_bytes"):
            await s.summarize(request())
    assert pulled <= DEFAULT_MAX_RESPONSE_BYTES + len(chunk)


async def test_a_declared_length_past_the_cap_is_refused_unread() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"Content-Length": str(2**40)}, content=b"{}")

    async with (
        httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client,
        OpenAICompatibleSummarizer("http://127.0.0.1:1/v1", "m", client=client) as s,
    ):
        with pytest.raises(SummarizerResponseError, match="max_response_bytes"):
            await s.summarize(request())


async def test_an_answer_within_the_cap_is_read(server: ChatServer) -> None:
    server.reply(completion("## Active Task\nDone."))
    async with summarizer(server, max_response_bytes=4096) as s:
        summary = await s.summarize(request())
    assert summary.text.endswith("Done.")


@pytest.mark.parametrize(
    ("options", "error"),
    [({"max_response_bytes": 0}, ValueError), ({"max_response_bytes": 1.5}, TypeError)],
)
def test_a_bad_cap_is_refused(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        OpenAICompatibleSummarizer("http://127.0.0.1:1/v1", "m", **options)
