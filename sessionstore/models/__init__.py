"""The domain types: messages and their content blocks, sessions, loops and compaction blocks.

Messages are immutable pydantic models, one class per `kind`, joined in the `Message`
union. They validate on the way in and serialise to JSON and back without loss:

>>> msg = UserMessage(content="hello")
>>> message_from_json(msg.model_dump_json()) == msg
True
"""

from sessionstore.models._integrity import IntegrityCheck, IntegrityProblem, IntegrityReport
from sessionstore.models._messages import (
    MESSAGE_ADAPTER,
    SESSION_ID_MAX_LENGTH,
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
from sessionstore.models._retention import PurgeReport
from sessionstore.models._search import SearchHit
from sessionstore.models._usage import LoopUsage, SessionUsage, TurnUsage, UsageRecord

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
    "IntegrityCheck",
    "IntegrityProblem",
    "IntegrityReport",
    "LoopRecord",
    "LoopUsage",
    "Message",
    "MessageKind",
    "Page",
    "PurgeReport",
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
    "canonical_payload",
    "content_hash",
    "message_from_json",
    "message_payload",
]
