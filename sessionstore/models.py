"""The domain types: messages and their content blocks, sessions, loops and compaction blocks.

Messages are immutable pydantic models, one class per `kind`, joined in the `Message`
union. They validate on the way in and serialise to JSON and back without loss:

>>> msg = UserMessage(content="hello")
>>> message_from_json(msg.model_dump_json()) == msg
True
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeInt,
    TypeAdapter,
    field_validator,
    model_validator,
)

__all__ = [
    "MESSAGE_ADAPTER",
    "SESSION_ID_MAX_LENGTH",
    "AssistantContent",
    "AssistantMessage",
    "BashExecutionMessage",
    "BranchSummaryMessage",
    "CompactedSection",
    "CompactionBlock",
    "CompactionEnded",
    "CompactionEvent",
    "CompactionStarted",
    "CompactionSummaryMessage",
    "CustomMessage",
    "ImageContent",
    "LoopRecord",
    "Message",
    "MessageKind",
    "Page",
    "ReplacementMessage",
    "Session",
    "StoredMessage",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "TurnRange",
    "Usage",
    "UserContent",
    "UserMessage",
    "canonical_payload",
    "content_hash",
    "message_from_json",
    "message_payload",
]

_FROZEN = ConfigDict(frozen=True, extra="forbid")

SESSION_ID_MAX_LENGTH = 128
"""The longest session id the store accepts."""


# ── content blocks ─────────────────────────────────────────────────────────────


class TextContent(BaseModel):
    """Plain text."""

    model_config = _FROZEN
    type: Literal["text"] = "text"
    text: str
    """The text, exactly as written."""


class ImageContent(BaseModel):
    """An image, either inline (base64 `data`) or by `url`; exactly one of the two."""

    model_config = _FROZEN
    type: Literal["image"] = "image"
    data: str | None = None
    """Base64-encoded image bytes, without a `data:` prefix."""
    url: str | None = None
    """A URL the model provider can fetch."""
    mime_type: str | None = None
    """The media type of `data`, for example `image/png`."""
    detail: str | None = None
    """Provider hint for the resolution (`low`, `high`, `auto`), kept for export."""

    @model_validator(mode="after")
    def _one_source(self) -> ImageContent:
        if (self.data is None) == (self.url is None):
            raise ValueError("an image needs exactly one of `data` (base64) or `url`")
        if self.data is not None:
            try:
                base64.b64decode(self.data, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"`data` is not valid base64: {exc}") from None
        return self

    def decoded_size(self) -> int:
        """Return the number of bytes `data` decodes to, without decoding it (0 for a URL)."""
        if self.data is None:
            return 0
        padding = len(self.data) - len(self.data.rstrip("="))
        return len(self.data) * 3 // 4 - padding


class ThinkingContent(BaseModel):
    """Model reasoning, kept so it can be replayed to providers that need it."""

    model_config = _FROZEN
    type: Literal["thinking"] = "thinking"
    thinking: str
    """The reasoning text (empty when `redacted`)."""
    signature: str | None = None
    """The provider's signature or opaque payload for the reasoning block."""
    redacted: bool = False
    """True for a provider-redacted block whose content travels only in `signature`."""


class ToolCall(BaseModel):
    """One tool call made by the assistant."""

    model_config = _FROZEN
    type: Literal["tool_call"] = "tool_call"
    id: str = Field(min_length=1)
    """The call id that the matching tool result names. Ids may repeat inside a session."""
    name: str = Field(min_length=1)
    """The tool's name."""
    arguments: str = "{}"
    """The arguments as the model wrote them: JSON text, kept byte for byte.

    A dict is accepted on the way in and serialised to JSON. Models sometimes write
    invalid JSON; it is stored as written, because raw history is never changed.
    """

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_to_text(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return json.dumps(value, ensure_ascii=False)
        return value

    def parsed_arguments(self) -> Any:
        """Return the arguments decoded from JSON.

        Raises:
            ValueError: the model wrote arguments that are not valid JSON.
        """
        return json.loads(self.arguments)


UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall | ImageContent, Field(discriminator="type")
]


