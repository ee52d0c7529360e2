"""Tenant isolation through the Google ADK session service (issue 19).

ADK names the tenant in every call (`app_name`, `user_id`). Bob's calls on the session id
ada uses find nothing (`get_session` gives None, `list_sessions` lists none of hers,
`delete_session` deletes nothing); bob creating that id gets a session of his own, without
ada's events or her `user:` state; and every row of ada's session and of her user state
stays as it was. `app:` state is shared by the users of one app by ADK's design.
"""

from __future__ import annotations

import pytest

pytest.importorskip("google.adk")

from google.adk.events.event import Event
from google.genai import types

from sessionstore import SessionStore
from sessionstore.integrations.adk import SessionStoreSessionService
from tests.reliability.test_tenant_isolation import snapshot

APP = "app"
SID = "shared-id"


def _said(text: str, author: str = "user") -> Event:
    return Event(
        invocation_id="inv",
        author=author,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def _texts(events: list[Event]) -> list[str]:
    return [
        part.text or ""
        for event in events
        if event.content is not None
        for part in event.content.parts or []
    ]


async def test_another_tenants_adk_session_is_invisible(store: SessionStore) -> None:
    service = SessionStoreSessionService(store)
    ada = await service.create_session(
        app_name=APP,
        user_id="ada",
        session_id=SID,
        state={"topic": "ada's", "user:lang": "fr", "app:theme": "dark"},
    )
    await service.append_event(ada, _said("ada's secret"))
    ada_id = service.store_session_id(app_name=APP, user_id="ada", session_id=SID)
    before = await snapshot(store, ada_id, (APP, "ada"))
    ada_sessions = [s.id for s in (await store.for_tenant(APP, "ada").list_sessions()).items]

    assert await service.get_session(app_name=APP, user_id="bob", session_id=SID) is None
    assert (await service.list_sessions(app_name=APP, user_id="bob")).sessions == []
    await service.delete_session(app_name=APP, user_id="bob", session_id=SID)  # nothing of his

    bob = await service.create_session(app_name=APP, user_id="bob", session_id=SID)
    assert bob.events == []
    assert "topic" not in bob.state
    assert "user:lang" not in bob.state
    assert bob.state.get("app:theme") == "dark"  # app state: shared within the app
    await service.append_event(bob, _said("bob's note"))
    again = await service.get_session(app_name=APP, user_id="bob", session_id=SID)
    assert again is not None
    assert _texts(again.events) == ["bob's note"]

    assert await snapshot(store, ada_id, (APP, "ada")) == before  # every row, as it was
    assert [s.id for s in (await store.for_tenant(APP, "ada").list_sessions()).items] == (
        ada_sessions
    )
    hers = await service.get_session(app_name=APP, user_id="ada", session_id=SID)
    assert hers is not None
    assert _texts(hers.events) == ["ada's secret"]
    assert hers.state["topic"] == "ada's"
    assert hers.state["user:lang"] == "fr"
    listed = await service.list_sessions(app_name=APP, user_id="ada")
    assert [s.id for s in listed.sessions] == [SID]
