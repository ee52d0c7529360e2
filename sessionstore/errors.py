"""The exceptions sessionstore raises, as one tree you can catch at any level.

```
SessionStoreError
├── ConfigurationError           bad URL, unsupported dialect, invalid compaction config
│   └── MissingDependencyError   a driver extra is not installed (also an ImportError)
├── NotFoundError
│   ├── SessionNotFoundError     unknown session, or one of another tenant
│   ├── LoopNotFoundError        unknown loop, or one of another session
│   ├── BlockNotFoundError       no block of that generation (time travel)
│   └── OverlayNotFoundError     an overlay name no compaction of the session wrote
├── ConflictError                a write that conflicts with what is stored
│   ├── ClientIdConflictError    a client id stored already with other content
│   ├── SessionExistsError       a session id its tenant already uses
│   ├── AmbiguousSessionError    an unscoped call names an id that several tenants use
│   ├── StaleWriteError          a concurrent writer won (version check failed)
│   └── LoopChangedError         a loop gained messages in turns a new block covers
├── InvalidBlockError            a block that does not fit its loop (turn range, provenance)
├── ContextOverflowError         even the smallest valid context does not fit the budget
├── FormatError                  a conversation that cannot be imported or exported
│   ├── ImportLineError          a line of a conversation file that could not be imported
│   └── TrajectoryLineError      a line of a trajectory file that is not a trajectory
├── SchemaError                  the database is not at the expected migration head
├── StorageError                 any other database failure (original chained)
│   └── LockTimeoutError         a lock another transaction holds was not released in time
└── SummarizerError              a summarizer could not produce a digest
    ├── SummarizerUnavailableError   no answer: connection refused, DNS, 5xx or 429 after retries
    ├── SummarizerTimeoutError       no answer within the timeout, after retries
    ├── SummarizerAuthError          the server refused the credentials (401, 403)
    └── SummarizerResponseError      an answer without a usable digest (bad JSON, no text, 4xx)
```

Bad arguments (a negative limit, a wrong type) raise `ValueError` / `TypeError`, and
messages that fail validation raise `pydantic.ValidationError`, which names the field.
Input over a limit (the constants of `sessionstore.models`: a lone surrogate, JSON deeper
than `MAX_JSON_DEPTH`, an id past the 64-bit range, ...) is one of these two, before
anything is written, on every backend. This tree is for outcomes and state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

if TYPE_CHECKING:
    from sessionstore.formats import ImportReport

__all__ = [
    "AmbiguousSessionError",
    "BlockNotFoundError",
    "ClientIdConflictError",
    "ConfigurationError",
    "ConflictError",
    "ContextOverflowError",
    "FormatError",
    "ImportLineError",
    "InvalidBlockError",
    "LockTimeoutError",
    "LoopChangedError",
    "LoopNotFoundError",
    "MissingDependencyError",
    "NotFoundError",
    "OverlayNotFoundError",
    "SchemaError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionStoreError",
    "StaleWriteError",
    "StorageError",
    "SummarizerAuthError",
    "SummarizerError",
    "SummarizerResponseError",
    "SummarizerTimeoutError",
    "SummarizerUnavailableError",
    "TrajectoryLineError",
    "describe_validation_error",
]


class SessionStoreError(Exception):
    """Base class of every error sessionstore raises on purpose."""


class ConfigurationError(SessionStoreError):
    """The store was configured wrongly: a bad URL or an unsupported dialect."""


class MissingDependencyError(ConfigurationError, ImportError):
    """A database driver is not installed; the message names the extra to install."""


class NotFoundError(SessionStoreError):
    """Something that was asked for does not exist (or is not visible to this handle)."""


class SessionNotFoundError(NotFoundError):
    """No such session, or it belongs to another tenant.

    The two cases are deliberately indistinguishable, so a tenant-scoped handle cannot
    learn whether another tenant's session exists.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} not found")
        self.session_id = session_id


class LoopNotFoundError(NotFoundError):
    """No such loop in this session."""

    def __init__(self, loop_id: int, *, session_id: str | None = None) -> None:
        where = f" in session {session_id!r}" if session_id is not None else ""
        super().__init__(f"loop {loop_id} not found{where}")
        self.loop_id = loop_id
        self.session_id = session_id


class BlockNotFoundError(NotFoundError):
    """No such compaction block (generation, replacement message or event block) here."""


class OverlayNotFoundError(NotFoundError):
    """No compaction of the session wrote this overlay name (only `default` may be empty)."""

    def __init__(self, overlay: str, *, session_id: str) -> None:
        super().__init__(
            f"session {session_id!r} has no overlay {overlay!r}: compact it with that overlay "
            "first, or leave the overlay out to use 'default'"
        )
        self.overlay = overlay
        self.session_id = session_id


class ConflictError(SessionStoreError):
    """The write conflicts with what is stored (for example a reused client id)."""


class ClientIdConflictError(ConflictError):
    """A message's `client_id` is stored already with other content.

    A retry must send the same message; a new message needs a new client id. Nothing of
    the batch was written. `message_id` is the stored message that holds the id.
    """

    def __init__(self, client_id: str, message_id: int) -> None:
        super().__init__(
            f"client_id {client_id!r} is already stored with different content "
            f"(message {message_id}); a retry must send the same message"
        )
        self.client_id = client_id
        self.message_id = message_id


