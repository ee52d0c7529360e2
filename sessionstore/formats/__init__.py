"""Conversations in and out: OpenAI and Anthropic formats, JSONL files, export documents."""

from sessionstore.formats._anthropic import from_anthropic, to_anthropic
from sessionstore.formats._export import export_conversation, stream_conversation
from sessionstore.formats._import import ImportReport, import_jsonl
from sessionstore.formats._openai import from_openai, to_openai

__all__ = [
    "ImportReport",
    "export_conversation",
    "from_anthropic",
    "from_openai",
    "import_jsonl",
    "stream_conversation",
    "to_anthropic",
    "to_openai",
]
