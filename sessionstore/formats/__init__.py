"""Conversations in and out: OpenAI chat and Responses, Anthropic, JSONL files, export documents.

The pydantic-ai format lives in `sessionstore.formats.pydantic_ai`, imported on its own, as
it needs the `pydantic-ai` extra.
"""

from sessionstore.formats._anthropic import from_anthropic, to_anthropic
from sessionstore.formats._export import export_conversation, stream_conversation
from sessionstore.formats._import import ImportReport, import_jsonl
from sessionstore.formats._openai import from_openai, to_openai
from sessionstore.formats._responses import from_openai_responses, to_openai_responses

__all__ = [
    "ImportReport",
    "export_conversation",
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
    "import_jsonl",
    "stream_conversation",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
]
