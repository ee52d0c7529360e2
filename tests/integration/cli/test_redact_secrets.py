"""`context --redact-secrets` and `export --redact-secrets` (issue 17, item 16).

By default the context holds the secrets of the raw messages, as the model gets them
from `build_context`: the flag redacts them from every message, in every format. An
export for sharing redacts the messages, the title and the metadata.
"""

from __future__ import annotations

import pytest

from sessionstore import (
    AssistantMessage,
    SessionStore,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    export_conversation,
)
from tests.integration.cli.runner import ok, with_store

SECRETS = [
    "sk-proj-4fJ2kLmN8pQrStUvWxYz0123",
    "hunter2-db-Pa55",
    "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
    "AKIAIOSFODNN7EXAMPLE",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
]


async def _seed(store: SessionStore) -> None:
    await store.create_session(
        session_id="leaky",
        app_name="app",
        user_id="ops",
        title=f"deploy with {SECRETS[0]}",
        metadata={"env": {"DATABASE_URL": f"postgresql://app:{SECRETS[1]}@db/prod"}},
    )
    await store.append_messages(
        "leaky",
        [
            UserMessage(content=f"Deploy. My key is {SECRETS[0]}, the token {SECRETS[2]}."),
            AssistantMessage(
                content=[
                    ToolCall(
                        id="c1",
                        name="bash",
                        arguments={"cmd": f"psql postgresql://app:{SECRETS[1]}@db/prod"},
                    )
                ]
            ),
            ToolResultMessage(
                tool_call_id="c1",
                tool_name="bash",
                content=(
                    f"AWS_ACCESS_KEY_ID={SECRETS[3]}\nAuthorization: Bearer {SECRETS[4]}\n"
                    f"-----BEGIN PRIVATE KEY-----\n{SECRETS[5]}\n-----END PRIVATE KEY-----"
                ),
            ),
            AssistantMessage(content="Deployed."),
        ],
    )


def _found(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


@pytest.mark.parametrize("output", [["--format", "text"], ["--format", "openai"], ["--json"]])
def test_context_redact_secrets_leaves_none_in_any_format(db_url, output):
    ok(db_url, "db", "upgrade")
    with_store(db_url, _seed)
    args = ["context", "leaky", "--budget", "100000", *output]
    assert _found(ok(db_url, *args).stdout) == SECRETS  # the default: as stored
    redacted = ok(db_url, *args, "--redact-secrets").stdout
    assert _found(redacted) == []
    assert "[REDACTED]" in redacted
    assert "Deployed." in redacted


def test_export_redact_secrets_covers_messages_title_and_metadata(db_url):
    ok(db_url, "db", "upgrade")
    with_store(db_url, _seed)
    assert set(_found(ok(db_url, "export", "leaky").stdout)) == set(SECRETS)
    for extra in ([], ["--compact"]):
        redacted = ok(db_url, "export", "leaky", "--redact-secrets", *extra).stdout
        assert _found(redacted) == []
        assert "deploy with [REDACTED]" in redacted
        assert "postgresql://app:[REDACTED]@db/prod" in redacted

    async def exported(store: SessionStore) -> str:
        return str(await export_conversation(store, "leaky", redact_secrets=True))

    assert _found(with_store(db_url, exported)) == []


@pytest.mark.parametrize("output", [[], ["--html", "-"], ["--json"]])
def test_audit_redact_secrets_shows_none(db_url, output):
    ok(db_url, "db", "upgrade")
    with_store(db_url, _seed)
    args = ["audit", "leaky", *output]
    env = {"COLUMNS": "400"}
    if output == ["--html", "-"]:
        assert set(_found(ok(db_url, *args, env=env).stdout)) == set(SECRETS)  # as stored
    redacted = ok(db_url, *args, "--redact-secrets", env=env).stdout
    assert _found(redacted) == []
    if output != ["--json"]:
        assert "[REDACTED]" in redacted
