"""factory-boy factories that build sessionstore's pydantic models (`.build()` only)."""

from __future__ import annotations

import json

import factory

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


class TextContentFactory(factory.Factory):
    class Meta:
        model = TextContent

    text = factory.Faker("paragraph", nb_sentences=3)


class UserMessageFactory(factory.Factory):
    class Meta:
        model = UserMessage

    content = factory.LazyFunction(lambda: [TextContentFactory.build()])


class SystemMessageFactory(factory.Factory):
    class Meta:
        model = SystemMessage

    content = factory.Faker("paragraph", nb_sentences=2)


class ToolCallFactory(factory.Factory):
    class Meta:
        model = ToolCall

    id = factory.Sequence(lambda n: f"call_{n:04d}")
    name = factory.Faker("random_element", elements=["bash", "read_file", "search", "edit"])
    arguments = factory.Sequence(lambda n: json.dumps({"command": f"cat src/module_{n}.py"}))


class AssistantMessageFactory(factory.Factory):
    """An assistant message with some text and, by default, one tool call."""

    class Meta:
        model = AssistantMessage

    class Params:
        calls = 1

    content = factory.LazyAttribute(
        lambda o: [TextContentFactory.build()] + [ToolCallFactory.build() for _ in range(o.calls)]
    )


class ToolResultMessageFactory(factory.Factory):
    class Meta:
        model = ToolResultMessage

    tool_call_id = factory.Sequence(lambda n: f"call_{n:04d}")
    tool_name = "bash"
    content = factory.LazyFunction(
        lambda: [TextContentFactory.build(text="\n".join(f"line {i}" for i in range(30)))]
    )
    is_error = False


class BashExecutionMessageFactory(factory.Factory):
    class Meta:
        model = BashExecutionMessage

    command = "git status"
    output = factory.Faker("paragraph")
    exit_code = 0


class CustomMessageFactory(factory.Factory):
    class Meta:
        model = CustomMessage

    custom_type = "note"
    data = factory.LazyFunction(lambda: {"pinned": True, "tags": ["a", "b"]})


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
