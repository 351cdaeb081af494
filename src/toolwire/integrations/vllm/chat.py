"""One chat request's prompt inside vLLM, without vLLM: what the renderer hands `render_prompt`.

Data flow (a chat request in a vLLM server started with `--tokenizer-mode toolwire`)::

    request.messages --media_refusal()--> None, or why the request is refused (a media
                                          part: checked before vLLM fetches anything)
    vLLM's chat params (its `chat_template_kwargs`, the request's `tools`,
    `add_generation_prompt`, `continue_final_message`, `documents`, ...)
        --template_call()--> TemplateCall: tools, add_generation_prompt, and the
                             template variables (refused: continue_final_message)
    vLLM's parsed conversation (its own message preparation: text parts joined or
    kept as the template wants, tool-call arguments as objects, developer messages
    folded into system ones where the template has no developer role)
        --render_chat()--> toolwire.render_prompt(isolate=True) --> Prompt (ids, text)

Every string of the conversation, the tools and the template variables is request
data: `render_prompt` spells any added token's text in them from ordinary sub-words,
so only the template's own markup reaches the model as delimiter ids.

Nothing here imports vLLM; `renderer` wires it into vLLM's renderer registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolwire.errors import UsageError
from toolwire.prompt import Prompt, render_prompt
from toolwire.tokenizer import Tokenizer

__all__ = ["MODE", "TEXT_PARTS", "TemplateCall", "media_refusal", "render_chat", "template_call"]

#: The `--tokenizer-mode` (and renderer mode) of toolwire's renderer.
MODE = "toolwire"

#: Content-part types that are text (Chat Completions' and Responses' spellings).
TEXT_PARTS = frozenset({"text", "input_text", "output_text"})

#: vLLM's rendering switches that are not template variables.
_RENDERING = frozenset({"chat_template", "tokenize", "return_dict"})


@dataclass(frozen=True)
class TemplateCall:
    """What one request gives the template besides its messages."""

    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True
    #: Template variables (`enable_thinking`, `reasoning_effort`, `documents`, ...):
    #: request data, isolated like message content; those the template never reads
    #: are dropped by `render_prompt`.
    variables: dict[str, Any] = field(default_factory=dict)


def media_refusal(messages: Sequence[Any]) -> str | None:
    """Why toolwire cannot render these messages (None: it can).

    A content part that is not text (an image, audio, video, file, embeddings) would
    need vLLM's multimodal placeholders, which are template-level ids toolwire's
    isolation does not place; such a request is refused rather than rendered without
    its media.
    """
    for index, message in enumerate(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for part in content:
            if isinstance(part, str):
                continue
            kind = part.get("type", "text") if isinstance(part, Mapping) else None
            if kind not in TEXT_PARTS:
                role = message.get("role", "?")
                return (
                    f"messages[{index}] ({role}) has a {kind!r} content part: vLLM's "
                    f"toolwire renderer (--tokenizer-mode toolwire) renders text only; "
                    f"serve multimodal requests from a vLLM without it"
                )
    return None


def template_call(kwargs: Mapping[str, Any]) -> TemplateCall:
    """The template's inputs from vLLM's merged chat-template kwargs.

    `continue_final_message` (the final assistant message left open) is refused:
    `render_prompt` renders whole turns, and cutting its text after the fact could
    split a token the template wrote.
    """
    data = {k: v for k, v in kwargs.items() if v is not None}
    if data.pop("continue_final_message", False):
        raise UsageError(
            "continue_final_message is not supported by vLLM's toolwire renderer "
            "(--tokenizer-mode toolwire): it renders whole turns"
        )
    tools = data.pop("tools", None)
    if tools is not None and not isinstance(tools, list):
        raise UsageError(f"tools must be a list of tool objects, got {type(tools).__name__}")
    add_generation_prompt = data.pop("add_generation_prompt", True)
    if not isinstance(add_generation_prompt, bool):
        raise UsageError("add_generation_prompt must be true or false")
    for key in _RENDERING:
        data.pop(key, None)
    return TemplateCall(tools, add_generation_prompt, data)


def render_chat(
    tokenizer: Tokenizer,
    conversation: Sequence[Mapping[str, Any]],
    template: str,
    call: TemplateCall,
) -> Prompt:
    """The prompt for vLLM's parsed conversation, rendered with isolation on."""
    return render_prompt(
        list(conversation),
        tokenizer,
        tools=call.tools,
        template=template,
        add_generation_prompt=call.add_generation_prompt,
        isolate=True,
        template_kwargs=call.variables,
    )
