"""What an OpenAI-compatible server answered, read without trusting it (pure).

`OpenAICompatibleSummarizer` reads a response once (`Answer`: status, headers, a capped
body) and takes from it only what these helpers let through: the JSON, if it parses
within Python's depth; the digest's text, a leading `<think>` block dropped, cut to the
budget at a line; the server's own explanation of an error; the delay a `Retry-After`
asks for. Whatever goes into an error message passes `scrub`: the configured API key
removed in every form it can be echoed in (`scrub_key`), secrets redacted, the length
bounded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, quote_plus

import httpx

from sessionstore._redact import REDACTED, redact
from sessionstore._tokens import estimate_tokens

__all__ = [
    "Answer",
    "answer_text",
    "error_detail",
    "fit_to_budget",
    "parse_json",
    "retry_after_seconds",
    "scrub",
    "scrub_key",
    "text_of",
    "without_thinking",
]

_ERROR_DETAIL_CHARS = 300
"""The most characters of a server's text an error message quotes."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What was read of a response: its status, headers and (capped) body."""

    status: int
    reason: str
    headers: httpx.Headers
    body: bytes
    too_large: bool = False
    """True when a 2xx body went past `max_response_bytes` (it was not read whole)."""
    is_undecodable: bool = False
    """True when the body's content encoding (gzip, ...) could not be decoded."""

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def _key_forms(key: str) -> list[str]:
    """The ways a key can be written back: as it is, JSON-escaped, URL-encoded."""
    forms = {key, json.dumps(key)[1:-1], quote(key, safe=""), quote_plus(key)}
    return sorted(forms, key=len, reverse=True)


def scrub_key(text: str, key: str | None, *, min_chars: int = 1) -> str:
    """Return `text` with every occurrence of the API key (in any written form) redacted."""
    if not key or len(key) < min_chars:
        return text
    for form in _key_forms(key):
        text = text.replace(form, REDACTED)
    return text


def scrub(text: str, key: str | None) -> str:
    """Return `text` safe to put in an error message: no key, no secret, not too long."""
    # Cut to a bounded window first (an error body may be large), with room for a key
    # that straddles the cut, then scrub, then cut to the final length.
    window = _ERROR_DETAIL_CHARS * 4 + (len(key) * 3 if key else 0)
    text = scrub_key(text[:window], key)
    text = " ".join(redact(text).split())
    return text if len(text) <= _ERROR_DETAIL_CHARS else text[: _ERROR_DETAIL_CHARS - 1] + "…"


def parse_json(body: bytes) -> tuple[Any, str | None]:
    """Return the decoded body and None, or None and what is wrong with it."""
    try:
        return json.loads(body), None
    except RecursionError:
        return None, "JSON nested too deeply to read"
    except ValueError:
        return None, "not JSON"


def text_of(value: object) -> str:
    """Return a decoded JSON value as text (a string as it is)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError):  # pragma: no cover - a parsed value re-encodes
        return type(value).__name__


def error_detail(response: Answer, key: str | None) -> str:
    """Return the server's own explanation of an error status, if it gave one."""
    data, problem = parse_json(response.body)
    if problem is not None:
        return scrub(response.text, key) or response.reason
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if error:
            return scrub(text_of(error), key)
    return response.reason


def retry_after_seconds(value: str | None) -> float | None:
    """Return the seconds a `Retry-After` header asks for (a number or an HTTP date)."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(seconds, 0.0)


def answer_text(content: object) -> str:
    """Return the text of a message's `content`: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def without_thinking(text: str) -> str:
    """Drop a leading `<think>...</think>` block, which some reasoning models put in the text."""
    stripped = text.lstrip()
    if not stripped.startswith("<think>"):
        return text
    end = stripped.find("</think>")
    return stripped[end + len("</think>") :] if end >= 0 else ""


def fit_to_budget(text: str, budget_tokens: int) -> str:
    """Return `text` cut after its last line that fits `budget_tokens` (the heuristic's count).

    When even the first line does not fit, it is cut at the last space that fits.
    """
    if estimate_tokens(text) <= budget_tokens:
        return text
    max_bytes = budget_tokens * 4  # estimate_tokens is ceil(UTF-8 bytes / 4)
    kept: list[str] = []
    used = 0
    for line in text.split("\n"):
        cost = len(line.encode()) + (1 if kept else 0)
        if used + cost > max_bytes:
            break
        kept.append(line)
        used += cost
    fitted = "\n".join(kept).rstrip()
    if fitted:
        return fitted
    head = text.encode()[:max_bytes].decode(errors="ignore")
    cut = head.rsplit(None, 1)[0] if len(head.split(None, 1)) > 1 else head
    return cut.rstrip()
