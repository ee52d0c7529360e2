"""Adapters for agent SDKs, each an optional extra, imported from its own module.

- `sessionstore.integrations.openai_agents`: `SessionStoreSession`, an openai-agents
  `Session` (`pip install "sessionstore[openai-agents]"`).

Nothing is imported here, so `import sessionstore` never loads an SDK.
"""
