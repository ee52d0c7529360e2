"""Import and export of external conversation formats (OpenAI, Anthropic)."""

from sessionstore.formats._anthropic import from_anthropic, to_anthropic
from sessionstore.formats._openai import from_openai, to_openai

__all__ = ["from_anthropic", "from_openai", "to_anthropic", "to_openai"]
