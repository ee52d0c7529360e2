"""URL checks and driver selection."""

import pytest

from sessionstore.errors import ConfigurationError
from sessionstore.store._engine import normalize_url


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///x.db", "sqlite+aiosqlite"),
        ("sqlite+aiosqlite:///x.db", "sqlite+aiosqlite"),
        ("postgresql://u@h/db", "postgresql+asyncpg"),
        ("postgres://u@h/db", "postgresql+asyncpg"),
    ],
)
def test_driverless_urls_get_the_async_driver(url: str, expected: str) -> None:
    assert normalize_url(url).drivername == expected


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/db", "unsupported database"),
        ("postgresql+psycopg2://u@h/db", "unsupported driver"),
        ("not a url", "cannot parse"),
    ],
)
def test_unsupported_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        normalize_url(url)
