"""`HexDigest`: a content hash kept as its bytes in the database, a hex string in Python."""

from __future__ import annotations

from sqlalchemy import Dialect, LargeBinary
from sqlalchemy.types import TypeDecorator

__all__ = ["HexDigest"]


class HexDigest(TypeDecorator[str]):
    """A SHA-256 digest stored as its 32 bytes, read and written as its hex string.

    Half the 64 characters of the hex form on every row (migration 0011). Reads that
    bypass SQLAlchemy's row processing get the bytes, which `StoredMessage` turns to hex.
    """

    impl = LargeBinary(32)
    cache_ok = True

    def process_bind_param(self, value: str | bytes | None, dialect: Dialect) -> bytes | None:
        """Store the digest's bytes."""
        return bytes.fromhex(value) if isinstance(value, str) else value

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> str | None:
        """Return the digest as lowercase hex."""
        return None if value is None else bytes(value).hex()
