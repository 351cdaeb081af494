"""The neutral request: what every API's adapter makes of its body, and the turn runs.

Its fields keep the shapes `render_prompt` and `Parser` read, which are OpenAI Chat
Completions' (messages, tools as `{"type": "function", "function": {...}}`,
`tool_choice` as "auto" / "none" / "required" / `{"type": "function", "function":
{"name": ...}}`). An API whose body names a field otherwise says so in its field
table (`Api.fields`), so an error the pipeline raises names the API's field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolwire.server.core.fields import HostedTool

__all__ = ["ChatRequest"]


@dataclass(frozen=True)
class ChatRequest:
    """A validated request, in the neutral (Chat Completions) names and shapes."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    #: Answer as server-sent events while the output comes, or as one JSON body.
    stream: bool = False
    #: Chat Completions' `stream_options.include_usage`: a last chunk with the usage.
    include_usage: bool = False
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    #: The JSON schema the answer must follow (`response_format`), or None.
    response_format: dict[str, Any] | None = None
    #: Declared tools the provider would run (not offered; the turn drops or refuses).
    hosted_tools: tuple[HostedTool, ...] = ()
    #: Top-level fields of the body that the API's table does not name (logged, counted).
    unknown_fields: tuple[str, ...] = ()
    #: Choices to generate (Chat Completions' `n`).
    n: int = 1
    #: Per returned token: its log probability, and this many most likely alternatives
    #: (None: no logprobs).
    top_logprobs: int | None = None
