r"""Secret redaction: API keys, tokens, passwords and private keys become `[REDACTED]`.

`redact` rewrites a text and `redact_message` a whole message, so that what a summarizer
receives and returns (and, optionally, the whole built context) carries no credential.
It is pure, never raises on a string, runs in linear time (every repetition is bounded
or possessive, so no input makes the regular expressions backtrack), and is idempotent:
redacting twice gives the same text as redacting once.

>>> redact("export OPENAI_API_KEY=sk-proj-4fJ2kLmN8pQrStUvWxYz0123")
'export OPENAI_API_KEY=[REDACTED]'
>>> redact("postgresql://app:hunter2@db.internal:5432/prod")
'postgresql://app:[REDACTED]@db.internal:5432/prod'
>>> redact("git checkout 3f2c1e9a7b6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e")
'git checkout 3f2c1e9a7b6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e'

What is found, and what it becomes:

- provider keys (`sk-...`, `sk-proj-...`, `sk-ant-...`, `AKIA...`, `ghp_...`,
  `github_pat_...`, `xoxb-...`, `AIza...`, `sk_live_...`, `glpat-...`, `hf_...`,
  `npm_...`) and JWTs: `[REDACTED]`; an AWS secret key right after its key id too;
- the value assigned to a secret-named key (`api_key=...`, `"token": "..."`,
  `password: ...`, `--password ...`): the key is kept, the value becomes `[REDACTED]`;
- authorization headers and bearer tokens: `Authorization: Bearer [REDACTED]`;
- passwords in URLs, connection URLs included: `scheme://user:[REDACTED]@host`;
- ADO-style connection strings: `...;Password=[REDACTED];`;
- private key blocks: the BEGIN and END markers are kept, the body becomes `[REDACTED]`.

Ordinary text is left alone: code (`password = form.cleaned_data["password"]`), type
annotations (`token: str`), file paths, git SHAs, UUIDs and other hashes. An unquoted
value is taken for a secret only when it looks like one (a digit or a symbol in it, or
an upper-case environment-style key); a quoted value of four characters or more always is,
unless it is a placeholder (`${TOKEN}`, `<token>`, `***`, `None`, a path).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["REDACTED", "redact", "redact_message"]

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""

_MIN_SECRET_CHARS = 4
_KEY_LOOKBACK = 80


@dataclass(frozen=True, slots=True)
class _Rule:
    """One kind of secret: where to look, and what to put in place of a match.

    A `folded` rule matches lower-case text: its pattern runs on `text.lower()` (same
    offsets whenever lower-casing keeps the length, which it does for all but a few
    characters; otherwise `fallback`, compiled with IGNORECASE, runs on the text itself,
    which is several times slower). `replace` reads the original text through the
    match's offsets and returns the replacement of the whole match, or None to keep it.
    """

    pattern: re.Pattern[str]
    replace: Callable[[re.Match[str], str], str | None]
    needles: tuple[str, ...]
    """The rule runs only when one of these is in the text (lower-cased for a folded rule)."""
    folded: bool
    fallback: re.Pattern[str]
    """The pattern compiled with IGNORECASE, for a folded rule (else `pattern` again)."""


def _rule(
    source: str,
    replace: Callable[[re.Match[str], str], str | None],
    needles: tuple[str, ...],
    *,
    folded: bool = False,
) -> _Rule:
    pattern = re.compile(source, re.VERBOSE)
    fallback = re.compile(source, re.VERBOSE | re.IGNORECASE) if folded else pattern
    return _Rule(pattern, replace, needles, folded, fallback)


def _group(match: re.Match[str], text: str, name: str) -> str:
    """Return group `name` of a match on `text` or on its lower-case copy, as written in `text`."""
    start, end = match.span(name)
    return text[start:end] if start >= 0 else ""


def _span(match: re.Match[str], text: str, start_group: str | int, end_group: str | int) -> str:
    return text[match.start(start_group) : match.end(end_group)]


def _apply(rule: _Rule, text: str, lowered: str) -> str:
    """Apply one rule to `text`, whose lower-case copy is `lowered`."""
    pattern = rule.pattern
    haystack = text
    if rule.folded:
        if not any(needle in lowered for needle in rule.needles):
            return text
        if len(lowered) == len(text):
            haystack = lowered
        else:
            pattern = rule.fallback
    elif not any(needle in text for needle in rule.needles):
        return text
    pieces: list[str] = []
    done = 0
    for match in pattern.finditer(haystack):
        new = rule.replace(match, text)
        if new is not None:
            pieces.append(text[done : match.start()])
            pieces.append(new)
            done = match.end()
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


# ── private key blocks ─────────────────────────────────────────────────────────

_NEWLINE = r"(?:\r?\n|(?:\\r)?\\n)"  # a line break, or one escaped inside a JSON string
_KEY_MATERIAL = re.compile(r"[A-Za-z0-9+/=]{16}|\[REDACTED\]")
_FIRST_NEWLINE = re.compile(_NEWLINE)
_TRAILING_SPACE = re.compile(rf"(?:{_NEWLINE}|[ \t])*+$")


def _replace_private_key(match: re.Match[str], text: str) -> str | None:
    body = match["body"]
    if not _KEY_MATERIAL.search(body):
        return None  # a marker alone, as code that looks for one writes it
    newline = _FIRST_NEWLINE.search(body)
    trailing = _TRAILING_SPACE.search(body)
    return "".join(
        (
            match["begin"],
            newline[0] if newline else "\n",
            REDACTED,
            trailing[0] if trailing else "",
            match["end"] or "",
        )
    )


# Lines of base64, `Header: value` lines or an earlier `[REDACTED]`, up to the END marker
# when there is one (a block cut short, as in truncated tool output, has none).
_PRIVATE_KEYS = _rule(
    rf"""
    (?P<begin>-----BEGIN[ ](?P<label>[A-Z0-9 ]{{0,40}}?)PRIVATE[ ]KEY(?:[ ]BLOCK)?-----)
    (?P<body>(?:{_NEWLINE}[ \t]{{0,8}}+
        (?:[A-Za-z0-9+/=]{{1,256}}+(?={_NEWLINE}|$|["'])
          |[A-Za-z][A-Za-z0-9-]{{0,40}}+:[^\r\n\\]{{0,256}}+
          |\[REDACTED\])?
    ){{0,4096}}+)
    (?P<end>{_NEWLINE}?[ \t]{{0,8}}+-----END[ ](?P=label)PRIVATE[ ]KEY(?:[ ]BLOCK)?-----)?
    """,
    _replace_private_key,
    ("PRIVATE KEY",),
)

# ── provider keys and tokens: the whole match is the secret ────────────────────


def _replace_provider_key(match: re.Match[str], text: str) -> str | None:
    token = match[0]
    if token.startswith("sk-") and not any(char.isdigit() for char in token):
        return None  # a hyphenated word, such as `sk-learn-style-identifier-names`
    return REDACTED


# One pattern per prefix, so that each runs as a fast literal search; the lookbehind after
# the prefix checks that no token character comes before it.
_PROVIDER_KEYS = tuple(
    _rule(source, _replace_provider_key, (needle,))
    for needle, source in (
        ("sk-", r"sk-(?<![A-Za-z0-9_-].{3})[A-Za-z0-9_-]{20,}+"),  # OpenAI, Anthropic
        ("k_live_", r"[sr]k_live_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{16,}+"),  # Stripe
        ("k_test_", r"[sr]k_test_(?<![A-Za-z0-9_].{8})[A-Za-z0-9]{16,}+"),  # Stripe
        ("gh", r"gh[pousr]_(?<![A-Za-z0-9_].{4})[A-Za-z0-9]{36,}+"),  # GitHub
        ("github_pat_", r"github_pat_(?<![A-Za-z0-9_].{11})[A-Za-z0-9_]{22,}+"),  # GitHub
        ("xox", r"xox[abposr]-(?<![A-Za-z0-9_-].{5})[A-Za-z0-9-]{10,}+"),  # Slack
        ("AIza", r"AIza(?<![A-Za-z0-9_-].{4})[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])"),  # Google
        ("glpat-", r"glpat-(?<![A-Za-z0-9_-].{6})[A-Za-z0-9_-]{20,}+"),  # GitLab
        ("hf_", r"hf_(?<![A-Za-z0-9_-].{3})[A-Za-z0-9]{30,}+"),  # Hugging Face
        ("npm_", r"npm_(?<![A-Za-z0-9_-].{4})[A-Za-z0-9]{36,}+"),  # npm
        (  # JSON Web Tokens
            "eyJ",
            r"eyJ(?<![A-Za-z0-9_-].{3})[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{8,}+",
        ),
    )
)


def _replace_aws_key(match: re.Match[str], text: str) -> str | None:
    if match["secret"] is None:
        return REDACTED
    return f"{REDACTED}{match['sep']}{REDACTED}"


# An access key id, and the secret access key when it follows (as in a credentials CSV).
_AWS_KEYS = _rule(
    r"""
    (?:AKIA|ASIA|ABIA|ACCA)(?<![A-Za-z0-9].{4})[A-Z0-9]{16}(?![A-Za-z0-9])
    (?:(?P<sep>[ \t,;:|"'=]{1,8}+)(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=]))?
    """,
    _replace_aws_key,
    ("AKIA", "ASIA", "ABIA", "ACCA"),
)

_SLACK_WEBHOOKS = _rule(
    r"hooks\.slack\.com/services/[A-Za-z0-9/_-]{20,}+",
    lambda match, text: f"hooks.slack.com/services/{REDACTED}",
    ("hooks.slack.com/services/",),
)

# ── credentials inside URLs, headers and connection strings ────────────────────


def _replace_url_password(match: re.Match[str], text: str) -> str | None:
    if _is_placeholder(match["password"]):
        return None
    return f"://{match['user']}{REDACTED}@"


# `scheme://user:password@host`. The password part backtracks (it may hold an `@`), but
# over 256 characters at most, and only where `://` and `user:` were already found.
_URL_PASSWORDS = _rule(
    r"""
    ://(?<=[A-Za-z0-9]://)
    (?P<user>[^\s:/?#@"'<>\[\]{}]{0,256}+:)
    (?P<password>[^\s/?#"'<>{}]{1,256})@
    """,
    _replace_url_password,
    ("://",),
)


def _replace_authorization(match: re.Match[str], text: str) -> str | None:
    credential = _group(match, text, "credential")
    if match.start("scheme") < 0 and not _has_digit_or_symbol(credential):
        return None  # prose, such as "Authorization: required for uploads"
    return _span(match, text, 0, "keep") + REDACTED


_AUTHORIZATION = _rule(
    r"""
    (?P<keep>authorization(?<![a-z0-9_].{13})["']?[ \t]{0,8}[:=][ \t]{0,8}["']?
      (?P<scheme>(?:bearer|basic|token|digest|bot|apikey)[ \t]{1,8}+)?)
    (?P<credential>[a-z0-9._~+/=:-]{8,}+)
    """,
    _replace_authorization,
    ("authorization",),
    folded=True,
)


def _replace_bearer(match: re.Match[str], text: str) -> str | None:
    if not any(char.isdigit() for char in _group(match, text, "credential")):
        return None  # prose, such as "bearer authentication"
    return _span(match, text, 0, "keep") + REDACTED


_BEARER_TOKENS = _rule(
    r"(?P<keep>bearer(?<![a-z0-9_].{6})[ \t]{1,8}+)(?P<credential>[a-z0-9._~+/-]{12,}+=*)",
    _replace_bearer,
    ("bearer",),
    folded=True,
)


def _replace_connection_password(match: re.Match[str], text: str) -> str | None:
    value = _group(match, text, "value").strip()
    if not value or _is_placeholder(value):
        return None
    return _span(match, text, 0, "keep") + REDACTED


# ADO-style connection strings (`Server=x;User Id=u;Password=p;`): the key must come after a
# semicolon, or before one and another key, so code such as `pwd = getcwd();` is not one.
_CONNECTION_STRINGS_AFTER_SEMICOLON = _rule(
    r"""
    ;(?P<keep>[ \t]{0,8}(?:password|pwd)[ \t]{0,8}=[ \t]{0,8})
    (?P<value>[^;\r\n"'{}()]{1,256}+)
    """,
    _replace_connection_password,
    ("password", "pwd"),
    folded=True,
)
_CONNECTION_STRINGS_BEFORE_KEY = _rule(
    r"""
    (?P<keep>(?:password(?<![a-z0-9_-].{8})|pwd(?<![a-z0-9_-].{3}))[ \t]{0,8}=[ \t]{0,8})
    (?P<value>[^;\r\n"'{}()]{1,256}+)(?=;[ \t]{0,8}[a-z][a-z0-9 _]{0,30}=)
    """,
    _replace_connection_password,
    ("password", "pwd"),
    folded=True,
)

# ── assignments to a key whose name says it holds a secret ─────────────────────

# Matched on lower-case text; the key is the run of key characters that ends with it.
_SECRET_WORD = re.compile(
    r"""
    (?:pass(?:word|wd|phrase)|pwd|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key
      |private[_-]?key|auth[_-]?key|credentials?)
    (?![a-z0-9_.-])
    """,
    re.VERBOSE,
)
_SECRET_WORD_ANY_CASE = re.compile(_SECRET_WORD.pattern, re.VERBOSE | re.IGNORECASE)
_SECRET_WORD_NEEDLES = ("pass", "pwd", "secret", "token", "key", "credential")
_ASSIGNMENT = re.compile(
    r"""
    (?P<sep>(?:["']\]?|\])?[ \t]{0,8}(?::=|=>|=(?![=>~])|:(?![:=/]))[ \t]{0,8})
    (?P<value>
        "(?:[^"\\\r\n]|\\.){0,4096}+"
      | '(?:[^'\\\r\n]|\\.){0,4096}+'
      | [^\s"'`,;&|(){}\[\]<>\\]{1,4096}+(?![(\[])
    )
    """,
    re.VERBOSE,
)
_FLAG_VALUE = re.compile(
    r"""
    (?P<sep>[ \t]{1,8}+)
    (?P<value>
        "[^"\r\n]{1,4096}+"
      | '[^'\r\n]{1,4096}+'
      | [^\s"'`,;&|(){}\[\]<>\\-][^\s"'`,;&|(){}\[\]<>\\]{0,4096}+
    )
    """,
    re.VERBOSE,
)
_KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
_NOT_SECRET_KEYS = frozenset({"pwd", "oldpwd"})  # the shell's working directory


def _redact_assignments(text: str, lowered: str) -> str:
    """Redact the value given to a secret-named key (`api_key=`, `"token":`, `--password`)."""
    if not any(needle in lowered for needle in _SECRET_WORD_NEEDLES):
        return text
    if len(lowered) == len(text):
        words = _SECRET_WORD.finditer(lowered)
    else:
        words = _SECRET_WORD_ANY_CASE.finditer(text)
    pieces: list[str] = []
    done = 0  # text[:done] is already in `pieces`
    for word in words:
        if word.start() < done:
            continue  # inside a value already redacted
        start = word.start()
        floor = max(done, start - _KEY_LOOKBACK)
        while start > floor and text[start - 1] in _KEY_CHARS:
            start -= 1
        key = text[start : word.end()]
        if key.lstrip("-").lower() in _NOT_SECRET_KEYS:
            continue
        found = _ASSIGNMENT.match(text, word.end())
        spaced_flag = False
        if found is None and key.startswith("-"):
            found = _FLAG_VALUE.match(text, word.end())
            spaced_flag = True
        if found is None:
            continue
        value = found["value"]
        quoted = value[:1] in ("'", '"')
        environment_style = not any(char.islower() for char in key) and "=" in found["sep"]
        if not _looks_secret(
            value[1:-1] if quoted else value,
            quoted=quoted,
            trusted=environment_style and not spaced_flag,
        ):
            continue
        pieces.append(text[done : found.start("value")])
        pieces.append(f"{value[0]}{REDACTED}{value[-1]}" if quoted else REDACTED)
        done = found.end("value")
    if not pieces:
        return text
    pieces.append(text[done:])
    return "".join(pieces)


_RULES: tuple[_Rule, ...] = (
    _PRIVATE_KEYS,
    *_PROVIDER_KEYS,
    _AWS_KEYS,
    _SLACK_WEBHOOKS,
    _URL_PASSWORDS,
    _AUTHORIZATION,
    _BEARER_TOKENS,
    _CONNECTION_STRINGS_AFTER_SEMICOLON,
    _CONNECTION_STRINGS_BEFORE_KEY,
)


def redact(text: str) -> str:
    """Return `text` with every secret it recognises replaced by `[REDACTED]`.

    Never raises on a string, takes time linear in its length, and is idempotent.

    Raises:
        TypeError: `text` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"redact() takes a str, got {type(text).__name__}")
    lowered = text.lower()
    for rule in _RULES:
        redacted = _apply(rule, text, lowered)
        if redacted is not text:
            text, lowered = redacted, redacted.lower()
    return _redact_assignments(text, lowered)


def redact_message(message: Message) -> Message:
    """Return `message` with every text, tool-call argument value and tool output redacted.

    The result has the same kind and the same ids (client id, tool call ids); images and
    provider signatures are left as they are. Tool-call arguments that are JSON are
    redacted value by value, a value under a secret-named key as a whole, and written
    back as JSON; other arguments are redacted as text. When nothing needed redacting,
    the message itself is returned (messages are immutable).

    Raises:
        TypeError: `message` is not a message.
    """
    updates: dict[str, Any] = {}
    if isinstance(message, UserMessage | SystemMessage | ToolResultMessage | AssistantMessage):
        content = _redact_blocks(message.content)
        if content is not message.content:
            updates["content"] = content
    elif isinstance(message, BashExecutionMessage):
        _update_text(updates, "command", message.command)
        _update_text(updates, "output", message.output)
    elif isinstance(message, BranchSummaryMessage | CompactionSummaryMessage):
        _update_text(updates, "summary", message.summary)
    elif isinstance(message, CustomMessage):
        data = _redact_json_safely(message.data)
        if data is not message.data:
            updates["data"] = data
    else:
        raise TypeError(f"not a message: {type(message).__name__}")
    extra = _redact_json_safely(message.extra)
    if extra is not message.extra:
        updates["extra"] = extra
    return message.model_copy(update=updates) if updates else message


# ── what a secret looks like ───────────────────────────────────────────────────

_NOT_SECRET_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "empty", "string", "bytes"}
)
_PLACEHOLDER_STARTS = ("$", "%", "{", "<", "*", "[")
_PATH_STARTS = ("/", "./", "../", "~/")
_SECRET_SYMBOLS = frozenset("+/=!@#$%^*~?:")


def _is_placeholder(value: str) -> bool:
    """Return True for a value that stands for a secret without being one (`${X}`, `<x>`)."""
    if value == REDACTED:
        return False  # rewritten to itself, which keeps redaction idempotent
    lowered = value.lower()
    return (
        value.startswith(_PLACEHOLDER_STARTS)
        or "{{" in value
        or "${" in value
        or "%(" in value
        or lowered in _NOT_SECRET_VALUES
        or all(char in "*xX•.-_ " for char in value)
    )


def _has_digit_or_symbol(value: str) -> bool:
    return any(char.isdigit() or char in _SECRET_SYMBOLS for char in value)


def _looks_secret(value: str, *, quoted: bool, trusted: bool) -> bool:
    """Return True when a value assigned to a secret-named key should be redacted.

    Args:
        value: the value, without its quotes.
        quoted: the value was a string literal.
        trusted: the key is an environment-style one (`API_KEY=`), whose values are data.
    """
    if value == REDACTED:
        return True
    if len(value) < _MIN_SECRET_CHARS or value.isdigit():
        return False
    if _is_placeholder(value) or value.startswith(_PATH_STARTS):
        return False
    return quoted or trusted or _has_digit_or_symbol(value)


# ── messages ───────────────────────────────────────────────────────────────────


def _update_text(updates: dict[str, Any], field: str, text: str) -> None:
    redacted = redact(text)
    if redacted != text:
        updates[field] = redacted


def _redact_blocks(blocks: Sequence[Any]) -> Any:
    """Return the blocks redacted, or `blocks` itself when none changed."""
    changed = False
    result: list[Any] = []
    for block in blocks:
        new = block
        if isinstance(block, TextContent):
            text = redact(block.text)
            if text != block.text:
                new = block.model_copy(update={"text": text})
        elif isinstance(block, ThinkingContent):
            thinking = redact(block.thinking)
            if thinking != block.thinking:
                new = block.model_copy(update={"thinking": thinking})
        elif isinstance(block, ToolCall):
            arguments = _redact_arguments(block.arguments)
            if arguments != block.arguments:
                new = block.model_copy(update={"arguments": arguments})
        elif not isinstance(block, ImageContent):
            raise TypeError(f"not a content block: {type(block).__name__}")
        changed = changed or new is not block
        result.append(new)
    return result if changed else blocks


def _redact_arguments(arguments: str) -> str:
    """Redact tool-call arguments value by value when they are JSON, else as text."""
    try:
        parsed = json.loads(arguments)
        redacted = _redact_json(parsed)
    except (ValueError, RecursionError):
        return redact(arguments)
    if redacted is parsed:
        return arguments  # unchanged, kept byte for byte
    return json.dumps(redacted, ensure_ascii=False)


def _redact_json_safely(value: Any) -> Any:
    try:
        return _redact_json(value)
    except RecursionError:
        return REDACTED  # too deep to walk: fail closed rather than send it as it is


def _redact_json(value: Any, key: str | None = None) -> Any:
    """Return a JSON value with its strings redacted, or `value` itself when none changed."""
    if isinstance(value, str):
        redacted = redact(value)
        if (
            redacted == value
            and key is not None
            and _is_secret_key(key)
            and value
            and value != REDACTED
            and not _is_placeholder(value)
        ):
            return REDACTED
        return redacted if redacted != value else value
    if isinstance(value, list):
        items = [_redact_json(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items
    if isinstance(value, dict):
        entries = {name: _redact_json(item, name) for name, item in value.items()}
        if all(entries[name] is item for name, item in value.items()):
            return value
        return entries
    return value


def _is_secret_key(key: str) -> bool:
    """Return True for a JSON key that names a secret (`password`, `apiKey`, `x-auth-token`)."""
    if key.lower() in _NOT_SECRET_KEYS:
        return False
    if key.lower() in ("authorization", "proxy-authorization"):
        return True
    return any(word.end() == len(key) for word in _SECRET_WORD_ANY_CASE.finditer(key))
