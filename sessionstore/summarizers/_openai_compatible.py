"""A summarizer backed by any `/v1/chat/completions` endpoint: OpenAI, vLLM, llama.cpp, Ollama.

`OpenAICompatibleSummarizer` sends the handoff prompt of `sessionstore.summarizers._prompt`
through httpx, with the secrets of everything it sends and receives redacted, retries
what retrying can fix (connection errors, timeouts, 429, 5xx) with exponential backoff,
and turns every failure into a typed `SummarizerError` that says how to fix it.

The server is not trusted: it may hang, lie, answer gigabytes or JSON nested a hundred
thousand levels deep, or echo the API key back. What is read of an answer is capped
(`max_response_bytes`), a body too deep to parse is a `SummarizerResponseError`, and the
configured key is removed by value (not only by the patterns of `redact`) from everything
that comes back: the digest, the model name, error messages and the log. Reading an answer
is `_chat_answers`'s.

```python
async with OpenAICompatibleSummarizer("http://localhost:8000/v1", "qwen2.5-7b-instruct") as s:
    summary = await s.summarize(SummaryRequest(messages=folded, budget_tokens=1_000))
```
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any, Self

import httpx

from sessionstore._redact import redact, redact_message
from sessionstore._tokens import estimate_tokens
from sessionstore.errors import (
    ConfigurationError,
    SummarizerAuthError,
    SummarizerError,
    SummarizerResponseError,
    SummarizerTimeoutError,
    SummarizerUnavailableError,
)
from sessionstore.models import Message
from sessionstore.summarizers._chat_answers import (
    Answer,
    answer_text,
    error_detail,
    fit_to_budget,
    parse_json,
    retry_after_seconds,
    scrub,
    scrub_key,
    text_of,
    without_thinking,
)
from sessionstore.summarizers._prompt import (
    PROMPT_VERSION,
    SummaryPrompt,
    build_summary_prompt,
    rendered_sizes,
)
from sessionstore.summarizers._protocol import Summary, SummaryRequest

__all__ = ["OpenAICompatibleSummarizer"]

logger = logging.getLogger("sessionstore.summarizers")

OUTPUT_HEADROOM = 1.25
"""`max_tokens` asked of the server, as a multiple of the digest's budget.

The budget is counted with sessionstore's heuristic and the server counts with its own
tokenizer, so the server gets some room and the answer is then cut to the budget here,
at a line boundary, rather than mid-sentence by the server."""

DEFAULT_MAX_PROMPT_TOKENS = 100_000
"""The most tokens one request's prompt may hold (sessionstore's estimate): fits a model of a
128,000-token window with room for the answer. Longer turns go in several requests, each
updating the digest of the ones before (the iterative update of seeds 001 and 003)."""
MIN_PROMPT_TOKENS = 4_000
"""The smallest `max_prompt_tokens`: the template, a prior digest and a few messages."""

_RETRIED_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_ERROR_BODY_BYTES = 64 * 1024
"""What is read of an error status's body: enough for the server's explanation."""
_MODEL_NAME_CHARS = 200
"""The longest model name kept from an answer (it goes into the stored provenance)."""
MIN_SCRUBBED_KEY_CHARS = 8
"""A key shorter than this (`EMPTY`, `ollama`: the placeholders local servers take) is
not searched for in the digest, where replacing the word would garble it; it is still
removed from error messages."""
DEFAULT_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""The most bytes read of an answer: a digest's budget is a few thousand tokens at most."""


