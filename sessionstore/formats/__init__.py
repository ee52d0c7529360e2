"""Conversations in and out: OpenAI chat and Responses, Anthropic, JSONL files, export documents.

The pydantic-ai format lives in `sessionstore.formats.pydantic_ai`, imported on its own, as
it needs the `pydantic-ai` extra.
"""

from typing import TYPE_CHECKING

from sessionstore._lazy import lazy_exports

if TYPE_CHECKING:
    from sessionstore.formats._anthropic import from_anthropic, to_anthropic
    from sessionstore.formats._export import export_conversation, stream_conversation
    from sessionstore.formats._import import ImportReport, import_jsonl
    from sessionstore.formats._openai import from_openai, to_openai
    from sessionstore.formats._responses import from_openai_responses
    from sessionstore.formats._responses_export import to_openai_responses

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

# Where each name lives: imported on first use (PEP 562), so importing one module of
# the package does not import the others.
_SOURCES: dict[str, tuple[str, ...]] = {
    "sessionstore.formats._anthropic": (
        "from_anthropic",
        "to_anthropic",
    ),
    "sessionstore.formats._export": (
        "export_conversation",
        "stream_conversation",
    ),
    "sessionstore.formats._import": (
        "ImportReport",
        "import_jsonl",
    ),
    "sessionstore.formats._openai": (
        "from_openai",
        "to_openai",
    ),
    "sessionstore.formats._responses": ("from_openai_responses",),
    "sessionstore.formats._responses_export": ("to_openai_responses",),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _SOURCES)
