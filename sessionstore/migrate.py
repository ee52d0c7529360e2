"""Schema migrations run from code: upgrade, downgrade, current revision and a head check.

The alembic scripts ship inside the package (`sessionstore/_migrations` in a wheel) and
sit at the top of a checkout (`migrations/`), so both `sessionstore db upgrade` after
`pip install` and `alembic upgrade head` in a checkout run the same revisions.
`distribute` spreads the schema over a Citus cluster (see docs/guides/scale-out.md).

>>> async def main():
...     await upgrade("sqlite+aiosqlite:///sessionstore.db")
"""

from sessionstore.store._distribute import Distribution, distribute
from sessionstore.store._schema import VERSION_TABLE, check, current, downgrade, head, upgrade

__all__ = [
    "VERSION_TABLE",
    "Distribution",
    "check",
    "current",
    "distribute",
    "downgrade",
    "head",
    "upgrade",
]