class OpenAICompatibleSummarizer:
    """A `Summarizer` that asks a chat-completions model for the handoff digest.

    Args:
        base_url: the API root, such as `https://api.openai.com/v1`,
            `http://localhost:8000/v1` (vLLM, llama.cpp server) or
            `http://localhost:11434/v1` (Ollama). A URL with no path gets `/v1`; a URL that
            already ends in `/chat/completions` is used as it is.
        model: the model name the server knows.
        api_key_env: the environment variable that holds the API key, read at each call;
            when it is unset (or `api_key_env` is None) no key is sent, which local
            servers accept.
        timeout: seconds one attempt may take, from connecting to the last byte.
        max_retries: attempts after the first, for connection errors, timeouts, 408,
            429 and 5xx. 401, 403 and other 4xx are not retried.
        temperature: sent as is; None leaves it out (for models that reject it).
        backoff: seconds before the first retry; each later retry waits twice as long,
            up to `max_backoff`. A `Retry-After` from the server is used instead.
        max_backoff: the longest wait between two attempts, backoff or `Retry-After`.
            A server that asks for a longer wait fails the call at once with
            `SummarizerUnavailableError` (its `retry_after` says how long).
        client: an `httpx.AsyncClient` to send through (proxies, TLS, tests); a client
            passed in is not closed by `aclose()`.
        max_response_bytes: the most bytes of an answer read (after decompression); a
            longer answer is a `SummarizerResponseError`, and is not read further.

    Raises:
        ConfigurationError: `base_url` is not an http(s) URL with a host.
        TypeError: `model` is not a string or `max_retries` not an int.
        ValueError: `model` is empty, or a number is out of range.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout: float = 60.0,
        max_retries: int = 2,
        temperature: float | None = 0.2,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        client: httpx.AsyncClient | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_prompt_tokens: int | None = DEFAULT_MAX_PROMPT_TOKENS,
    ) -> None:
        _check_type("model", model, str)
        _check_type("max_retries", max_retries, int)
        _check_type("max_response_bytes", max_response_bytes, int)
        if max_response_bytes < 1:
            raise ValueError(f"max_response_bytes must be positive, got {max_response_bytes}")
        if max_prompt_tokens is not None:
            _check_type("max_prompt_tokens", max_prompt_tokens, int)
            if max_prompt_tokens < MIN_PROMPT_TOKENS:
                raise ValueError(
                    f"max_prompt_tokens must be at least {MIN_PROMPT_TOKENS:,}, "
                    f"got {max_prompt_tokens}"
                )
        if not model.strip():
            raise ValueError("model must be a non-empty model name")
        if not timeout > 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {max_retries}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError("backoff and max_backoff must not be negative")
        if temperature is not None and not 0 <= temperature <= 2:
            raise ValueError(f"temperature must be between 0 and 2, got {temperature}")
        self.endpoint = _endpoint(base_url)
        self.model = model
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.temperature = temperature
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_response_bytes = max_response_bytes
        self.max_prompt_tokens = max_prompt_tokens
        self._client = client
        self._owns_client = client is None
        self._closed = False
        self._display_url = redact(str(self.endpoint))

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleSummarizer({self._display_url!r}, {self.model!r}, "
            f"api_key_env={self.api_key_env!r}, timeout={self.timeout}, "
            f"max_retries={self.max_retries})"
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the HTTP client, if this summarizer created it. Calling it twice is fine."""
        self._closed = True
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    def prompt_for(self, request: SummaryRequest) -> SummaryPrompt:
        """Return the prompt `summarize` sends for `request`, with every secret redacted."""
        safe = SummaryRequest(
            messages=[redact_message(message) for message in request.messages],
            prior_digest=redact(request.prior_digest) if request.prior_digest else None,
            focus_topic=redact(request.focus_topic) if request.focus_topic else None,
            budget_tokens=request.budget_tokens,
            scope=request.scope,
        )
        prompt = build_summary_prompt(safe)
        return SummaryPrompt(system=prompt.system, user=redact(prompt.user))

    async def summarize(self, request: SummaryRequest) -> Summary:
        """Return the model's digest of `request.messages`, redacted and within the budget.

        A longer answer is cut at the last line that fits (and a warning is logged).

        Raises:
            SummarizerUnavailableError: the server cannot be reached, or kept answering
                429 or 5xx through every retry.
            SummarizerTimeoutError: no answer within `timeout`, on every attempt.
            SummarizerAuthError: the server refused the credentials (401, 403).
            SummarizerResponseError: the answer holds no usable text, or the server
                rejected the request (another 4xx).
            RuntimeError: the summarizer was closed.
        """
        if self._closed:
            raise RuntimeError("this OpenAICompatibleSummarizer is closed; create a new one")
        prompt = self.prompt_for(request)
        parts = self._parts(request, prompt)
        if len(parts) == 1:
            return await self._summarize_once(request, prompt)
        # Too long for one prompt: each part updates the digest of the parts before it.
        logger.info(
            "the turns to summarise need %d prompts of at most %d tokens each",
            len(parts),
            self.max_prompt_tokens,
        )
        clock = time.perf_counter()
        summary: Summary | None = None
        prior = request.prior_digest
        for messages in parts:
            summary = await self._summarize_once(
                replace(request, messages=messages, prior_digest=prior)
            )
            prior = summary.text
        assert summary is not None
        return replace(summary, duration_ms=(time.perf_counter() - clock) * 1000)

    def _parts(self, request: SummaryRequest, prompt: SummaryPrompt) -> list[Sequence[Message]]:
        """Split the turns into runs whose prompts each fit `max_prompt_tokens`, in order.

        One run when the whole prompt fits (or there is no cap). Otherwise the room a
        prompt leaves for its transcript, besides the framing, the template and the
        largest prior digest it may carry (the request's, or the budget a digest of an
        earlier run may take), is filled message by message, as the transcript renders
        each one (a message alone is at most a few thousand tokens: its text and its
        tool output are shortened when rendered).
        """
        cap = self.max_prompt_tokens
        messages = request.messages
        if cap is None or len(messages) < 2:
            return [messages]
        if estimate_tokens(prompt.system) + estimate_tokens(prompt.user) <= cap:
            return [messages]
        # The update framing (a prior digest of one character), without its transcript.
        empty = self.prompt_for(replace(request, messages=[], prior_digest="."))
        prior = max(
            estimate_tokens(request.prior_digest or ""),
            math.ceil(request.budget_tokens * OUTPUT_HEADROOM),
        )
        overhead = estimate_tokens(empty.system) + estimate_tokens(empty.user) + prior
        room = max(cap - overhead, MIN_PROMPT_TOKENS // 2)
        sizes = rendered_sizes([redact_message(message) for message in messages])
        parts: list[Sequence[Message]] = []
        start, used = 0, 0
        for index, size in enumerate(sizes):
            if index > start and used + size > room:
                parts.append(messages[start:index])
                start, used = index, 0
            used += size
        parts.append(messages[start:])
        return parts

    async def _summarize_once(
        self, request: SummaryRequest, prompt: SummaryPrompt | None = None
    ) -> Summary:
        """One request to the server for `request` (see `summarize`), its `prompt` if known."""
        clock = time.perf_counter()
        if prompt is None:
            prompt = self.prompt_for(request)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": prompt.as_chat_messages(),
            "max_tokens": math.ceil(request.budget_tokens * OUTPUT_HEADROOM),
            "stream": False,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        # Lone surrogates cannot be sent as UTF-8; they become "?" rather than an error.
        content = json.dumps(body, ensure_ascii=False).encode("utf-8", errors="replace")
        headers, key = self._headers()
        try:
            answer, attempts = await self._post(content, headers, key)
            text, model = self._read_answer(answer, attempts, key)
        except SummarizerError as error:
            # Every message is built scrubbed; this makes sure of it, whatever was missed.
            error.args = tuple(scrub_key(str(arg), key) for arg in error.args)
            if error.url is not None:
                error.url = scrub_key(error.url, key)
            raise
        text = redact(scrub_key(text, key, min_chars=MIN_SCRUBBED_KEY_CHARS))
        model = scrub(scrub_key(model, key), None)[:_MODEL_NAME_CHARS]
        fitted = fit_to_budget(text, request.budget_tokens)
        if fitted != text:
            logger.warning(
                "summary from %s was %d tokens, over its budget of %d: cut to %d tokens",
                model,
                estimate_tokens(text),
                request.budget_tokens,
                estimate_tokens(fitted),
            )
        return Summary(
            text=fitted,
            model=model,
            prompt_version=PROMPT_VERSION,
            duration_ms=(time.perf_counter() - clock) * 1000,
        )

    # ── HTTP ───────────────────────────────────────────────────────────────────

    def _headers(self) -> tuple[dict[str, str], str | None]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = os.environ.get(self.api_key_env) if self.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers, key or None

    async def _exchange(self, content: bytes, headers: dict[str, str]) -> Answer:
        """Send the request once; read at most `max_response_bytes` of a 2xx answer."""
        assert self._client is not None
        request = self._client.build_request(
            "POST", self.endpoint, content=content, headers=headers
        )
        response = await self._client.send(request, stream=True)
        try:
            is_success = 200 <= response.status_code < 300
            limit = self.max_response_bytes if is_success else _ERROR_BODY_BYTES
            declared = response.headers.get("Content-Length", "")
            too_large = is_success and declared.isdigit() and int(declared) > limit
            body = bytearray()
            is_undecodable = False
            try:
                if not too_large:
                    async for chunk in response.aiter_bytes():
                        if len(body) + len(chunk) > limit:
                            # An error's explanation is cut; a digest that long is refused.
                            too_large = is_success
                            body += chunk[: limit - len(body)]
                            break
                        body += chunk
            except httpx.DecodingError:
                body, is_undecodable = bytearray(), True
            return Answer(
                response.status_code,
                response.reason_phrase,
                response.headers,
                bytes(body),
                too_large=too_large,
                is_undecodable=is_undecodable,
            )
        finally:
            await response.aclose()

    async def _post(
        self, content: bytes, headers: dict[str, str], key: str | None
    ) -> tuple[Answer, int]:
        """Send the request, retrying what can be retried; return the 2xx answer."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout))
        attempts = self.max_retries + 1
        failure: SummarizerError | None = None
        for attempt in range(1, attempts + 1):
            retry_after: float | None = None
            try:
                async with asyncio.timeout(self.timeout):
                    response = await self._exchange(content, headers)
            except (TimeoutError, httpx.TimeoutException):
                failure = SummarizerTimeoutError(
                    f"the summarizer at {self._display_url} did not answer within "
                    f"{self.timeout:g} s, on {attempt} attempt(s). Raise `timeout`, use a "
                    "faster model, or fold fewer messages at once.",
                    url=self._display_url,
                    attempts=attempt,
                )
            except httpx.TransportError as exc:
                reason = scrub(f"{type(exc).__name__}: {exc}", key)
                failure = SummarizerUnavailableError(
                    f"could not reach the summarizer at {self._display_url} after {attempt} "
                    f"attempt(s) ({reason}). Check that the server is running and that "
                    "base_url is right (for example http://localhost:8000/v1).",
                    url=self._display_url,
                    attempts=attempt,
                )
            else:
                status = response.status
                if 200 <= status < 300:
                    return response, attempt
                detail = error_detail(response, key)
                if status in (401, 403):
                    raise SummarizerAuthError(
                        f"the summarizer at {self._display_url} refused the credentials "
                        f"(HTTP {status}: {detail}). {self._key_advice(key)}",
                        url=self._display_url,
                        status_code=status,
                        attempts=attempt,
                    )
                if status not in _RETRIED_STATUSES:
                    raise SummarizerResponseError(
                        f"the summarizer at {self._display_url} rejected the request with "
                        f"HTTP {status} ({detail}). Check the model name ({self.model!r}) "
                        "and base_url.",
                        url=self._display_url,
                        status_code=status,
                        attempts=attempt,
                    )
                retry_after = retry_after_seconds(response.headers.get("Retry-After"))
                what = "is rate limiting requests" if status == 429 else "kept failing"
                failure = SummarizerUnavailableError(
                    f"the summarizer at {self._display_url} {what}: HTTP {status} after "
                    f"{attempt} attempt(s) ({detail}). Try again later"
                    + (f" (the server asks for {retry_after:g} s)" if retry_after else "")
                    + ", or use another summarizer.",
                    url=self._display_url,
                    status_code=status,
                    attempts=attempt,
                    retry_after=retry_after,
                )
                if retry_after is not None and retry_after > self.max_backoff:
                    raise failure  # waiting that long here would stall the caller
            if attempt < attempts:
                delay = min(self.backoff * 2 ** (attempt - 1), self.max_backoff)
                await asyncio.sleep(retry_after if retry_after is not None else delay)
        assert failure is not None  # the loop ran at least once and did not return
        raise failure

    def _key_advice(self, key: str | None) -> str:
        if self.api_key_env is None:
            return "No API key is sent (api_key_env=None); name the variable that holds one."
        if key is None:
            return (
                f"No API key was sent: the environment variable {self.api_key_env} is not "
                "set. Set it, or name another variable with api_key_env."
            )
        return f"Check the API key in the environment variable {self.api_key_env}."

    def _read_answer(self, response: Answer, attempts: int, key: str | None) -> tuple[str, str]:
        """Return the answer's text and the model that wrote it."""

        def fail(what: str) -> SummarizerResponseError:
            return SummarizerResponseError(
                f"the summarizer at {self._display_url} answered without a usable digest: "
                f"{what}. Check that base_url points at a /v1/chat/completions API and that "
                f"the model {self.model!r} can write text.",
                url=self._display_url,
                status_code=response.status,
                attempts=attempts,
            )

        if response.too_large:
            raise fail(
                f"the answer is larger than max_response_bytes ({self.max_response_bytes:,} "
                "bytes), far more than a digest; it was not read further"
            )
        if response.is_undecodable:
            encoding = scrub(response.headers.get("Content-Encoding", ""), key)
            raise fail(f"the body cannot be decoded (Content-Encoding {encoding!r})")
        data, problem = parse_json(response.body)
        if problem is not None:
            # Raised here, not in an `except` block: the parser's error holds the whole body.
            snippet = scrub(response.text, key)
            raise fail(f"the body is {problem} ({snippet!r})")
        if not isinstance(data, dict):
            raise fail(f"the body is a JSON {type(data).__name__}, not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            error = data.get("error")
            if error:
                raise fail(f"no choices, and an error: {scrub(text_of(error), key)}")
            raise fail("no choices")
        first = choices[0]
        message = first.get("message") if isinstance(first, dict) else None
        text = answer_text(message.get("content") if isinstance(message, dict) else None)
        text = without_thinking(text).strip()
        if not text:
            reason = first.get("finish_reason") if isinstance(first, dict) else None
            raise fail(f"the text is empty (finish_reason: {reason!r})")
        model = data.get("model")
        return text, model if isinstance(model, str) and model else self.model


# ── helpers ────────────────────────────────────────────────────────────────────


def _check_type(name: str, value: object, kind: type) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")


def _endpoint(base_url: str) -> httpx.URL:
    """Return the chat-completions URL of an API root."""
    if not isinstance(base_url, str):
        raise ConfigurationError(f"base_url must be a string, got {type(base_url).__name__}")
    try:
        url = httpx.URL(base_url.strip())
    except httpx.InvalidURL as exc:
        raise ConfigurationError(f"base_url {redact(base_url)!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError(
            f"base_url {redact(base_url)!r} must be an http:// or https:// URL with a host, "
            "such as http://localhost:8000/v1"
        )
    path = url.path.rstrip("/")
    if not path.endswith("/chat/completions"):
        path = f"{path or '/v1'}/chat/completions"
    return url.copy_with(path=path)
