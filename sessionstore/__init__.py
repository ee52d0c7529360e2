"""sessionstore: durable SQL history for long-lived LLM agents."""