def _joined_text(blocks: Sequence[object]) -> str:
    """Return the text blocks among `blocks` joined by newlines."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextContent))


def _text_to_blocks(value: Any) -> Any:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return value


# ── messages ───────────────────────────────────────────────────────────────────


class _MessageBase(BaseModel):
    model_config = _FROZEN

    client_id: str | None = Field(default=None, min_length=1, max_length=255)
    """An optional id chosen by the caller, unique per session.

    Appending a message whose `client_id` is already stored returns the stored message
    (a safe retry); the same id with different content is a `ConflictError`. It is not
    part of the content hash.
    """
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Format-specific fields that the model does not name, kept for a lossless export.

    Keyed by format (`"openai"`, `"anthropic"`); the importers and exporters own them.
    """


class UserMessage(_MessageBase):
    """A message from the user: text and images. A string is accepted as one text block."""

    kind: Literal["user"] = "user"
    content: list[UserContent]
    """The blocks of the message."""
    name: str | None = None
    """An optional participant name."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class Usage(BaseModel):
    """Token usage the provider reported for the model call that produced a message."""

    model_config = _FROZEN
    input_tokens: NonNegativeInt = 0
    output_tokens: NonNegativeInt = 0
    cache_read_tokens: NonNegativeInt = 0
    cache_write_tokens: NonNegativeInt = 0


class AssistantMessage(_MessageBase):
    """A model response: text, thinking, tool calls and images, in order."""

    kind: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    """The blocks of the response, in the order the model produced them."""
    name: str | None = None
    """An optional participant name."""
    model: str | None = None
    """The model that wrote it, when known."""
    stop_reason: str | None = None
    """Why generation stopped (`stop`, `tool_calls`, `length`, ...), when known."""
    usage: Usage | None = None
    """Provider-reported usage for this call, when known."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls, in order."""
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class ToolResultMessage(_MessageBase):
    """The result of one tool call."""

    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str = Field(min_length=1)
    """The id of the call this answers."""
    tool_name: str = ""
    """The name of the tool that ran (empty when the source format does not say)."""
    content: list[UserContent] = Field(default_factory=list)
    """The output: text and images."""
    is_error: bool = False
    """True when the tool failed."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class BashExecutionMessage(_MessageBase):
    """A shell command the user ran outside the model's tool calls, and its output."""

    kind: Literal["bash_execution"] = "bash_execution"
    command: str
    """The command line."""
    output: str = ""
    """Combined stdout and stderr."""
    exit_code: int | None = None
    """The exit code; None when the command did not finish."""
    cancelled: bool = False
    """True when the user cancelled the command."""
    truncated: bool = False
    """True when `output` was cut before it was stored."""


class CustomMessage(_MessageBase):
    """An extension message: application data that travels with the history."""

    kind: Literal["custom"] = "custom"
    custom_type: str = Field(min_length=1)
    """The application's name for this kind of message."""
    data: JsonValue = None
    """The application's payload."""
    display: bool = True
    """Whether a UI should show it."""


class BranchSummaryMessage(_MessageBase):
    """A summary of a branch that was left, carried into the branch taken."""

    kind: Literal["branch_summary"] = "branch_summary"
    summary: str
    """The summary text."""
    from_loop_id: int | None = None
    """The loop the summarised branch ended at, when known."""


class CompactionSummaryMessage(_MessageBase):
    """A summary that stands for compacted history."""

    kind: Literal["compaction_summary"] = "compaction_summary"
    summary: str
    """The summary text."""
    tokens_before: NonNegativeInt | None = None
    """The estimated tokens of what was summarised."""


