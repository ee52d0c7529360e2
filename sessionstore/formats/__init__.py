"""Import and export of external conversation formats (OpenAI, Anthropic)."""
