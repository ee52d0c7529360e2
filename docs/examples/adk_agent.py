"""An ADK agent whose sessions live in sessionstore, run over two processes.

    python adk_agent.py write    # first process: a new session, one question with a tool call
    python adk_agent.py resume   # second process: the same session, read back, one more question

The model is scripted (a `BaseLlm` that answers from what it is sent), so it runs offline.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from sessionstore import SessionStore, migrate
from sessionstore.integrations.adk import SessionStoreSessionService

URL = "sqlite+aiosqlite:///adk-agent.db"
APP, USER, SESSION = "weather-app", "ada", "trip-planning"


class ScriptedModel(BaseLlm):
    """Calls `get_weather` for a weather question, then answers from what it was sent."""

    model: str = "scripted"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        parts = [part for content in llm_request.contents for part in content.parts or []]
        asked = [part.text for part in parts if part.text and not part.thought]
        last = parts[-1]
        if last.function_response is not None:
            weather = last.function_response.response or {}
            reply = types.Part(text=f"It is {weather['temp_c']} °C in {weather['city']}.")
        elif "weather" in (last.text or ""):
            call = types.FunctionCall(name="get_weather", args={"city": "Paris"})
            reply = types.Part(function_call=call)
        else:
            reply = types.Part(text=f"Your first question was: {asked[0]}")
        yield LlmResponse(content=types.Content(role="model", parts=[reply]))


def get_weather(city: str) -> dict[str, object]:
    """Return the weather in a city."""
    return {"city": city, "temp_c": 21}


agent = LlmAgent(
    name="assistant",
    model=ScriptedModel(),
    instruction="Answer questions about the weather.",
    tools=[get_weather],
    output_key="last_answer",  # the agent's answer, kept in the session state
)


async def ask(runner: Runner, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(user_id=USER, session_id=SESSION, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            answer = event.content.parts[0].text or ""
    return answer


async def main(step: str) -> None:
    await migrate.upgrade(URL)  # creates the tables once; a no-op after that
    async with SessionStore.from_url(URL) as store:
        service = SessionStoreSessionService(store)
        runner = Runner(agent=agent, app_name=APP, session_service=service)
        if step == "write":
            await service.create_session(
                app_name=APP, user_id=USER, session_id=SESSION, state={"user:units": "celsius"}
            )
            print(await ask(runner, "What is the weather in Paris?"))
        else:
            session = await service.get_session(app_name=APP, user_id=USER, session_id=SESSION)
            assert session is not None
            print(f"{len(session.events)} events; last answer: {session.state['last_answer']}")
            print(await ask(runner, "Thanks! What did I ask you first?"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