class SystemMessage(_MessageBase):
    """Instructions for the model. A string is accepted as one text block."""

    kind: Literal["system"] = "system"
    content: list[TextContent]
    """The blocks of the instructions."""
    name: str | None = None
    """An optional participant name."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


Message: TypeAlias = Annotated[
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
    | SystemMessage,
    Field(discriminator="kind"),
]
"""Any message, told apart by its `kind`."""

MessageKind: TypeAlias = Literal[
    "user",
    "assistant",
    "tool_result",
    "bash_execution",
    "custom",
    "branch_summary",
    "compaction_summary",
    "system",
]

MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
"""Validates a dict or JSON text into the right message class."""


def message_from_json(data: str | bytes) -> Message:
    """Parse one message from JSON text, choosing the class by `kind`."""
    return MESSAGE_ADAPTER.validate_json(data)


def message_payload(message: Message) -> dict[str, Any]:
    """Return the message as the JSON-ready dict that is stored (without `client_id`)."""
    return message.model_dump(mode="json", exclude={"client_id"})


def canonical_payload(payload: dict[str, Any]) -> bytes:
    """Return the canonical JSON bytes of a stored payload: sorted keys, no spaces, UTF-8."""
    return json.dumps(
        payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def content_hash(payload: dict[str, Any]) -> str:
    """Return the SHA-256 hex digest of the canonical payload."""
    return hashlib.sha256(canonical_payload(payload)).hexdigest()


# ── stored records ─────────────────────────────────────────────────────────────


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True)


class Session(_Record):
    """One agent conversation, owned by a tenant (`app_name`, `user_id`)."""

    id: str
    """The session id (chosen by the caller or generated)."""
    app_name: str
    """The application that owns the session."""
    user_id: str
    """The user within that application."""
    title: str | None = None
    """A human-readable title."""
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    """Free-form application data."""
    active_loop_id: int | None = None
    """The head of the active chain, or None before the first loop."""
    loop_count: int = 0
    """How many loops the session has, on every branch."""
    version: int
    """Bumped by every write; pass it back as `expected_version` for optimistic concurrency."""
    created_at: datetime
    """When the session was created (UTC)."""
    updated_at: datetime
    """When the session was last written (UTC)."""


class LoopRecord(_Record):
    """One agent run: the work done for one user request."""

    id: int
    """The loop id, unique in the database."""
    session_id: str
    """The session it belongs to."""
    parent_loop_id: int | None
    """The loop it continues, or None for a root."""
    sequence: int
    """Its number in the session, in order of creation, from 0."""
    depth: int
    """Its distance from the root of its chain (a root is 0)."""
    created_at: datetime
    """When the loop started (UTC)."""
    closed_at: datetime | None
    """When the loop was closed (a new loop started after it, or it was closed explicitly)."""
    message_count: int
    """How many messages it holds (cached)."""
    token_total: int
    """The sum of its messages' token counts (cached)."""
    turn_count: int
    """How many turns it holds (cached)."""


class StoredMessage(_Record):
    """A message as stored: the immutable message plus where and when it was written."""

    id: int
    """The message id, unique in the database; replacement messages name these ids."""
    session_id: str
    """The session it belongs to."""
    loop_id: int
    """The loop it belongs to."""
    position: int
    """Its position in the loop, from 0, contiguous."""
    turn_index: int
    """The turn it belongs to, from 0 in each loop."""
    token_count: int
    """Its token count, computed once when it was appended."""
    content_hash: str
    """SHA-256 of its canonical payload."""
    created_at: datetime
    """When it was appended (UTC)."""
    message: Message
    """The message itself."""


class Page(_Record):
    """One page of a cursor-paginated listing."""

    items: list[Session]
    """The sessions on this page."""
    next_cursor: str | None
    """Pass this as `cursor` for the next page; None on the last page."""


class TurnRange(_Record):
    """An inclusive range of turn indices inside one loop."""

    start_turn: NonNegativeInt
    end_turn: NonNegativeInt

    @model_validator(mode="after")
    def _ordered(self) -> TurnRange:
        if self.end_turn < self.start_turn:
            raise ValueError(f"end_turn {self.end_turn} is before start_turn {self.start_turn}")
        return self

    def __contains__(self, turn_index: object) -> bool:
        return isinstance(turn_index, int) and self.start_turn <= turn_index <= self.end_turn

    def __len__(self) -> int:
        return self.end_turn - self.start_turn + 1


class ReplacementMessage(_Record):
    """A message a compaction put in place of raw messages, naming the ids it covers."""

    message: Message
    """What the model sees instead of the raw messages."""
    covers: list[int] = Field(default_factory=list)
    """The ids of the raw messages it stands for (its provenance)."""
    token_count: int | None = None
    """Its token count; the store computes it when it is None."""
    id: int | None = None
    """Its id once stored."""


class CompactedSection(_Record):
    """A turn range plus the replacement messages that stand for it."""

    range: TurnRange
    messages: list[ReplacementMessage] = Field(default_factory=list)


