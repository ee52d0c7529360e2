"""factory-boy factories that build sessionstore's pydantic models (`.build()` only)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import factory.random
from factory.base import Factory
from factory.declarations import BaseDeclaration, LazyAttribute, LazyFunction, Sequence
from factory.faker import Faker

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    CustomMessage,
    SystemMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

# factory-boy 3.3 types `Factory[T].build() -> T`, but its declarations and `reseed_random` carry no
# annotations, so strict mypy refuses to call them. Each gets the signature we use, once, here.
faker: Callable[..., BaseDeclaration] = Faker
lazy_function: Callable[[Callable[[], object]], BaseDeclaration] = LazyFunction
lazy_attribute: Callable[[Callable[[Any], object]], BaseDeclaration] = LazyAttribute
sequence: Callable[[Callable[[int], object]], BaseDeclaration] = Sequence
reseed_random: Callable[[int], None] = factory.random.reseed_random


class TextContentFactory(Factory[TextContent]):
    class Meta:
        model = TextContent

    text = faker("paragraph", nb_sentences=3)


class UserMessageFactory(Factory[UserMessage]):
    class Meta:
        model = UserMessage

    content = lazy_function(lambda: [TextContentFactory.build()])


class SystemMessageFactory(Factory[SystemMessage]):
    class Meta:
        model = SystemMessage

    content = faker("paragraph", nb_sentences=2)


class ToolCallFactory(Factory[ToolCall]):
    class Meta:
        model = ToolCall

    id = sequence(lambda n: f"call_{n:04d}")
    name = faker("random_element", elements=["bash", "read_file", "search", "edit"])
    arguments = sequence(lambda n: json.dumps({"command": f"cat src/module_{n}.py"}))


class AssistantMessageFactory(Factory[AssistantMessage]):
    """An assistant message with some text and, by default, one tool call."""

    class Meta:
        model = AssistantMessage

    class Params:
        calls = 1

    content = lazy_attribute(
        lambda o: [TextContentFactory.build()] + [ToolCallFactory.build() for _ in range(o.calls)]
    )


class ToolResultMessageFactory(Factory[ToolResultMessage]):
    class Meta:
        model = ToolResultMessage

    tool_call_id = sequence(lambda n: f"call_{n:04d}")
    tool_name = "bash"
    content = lazy_function(
        lambda: [TextContentFactory.build(text="\n".join(f"line {i}" for i in range(30)))]
    )
    is_error = False


class BashExecutionMessageFactory(Factory[BashExecutionMessage]):
    class Meta:
        model = BashExecutionMessage

    command = "git status"
    output = faker("paragraph")
    exit_code = 0


class CustomMessageFactory(Factory[CustomMessage]):
    class Meta:
        model = CustomMessage

    custom_type = "note"
    data = lazy_function(lambda: {"pinned": True, "tags": ["a", "b"]})


def tool_turn(calls: int = 1) -> list[UserMessage | AssistantMessage | ToolResultMessage]:
    """An assistant message with `calls` tool calls followed by one result per call."""
    assistant = AssistantMessageFactory.build(calls=calls)
    results = [
        ToolResultMessageFactory.build(tool_call_id=call.id, tool_name=call.name)
        for call in assistant.tool_calls
    ]
    return [assistant, *results]


def conversation(
    turns: int = 5, calls: int = 1
) -> list[UserMessage | AssistantMessage | ToolResultMessage]:
    """A user request followed by `turns` tool-using assistant turns and a final answer."""
    messages: list[UserMessage | AssistantMessage | ToolResultMessage] = [
        UserMessageFactory.build()
    ]
    for _ in range(turns):
        messages.extend(tool_turn(calls))
    messages.append(AssistantMessageFactory.build(calls=0))
    return messages
