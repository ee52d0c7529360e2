"""The public surface is exactly what `__all__` lists (after httpx's test of the same name)."""

import sessionstore
import sessionstore.errors


def test_all_public_names_are_exported_and_sorted() -> None:
    public = {
        name
        for name in vars(sessionstore)
        if not name.startswith("_")
        and name
        not in {
            "errors",
            "models",
            "tokens",
            "turns",
            "store",
            "formats",
            "engine",
            "migrate",
            "tables",
            "testing",
            "cli",
            "audit",
            "config",
            "orchestration",
            "overlay",
            "strategies",
            "summarizers",
            "synthetic",
        }
    }
    assert set(sessionstore.__all__) - {"__version__"} == public
    assert sessionstore.__all__ == sorted(sessionstore.__all__)


def test_every_error_is_exported_and_drawn_in_the_tree() -> None:
    doc = sessionstore.errors.__doc__ or ""
    for name in sessionstore.errors.__all__:
        if not isinstance(getattr(sessionstore.errors, name), type):
            continue  # describe_validation_error, a helper
        assert name in sessionstore.__all__
        assert name in doc
        assert issubclass(getattr(sessionstore, name), sessionstore.SessionStoreError)