class CompactionBlock(_Record):
    """A non-destructive overlay on one loop.

    A strategy builds one with the section fields; the store fills in `id`,
    `session_id`, `loop_id`, `generation` and `created_at` when it writes it.
    """

    overlay: str = Field(default="default", min_length=1, max_length=64)
    """The overlay's name; several named overlays can coexist on one loop."""
    keep_first: TurnRange | None = None
    """Turns kept verbatim from the start (only for the most recent loop)."""
    keep_compacted: CompactedSection | None = None
    """Summarised turns (for every loop)."""
    keep_recent: CompactedSection | None = None
    """Recent turns with tool output truncated (only for the most recent loop)."""
    strategy: str = "manual"
    """The name of the strategy that built it."""
    config: dict[str, JsonValue] = Field(default_factory=dict)
    """A snapshot of the configuration it was built with."""
    tokens_before: NonNegativeInt = 0
    """Estimated tokens of the raw messages it covers."""
    tokens_after: NonNegativeInt = 0
    """Estimated tokens of what the model sees instead."""
    id: int | None = None
    session_id: str | None = None
    loop_id: int | None = None
    generation: int | None = None
    """1 for the first block of a loop and overlay, then 2, 3, ..."""
    created_at: datetime | None = None

    def sections(self) -> Sequence[tuple[str, CompactedSection]]:
        """Return the present sections as `(kind, section)`, `compacted` first."""
        found = [("compacted", self.keep_compacted), ("recent", self.keep_recent)]
        return [(kind, section) for kind, section in found if section is not None]


class CompactionEvent(_Record):
    """A persisted `CompactionStarted` or `CompactionEnded` event."""

    id: int
    session_id: str
    loop_id: int | None
    block_id: int | None
    event: Literal["started", "ended"]
    tokens_before: int
    tokens_after: int | None
    duration_ms: float | None
    details: dict[str, JsonValue] = Field(default_factory=dict)
    created_at: datetime


# ── compaction lifecycle ───────────────────────────────────────────────────────


@dataclass(frozen=True, slots=True)
class CompactionStarted:
    """Fired before a compaction runs; persisted as a `started` compaction event."""

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    """The loops in scope, oldest first."""
    tokens_before: int
    """The estimated context tokens of the loops in scope before this compaction."""
    strategy: str
    overlay: str

    def record(self) -> dict[str, Any]:
        """Return the fields of its `CompactionEvent` row (without id and time)."""
        return {
            "event": "started",
            "loop_id": self.current_loop_id,
            "block_id": None,
            "tokens_before": self.tokens_before,
            "tokens_after": None,
            "duration_ms": None,
            "details": {
                "loop_ids": self.loop_ids,
                "strategy": self.strategy,
                "overlay": self.overlay,
            },
        }


@dataclass(frozen=True, slots=True)
class CompactionEnded:
    """Fired after the blocks are built and before they are written; persisted as `ended`.

    Raising from `after_compaction_end` vetoes the compaction: nothing is written. A
    failed compaction is recorded with `status="failed"` and the `error`.
    """

    session_id: str
    current_loop_id: int
    loop_ids: list[int]
    tokens_before: int
    tokens_after: int | None
    """The estimated context tokens of the loops in scope with the new blocks."""
    blocks: list[tuple[int, CompactionBlock]]
    """`(loop_id, block)` for every block about to be written (not yet stored)."""
    duration_ms: float
    strategy: str = ""
    overlay: str = "default"
    status: Literal["ok", "failed"] = "ok"
    error: str | None = None
    """`Type: message` of the exception that failed the compaction."""
    skipped_loop_ids: list[int] = field(default_factory=list)
    """Earlier loops in scope whose current block was already a summary built the same way."""

    def record(self) -> dict[str, Any]:
        """Return the fields of its `CompactionEvent` row (without id and time)."""
        details: dict[str, Any] = {"status": self.status, "loop_ids": self.loop_ids}
        if self.status == "ok":
            details["compacted_loop_ids"] = [loop_id for loop_id, _ in self.blocks]
            details["skipped_loop_ids"] = self.skipped_loop_ids
        details["strategy"] = self.strategy
        details["overlay"] = self.overlay
        if self.error is not None:
            details["error"] = self.error
        return {
            "event": "ended",
            "loop_id": self.current_loop_id,
            "block_id": None,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "duration_ms": self.duration_ms,
            "details": details,
        }
