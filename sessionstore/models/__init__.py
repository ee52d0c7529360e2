"""The domain types: messages and their content blocks, sessions, loops and compaction blocks.

Messages are immutable pydantic models, one class per `kind`, joined in the `Message`
union. They validate on the way in (against the limits named here, such as
`MAX_JSON_DEPTH` and `TOOL_ID_MAX_LENGTH`) and serialise to JSON and back without loss:

>>> msg = UserMessage(content="hello")
>>> message_from_json(msg.model_dump_json()) == msg
True

Each model, the message adapter and the validator of stored payloads are built on first
use (pydantic's `defer_build`), not on import: building all of them took about half of
this package's import, and a command that reads no message (`sessions list`) uses two
models. The first validation of each class pays its build instead.
"""

from sessionstore.models._batch import RecordCache
from sessionstore.models._integrity import IntegrityCheck, IntegrityProblem, IntegrityReport
from sessionstore.models._limits import (
    APP_NAME_MAX_LENGTH,
    CLIENT_ID_MAX_LENGTH,
    MAX_BIG_INT,
    MAX_INT,
    MAX_JSON_DEPTH,
    OVERLAY_MAX_LENGTH,
    OVERLAY_PATTERN,
    SESSION_ID_MAX_LENGTH,
    STRATEGY_MAX_LENGTH,
    TITLE_MAX_LENGTH,
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
    USER_ID_MAX_LENGTH,
)
from sessionstore.models._messages import (
    MESSAGE_ADAPTER,
    AssistantContent,
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    MessageKind,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserContent,
    UserMessage,
    canonical_message,
    canonical_payload,
    content_hash,
    message_from_json,
    message_payload,
)
from sessionstore.models._records import (
    CompactedSection,
    CompactionBlock,
    CompactionEnded,
    CompactionEvent,
    CompactionStarted,
    LoopRecord,
    Page,
    ReplacementMessage,
    Session,
    SessionDigest,
    StoredMessage,
    TurnRange,
)
from sessionstore.models._retention import PurgeFailure, PurgeReport
from sessionstore.models._search import SearchHit
from sessionstore.models._usage import LoopUsage, SessionUsage, TurnUsage, UsageRecord

__all__ = [
    "APP_NAME_MAX_LENGTH",
    "CLIENT_ID_MAX_LENGTH",
    "MAX_BIG_INT",
    "MAX_INT",
    "MAX_JSON_DEPTH",
    "MESSAGE_ADAPTER",
    "OVERLAY_MAX_LENGTH",
    "OVERLAY_PATTERN",
    "SESSION_ID_MAX_LENGTH",
    "STRATEGY_MAX_LENGTH",
    "TITLE_MAX_LENGTH",
    "TOOL_ID_MAX_LENGTH",
    "TOOL_NAME_MAX_LENGTH",
    "USER_ID_MAX_LENGTH",
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
    "IntegrityCheck",
    "IntegrityProblem",
    "IntegrityReport",
    "LoopRecord",
    "LoopUsage",
    "Message",
    "MessageKind",
    "Page",
    "PurgeFailure",
    "PurgeReport",
    "RecordCache",
    "ReplacementMessage",
    "SearchHit",
    "Session",
    "SessionDigest",
    "SessionUsage",
    "StoredMessage",
    "SystemMessage",
    "TextContent",
    "ThinkingContent",
    "ToolCall",
    "ToolResultMessage",
    "TurnRange",
    "TurnUsage",
    "Usage",
    "UsageRecord",
    "UserContent",
    "UserMessage",
    "canonical_message",
    "canonical_payload",
    "content_hash",
    "message_from_json",
    "message_payload",
]
