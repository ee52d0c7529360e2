"""Secret redaction: what is found, what is left alone, and that it is safe on any text."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessionstore._redact import REDACTED, redact, redact_message
from sessionstore.formats._jsonl import parse_conversation_line
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

PEM_BODY = "MIIEpAIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2xu\nc7RnvhOCD3TuGl1CRJyZsXl3n+6ovKoWkAqf=="

# ── what is found ──────────────────────────────────────────────────────────────

FOUND = [
    ("sk-4fJ2kLmN8pQrStUvWxYz0123abcd", REDACTED),
    ("OPENAI_API_KEY=sk-proj-4fJ2kLmN8pQr_StUvWxYz-0123", f"OPENAI_API_KEY={REDACTED}"),
    ("key: sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123-xyz", f"key: {REDACTED}"),
    ("id AKIAIOSFODNN7EXAMPLE in use", f"id {REDACTED} in use"),
    (
        "AKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"{REDACTED},{REDACTED}",
    ),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        f"aws_secret_access_key = {REDACTED}",
    ),
    ("token ghp_" + "a1B2" * 9 + " used", f"token {REDACTED} used"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijKLMNOP", REDACTED),
    ("SLACK=xoxb-123456789012-abcdefghijKLMN", f"SLACK={REDACTED}"),
    ("AIzaSyA-1234567890abcdefghijklmnopqrstu", REDACTED),
    ("stripe sk_live_51H8abcdefghijklmnopQRST", f"stripe {REDACTED}"),
    ("glpat-abcdefghij0123456789", REDACTED),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
        f"jwt {REDACTED}",
    ),
    ('"token": "abc123xyz"', f'"token": "{REDACTED}"'),
    ("api_key='Zm9vYmFy'", f"api_key='{REDACTED}'"),
    ("password: hunter2", f"password: {REDACTED}"),
    ("DB_PASSWORD=changeme", f"DB_PASSWORD={REDACTED}"),
    ("mysql --password=Tr0ub4dor --user=app", f"mysql --password={REDACTED} --user=app"),
    ("login --token 9f8e7d6c5b4a", f"login --token {REDACTED}"),
    ("config['client_secret'] = 'abcd1234'", f"config['client_secret'] = '{REDACTED}'"),
    ("Authorization: Bearer abcdef0123456789xyz", f"Authorization: Bearer {REDACTED}"),
    ("authorization: basic dXNlcjpwYXNz", f"authorization: basic {REDACTED}"),
    ("-H 'Authorization: token 0123456789abcdef'", f"-H 'Authorization: token {REDACTED}'"),
    ("got bearer ya29.a0AfH6SMBx3dF9", f"got bearer {REDACTED}"),
    ("https://alice:s3cret@example.com/x", f"https://alice:{REDACTED}@example.com/x"),
    ("https://alice:p@ss@example.com/x", f"https://alice:{REDACTED}@example.com/x"),
    (
        "postgresql+asyncpg://app:hunter2@db.internal:5432/prod",
        f"postgresql+asyncpg://app:{REDACTED}@db.internal:5432/prod",
    ),
    (
        "mongodb+srv://root:pw1@cluster0.x.net/db",
        f"mongodb+srv://root:{REDACTED}@cluster0.x.net/db",
    ),
    ("redis://:topsecret@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
    (
        "Server=tcp:db;Database=app;User Id=sa;Password=p@ss w0rd;Encrypt=True",
        f"Server=tcp:db;Database=app;User Id=sa;Password={REDACTED};Encrypt=True",
    ),
    ("Server=db;Pwd=abc", f"Server=db;Pwd={REDACTED}"),
    ("https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX", None),
    (
        f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----\nnext",
        f"-----BEGIN RSA PRIVATE KEY-----\n{REDACTED}\n-----END RSA PRIVATE KEY-----\nnext",
    ),
    (  # a key inside a JSON string, its line breaks escaped
        '{"pem": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n'
        '-----END PRIVATE KEY-----\\n"}',
        f'{{"pem": "-----BEGIN PRIVATE KEY-----\\n{REDACTED}\\n-----END PRIVATE KEY-----\\n"}}',
    ),
    (  # under a secret-named key, the whole value goes
        '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEF\\n'
        '-----END PRIVATE KEY-----\\n"}',
        f'{{"private_key": "{REDACTED}"}}',
    ),
    (  # cut short, as in truncated tool output: what is there is still redacted
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}\n... 40 lines truncated ...",
        f"-----BEGIN OPENSSH PRIVATE KEY-----\n{REDACTED}\n... 40 lines truncated ...",
    ),
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_secrets_are_redacted(text: str, expected: str | None) -> None:
    redacted = redact(text)
    if expected is not None:
        assert redacted == expected
    assert REDACTED in redacted
    assert redact(redacted) == redacted


# ── what is left alone ─────────────────────────────────────────────────────────

ORDINARY = [
    "git checkout 3f2c1e9a7b6d5c4e3f2a1b0c9d8e7f6a5b4c3d2e",
    "request id 123e4567-e89b-12d3-a456-426614174000",
    "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "cd /testbed && python -m pytest tests/test_api.py -x -q",
    "/usr/lib/python3.11/site-packages/django/contrib/auth/hashers.py",
    'password = form.cleaned_data["password"]',
    "self.password = password",
    "token = tokens[i]",
    "api_key = os.environ['OPENAI_API_KEY']",
    "def login(token: str, password: Optional[str] = None) -> Session:",
    "if token == 'def':",
    "max_tokens=4096, num_tokens = 12",
    "PWD=/testbed\nOLDPWD=/",
    "pwd = getcwd();",
    "PASSWORD_HASHERS = ['django.contrib.auth.hashers.MD5PasswordHasher']",
    "Authorization: required for every upload",
    "use bearer authentication for the API",
    "url = '{}://{}:{}@{}'.format(scheme, user, password, host)",
    "DATABASE_URL=postgres://${DB_USER}:${DB_PASSWORD}@db/app",
    "password: changeme",
    "the --token option reads a file",
    "scikit-learn sk-learn-style-identifiers-here",
    'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):',
    '{"token": null, "password": "", "secret": "<your secret>"}',
    "export API_KEY=$OPENAI_API_KEY",
    "hooks.slack.com/services/",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redacting_rejects_what_is_not_text() -> None:
    with pytest.raises(TypeError, match="str"):
        redact(b"sk-abc")  # type: ignore[arg-type]  # the check under test


# ── properties ─────────────────────────────────────────────────────────────────

FRAGMENTS = [
    *("sk-", "sk-proj-", "sk_live_", "AKIA", "ghp_", "github_pat_", "xoxb-", "AIza", "eyJ"),
    *("password", "PASSWORD", "Pwd", "token", "api_key", "API_KEY", "secret", "--password"),
    *("Authorization", "Bearer ", "basic ", "://", "user", ":", "@", "=", ";", "==", ": "),
    *('"', "'", "\\", "\\n", "\n", "\r\n", " ", "\t", "[", "]", "(", "{", "}", "$", "&", "-"),
    *("-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", REDACTED, "İ"),
    *("abc123", "A" * 16, "a1" * 10, "0123456789", "MIIEpAIBAAKCAQEA1234567890", "/path"),
]
TEXTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=24).map(
    "".join
)


@settings(derandomize=True, max_examples=400, deadline=None)
@given(TEXTS)
def test_redaction_is_idempotent(text: str) -> None:
    once = redact(text)
    assert redact(once) == once


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.text())
def test_redaction_never_raises_and_leaves_plain_text_alone(text: str) -> None:
    redacted = redact(text)
    assert redact(redacted) == redacted
    if REDACTED not in redacted:
        assert redacted == text


ADVERSARIAL = {
    "one long word": "a" * 1_000_000,
    "sk- repeated": "sk-" * 333_333,
    "keys without values": "token= " * 142_000,
    "nested assignments": "a=token=" * 125_000,
    "an unclosed quote": 'password="' + "x" * 1_000_000,
    "BEGIN markers": "-----BEGIN RSA PRIVATE KEY-----\n" * 30_000,
    "schemes and colons": "a://b:" * 200_000,
    "user:user:": "http://" + "u:" * 500_000,
    "connection string keys": "password=x;" * 90_000,
    "bearer words": "Bearer " * 150_000,
    "escaped newlines": "\\n" * 500_000,
}


@pytest.mark.parametrize("text", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_a_megabyte_of_adversarial_text_is_redacted_in_linear_time(text: str) -> None:
    start = time.perf_counter()
    redact(text)
    # Linear passes take well under a second here; catastrophic backtracking takes hours.
    assert time.perf_counter() - start < 5.0


# ── messages ───────────────────────────────────────────────────────────────────

SECRET = "sk-proj-Zq81mX0vK2pL7sT4wY6uN3"


def test_every_text_of_an_assistant_message_is_redacted_with_ids_kept() -> None:
    image = ImageContent(url="https://example.org/x.png")
    message = AssistantMessage(
        client_id="m-1",
        content=[
            TextContent(text=f"the key is {SECRET}"),
            ThinkingContent(thinking=f"I should not repeat {SECRET}", signature="sig-abc"),
            ToolCall(
                id="call_7",
                name="http_get",
                arguments={"url": "https://x.example", "api_key": "plainvalue", "n": 3},
            ),
            image,
        ],
        model="gpt-test",
    )
    redacted = redact_message(message)
    assert isinstance(redacted, AssistantMessage)
    assert redacted.client_id == "m-1"
    assert redacted.model == "gpt-test"
    text, thinking, call, kept_image = redacted.content
    assert isinstance(text, TextContent)
    assert text.text == f"the key is {REDACTED}"
    assert isinstance(thinking, ThinkingContent)
    assert thinking.thinking == f"I should not repeat {REDACTED}"
    assert thinking.signature == "sig-abc"
    assert isinstance(call, ToolCall)
    assert (call.id, call.name) == ("call_7", "http_get")
    assert json.loads(call.arguments) == {"url": "https://x.example", "api_key": REDACTED, "n": 3}
    assert kept_image is image
    assert SECRET in message.content[0].text  # type: ignore[union-attr]  # the original is intact


def test_arguments_that_are_not_json_are_redacted_as_text() -> None:
    call = ToolCall(id="c", name="sh", arguments=f"echo {SECRET} {{broken")
    redacted = redact_message(AssistantMessage(content=[call]))
    assert isinstance(redacted, AssistantMessage)
    assert redacted.tool_calls[0].arguments == f"echo {REDACTED} {{broken"


def test_arguments_without_secrets_are_kept_byte_for_byte() -> None:
    arguments = '{ "command" :  "ls -la /testbed",\n "timeout": 1e3 }'
    message = AssistantMessage(content=[ToolCall(id="c", name="bash", arguments=arguments)])
    assert redact_message(message) is message


def test_json_nested_beyond_the_recursion_limit_is_redacted_as_text() -> None:
    """The model refuses such arguments (`MAX_JSON_DEPTH`); one stored before it did is
    still redacted (built here without validation, as a stored row is read)."""
    deep = "[" * 100_000 + f'"{SECRET}"' + "]" * 100_000
    call = ToolCall.model_construct(id="c", name="t", arguments=deep)
    message = AssistantMessage.model_construct(content=[call])
    redacted = redact_message(message)
    assert isinstance(redacted, AssistantMessage)
    assert SECRET not in redacted.tool_calls[0].arguments


@pytest.mark.parametrize(
    ("message", "read"),
    [
        (UserMessage(content=f"use {SECRET}"), lambda m: m.text),
        (SystemMessage(content=f"key {SECRET}"), lambda m: m.text),
        (
            ToolResultMessage(tool_call_id="call_9", tool_name="env", content=f"KEY={SECRET}"),
            lambda m: m.text,
        ),
        (
            BashExecutionMessage(command=f"export K={SECRET}", output=f"K={SECRET}", exit_code=0),
            lambda m: m.command + m.output,
        ),
        (CompactionSummaryMessage(summary=f"key {SECRET}"), lambda m: m.summary),
        (BranchSummaryMessage(summary=f"key {SECRET}", from_loop_id=4), lambda m: m.summary),
        (
            CustomMessage(custom_type="env", data={"vars": {"OPENAI_API_KEY": "abcd"}, "n": 1}),
            lambda m: json.dumps(m.data),
        ),
        (UserMessage(content="hi", extra={"raw": {"password": "hunter2"}}), lambda m: str(m.extra)),
    ],
)
def test_every_kind_of_message_is_redacted(message: Message, read: object) -> None:
    redacted = redact_message(message)
    assert type(redacted) is type(message)
    assert redacted.kind == message.kind
    shown = read(redacted)  # type: ignore[operator]  # the lambdas above
    assert REDACTED in shown
    assert SECRET not in shown
    assert "hunter2" not in shown
    assert redact_message(redacted) == redacted
    if isinstance(message, ToolResultMessage):
        assert isinstance(redacted, ToolResultMessage)
        assert redacted.tool_call_id == message.tool_call_id


def test_a_message_without_secrets_is_returned_as_it_is() -> None:
    message = ToolResultMessage(tool_call_id="c", content="3 passed in 0.12s")
    assert redact_message(message) is message


def test_redacting_a_message_rejects_what_is_not_one() -> None:
    with pytest.raises(TypeError, match="not a message"):
        redact_message("sk-abc")  # type: ignore[arg-type]  # the check under test


# ── real transcripts ───────────────────────────────────────────────────────────

PATH = re.compile(r"(?<![\w.])(?:/[\w.-]+){2,}")


def only_redactions_differ(before: str, after: str) -> bool:
    """Return True when `after` is `before` with some spans replaced by `[REDACTED]`."""
    parts = [re.escape(part) for part in after.split(REDACTED)]
    return re.fullmatch("(?s:.+?)".join(parts), before) is not None


def test_real_transcripts_keep_their_paths_and_commands(dataset_dir: Path) -> None:
    """On real agent runs, redaction fires rarely and only replaces the secret's span."""
    messages = 0
    changed: list[str] = []
    for file in sorted(dataset_dir.glob("*.jsonl")):
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                for loop in parse_conversation_line(line).loops:
                    for message in loop:
                        messages += 1
                        redacted = redact_message(message)
                        if redacted is message:
                            continue
                        before = message.model_dump_json()
                        after = redacted.model_dump_json()
                        assert only_redactions_differ(before, after)
                        for path in PATH.findall(before):
                            assert path in after
                        changed.append(after)
    assert messages > 4_000
    # In this set only Django's test settings hold a "secret" (`SECRET_KEY = 'secret'`):
    # a handful of messages out of thousands, and every one of them for that reason.
    assert 0 < len(changed) <= 20
    assert all("SECRET_KEY" in after for after in changed)
