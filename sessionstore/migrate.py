"""Schema migrations run from code: upgrade, downgrade, current revision and a head check.

The alembic scripts ship inside the package (`sessionstore/_migrations` in a wheel) and
sit at the top of a checkout (`migrations/`), so both `sessionstore db upgrade` after
`pip install` and `alembic upgrade head` in a checkout run the same revisions.

>>> async def main():
...     await upgrade("sqlite+aiosqlite:///sessionstore.db")
"""

from sessionstore.store._schema import VERSION_TABLE, check, current, downgrade, head, upgrade

__all__ = ["VERSION_TABLE", "check", "current", "downgrade", "head", "upgrade"]
