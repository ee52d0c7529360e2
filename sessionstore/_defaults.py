"""Defaults that several layers share; this module imports nothing, so anything can read it."""

__all__ = ["DEFAULT_URL"]

DEFAULT_URL = "sqlite+aiosqlite:///sessionstore.db"
"""The database a store or the command line opens when none is named: `sessionstore.db` here."""
