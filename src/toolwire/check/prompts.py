"""The request around each case: its prompt ids, thinking switch and stop tokens.

A case's request is what a client sends: the tools, `tool_choice`, and, when the
format's chat template has a thinking switch (`Setup.thinking`), that switch in
`chat_template_kwargs`. `Prompter.request` renders the template for it (the
`transformers` way, `isolate=False`) and returns the prompt ids and whether the prompt
ends inside an opened reasoning block: the output a case renders starts there, and
every implementation is told the same request. A format whose template cannot be
rendered here gets no prompt ids and its format's default start (said in the report).

`stop_ids` is the set of ids generation ends at: the setup's stop tokens that are
single tokens of the tokenizer, and the tokenizer's own EOS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolwire.check.setup import Setup
from toolwire.errors import ToolwireError
from toolwire.formats.spec import Format
from toolwire.prompt import render_prompt
from toolwire.tokenizer import Tokenizer

__all__ = ["Prompter", "Request", "stop_ids"]


@dataclass(frozen=True)
class Request:
    """What a case's client sends, and what the rendered prompt implies."""

    tool_choice: str = "auto"
    #: `chat_template_kwargs` (the thinking switch), or None.
    template_kwargs: dict[str, Any] | None = None
    #: The prompt's ids ([] when the template could not be rendered here).
    prompt_ids: list[int] = field(default_factory=list)
    #: The prompt ends inside a reasoning block it opened.
    in_reasoning: bool = False


def stop_ids(tok: Tokenizer, prof: Setup) -> frozenset[int]:
    """Ids at which generation ends (the setup's stop tokens and the tokenizer's EOS)."""
    ids = {tok.added_tokens[s] for s in prof.stops if s in tok.added_tokens}
    return frozenset(ids | set(tok.eos_ids))


class Prompter:
    """Renders a format's chat template per request (cached per tools and switch)."""

    def __init__(self, fmt: Format, tok: Tokenizer, prof: Setup, data: Path) -> None:
        self.fmt = fmt
        self.tok = tok
        self.switch = prof.thinking
        self.template: str | None = None
        if prof.template is not None and (data / "tokenizers" / prof.template).is_file():
            self.template = (data / "tokenizers" / prof.template).read_text(encoding="utf-8")
        elif tok.chat_template is not None:
            self.template = tok.chat_template
        #: Why prompts could not be rendered, when they could not.
        self.problem: str | None = None if self.template else "no chat template"
        self._cache: dict[tuple[str, bool | None], tuple[list[int], bool]] = {}

    def request(
        self, tools: list[dict[str, Any]], thinking: bool | None, tool_choice: str = "auto"
    ) -> Request:
        """The request for a case: `thinking` is sent when the template has a switch."""
        kwargs = {self.switch: bool(thinking)} if self.switch and thinking is not None else None
        key = (json.dumps(tools, sort_keys=True), kwargs is not None and bool(thinking))
        if key not in self._cache:
            self._cache[key] = self._render(tools, kwargs)
        ids, in_reasoning = self._cache[key]
        return Request(tool_choice, kwargs, list(ids), in_reasoning)

    def _render(
        self, tools: list[dict[str, Any]], kwargs: dict[str, Any] | None
    ) -> tuple[list[int], bool]:
        if self.template is not None and self.problem is None:
            try:
                prompt = render_prompt(
                    [{"role": "user", "content": "Please help with this request."}],
                    self.tok,
                    tools=tools,
                    format=self.fmt.name,
                    template=self.template,
                    isolate=False,
                    template_kwargs=kwargs,
                )
                return prompt.ids, prompt.in_reasoning
            except ToolwireError as exc:
                self.problem = f"the chat template does not render here: {exc}"[:200]
        start = self.fmt.starts_in_reasoning if kwargs is None else bool(kwargs[self.switch or ""])
        return [], start and self.fmt.reasoning is not None