class SessionExistsError(ConflictError):
    """The tenant already has a session with this id (ids are per tenant)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} already exists")
        self.session_id = session_id


class AmbiguousSessionError(ConflictError):
    """An unscoped call names a session id that more than one tenant uses.

    Session ids are unique within a tenant only; the unscoped `SessionStore` finds the
    session by its id alone, so for such an id use `store.for_tenant(app_name, user_id)`.
    """

    def __init__(self, session_id: str) -> None:
        super().__init__(
            f"session id {session_id!r} is used by more than one tenant: "
            "use store.for_tenant(app_name, user_id) to name the session"
        )
        self.session_id = session_id


class StaleWriteError(ConflictError):
    """The write was based on a session version that another writer has moved past.

    Re-read the session (its `version`) and retry the write if it still makes sense.
    """

    def __init__(self, session_id: str, *, expected: int, actual: int) -> None:
        super().__init__(
            f"session {session_id!r} is at version {actual}, not {expected}: "
            "another writer changed it; re-read the session and retry"
        )
        self.session_id = session_id
        self.expected = expected
        self.actual = actual


class LoopChangedError(ConflictError):
    """A block was built from a loop that has since gained messages in the turns it covers.

    A tool result appended during a compaction joins the turn of its call: a block built
    before it arrived would stand for that turn without it. `compact_session_loops`
    leaves a turn waiting for a result out of its blocks; when an append still meets one
    (an orphan result joining a covered turn), it catches this and compacts again.
    Nothing was written.
    """

    def __init__(self, session_id: str, loop_id: int) -> None:
        super().__init__(
            f"loop {loop_id} of session {session_id!r} gained messages in turns a new block "
            "covers while the block was being built; nothing was written, compact again"
        )
        self.session_id = session_id
        self.loop_id = loop_id


class InvalidBlockError(SessionStoreError):
    """A compaction block does not fit its loop (turn range out of bounds, foreign ids)."""


class ContextOverflowError(SessionStoreError):
    """Even the smallest valid context does not fit the token budget.

    The smallest valid context is the latest user request and the turns that must stay
    with it. `needed` is what that takes and `available` what the budget leaves
    (`max_context_tokens - system_prompt_tokens`).
    """

    def __init__(self, message: str, *, needed: int, available: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.available = available


class FormatError(SessionStoreError):
    """A conversation in an external format cannot be imported or exported."""


class ImportLineError(FormatError):
    """A line could not be imported; the sessions of the lines before it stay imported.

    The error that stopped the line is chained (`__cause__`).
    """

    line_number: int
    """The number of the line, from 1."""
    reason: str
    """What is wrong with the line."""
    report: ImportReport
    """What the lines before it did."""

    def __init__(self, line_number: int, reason: str, report: ImportReport) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number
        self.reason = reason
        self.report = report


class TrajectoryLineError(FormatError):
    """A line of a trajectory file is not a trajectory; nothing after it was written."""

    line_number: int
    """The number of the line, from 1."""
    reason: str
    """What is wrong with the line."""

    def __init__(self, line_number: int, reason: str) -> None:
        super().__init__(f"line {line_number}: {reason}")
        self.line_number = line_number
        self.reason = reason


class SchemaError(SessionStoreError):
    """The database schema is not at the migration head this version of sessionstore needs.

    Run `sessionstore db upgrade` (or `sessionstore.migrate.upgrade(url)`).
    """


class StorageError(SessionStoreError):
    """Any other database failure; the driver's exception is chained as `__cause__`.

    The message names the failure and the driver's own words, never the SQL statement or
    its parameters. A database that cannot be reached (connection refused, unknown host,
    SSL refused) is a `StorageError` whose message says so.
    """


class LockTimeoutError(StorageError):
    """A write waited longer than the lock timeout for a lock another transaction holds.

    Nothing was written; retry later. Another writer (a hung transaction, a long
    compaction) holds the session's row lock (PostgreSQL `lock_timeout`) or the database's
    write lock (SQLite `busy_timeout`). The wait is `make_engine(url, lock_timeout=...)`
    seconds (30 by default); the CLI takes `--lock-timeout`.
    """


class SummarizerError(SessionStoreError):
    """A summarizer could not produce a digest; nothing was summarised.

    The message says what happened and how to fix it, and never holds an API key.

    Attributes:
        url: the endpoint called, without credentials (None for an offline summarizer).
        status_code: the last HTTP status received, if any.
        attempts: how many requests were sent, retries included.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        status_code: int | None = None,
        attempts: int = 0,
    ) -> None:
        super().__init__(message)
        self.url = url
        self.status_code = status_code
        self.attempts = attempts


class SummarizerUnavailableError(SummarizerError):
    """The summarizer could not be reached or kept failing: connection refused, DNS, 5xx, 429.

    `retry_after` is the delay in seconds the server asked for (429, 503), when it gave one.
    """

    def __init__(
        self,
        message: str,
        *,
        url: str | None = None,
        status_code: int | None = None,
        attempts: int = 0,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, url=url, status_code=status_code, attempts=attempts)
        self.retry_after = retry_after


class SummarizerTimeoutError(SummarizerError):
    """The summarizer did not answer within its timeout, on any attempt."""


class SummarizerAuthError(SummarizerError):
    """The summarizer's server refused the credentials (HTTP 401 or 403); not retried."""


class SummarizerResponseError(SummarizerError):
    """The server answered, but not with a usable digest.

    Malformed JSON, no choices, an empty text, or a status that retrying cannot fix
    (400, 404, 422: a wrong model name or URL, a request the server rejects).
    """


def describe_validation_error(exc: ValidationError) -> str:
    """Return a one-line description of a pydantic `ValidationError`, naming each field."""
    problems = []
    for error in exc.errors(include_url=False):
        location = ".".join(str(part) for part in error["loc"])
        problems.append(f"{location}: {error['msg']}" if location else error["msg"])
    return f"invalid {exc.title}: " + "; ".join(problems)
