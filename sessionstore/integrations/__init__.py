"""Adapters for agent SDKs, each an optional extra, imported from its own module.

- `sessionstore.integrations.openai_agents`: `SessionStoreSession`, an openai-agents
  `Session` (`pip install "sessionstore[openai-agents]"`).
- `sessionstore.integrations.pydantic_ai`: persist a pydantic-ai agent's messages and
  resume it from a built context (`pip install "sessionstore[pydantic-ai]"`).
- `sessionstore.integrations.adk`: `SessionStoreSessionService`, a Google ADK session
  service (`pip install "sessionstore[adk]"`).

Nothing is imported here, so `import sessionstore` never loads an SDK.
"""
