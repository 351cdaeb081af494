"""The input side: chat messages -> prompt ids, with delimiter isolation.

Data flow::

    messages, tools, --messages.prepare()--> the data a template reads (checked:
    template_kwargs                          JSON data, depth, no lone surrogates;
                                             kwargs the template never reads dropped)
                    --accepts.fit()-------> instructions (system, developer) where the
                                            template takes them, every message with
                                            its content
                    --call_ids.renumber()-> Kimi's `functions.NAME:IDX` call ids, the
                                            same for a call and its result
                    --isolate.isolate()---> delimiter text in the request (kwargs'
                                            values included) hidden from the template
                                            behind placeholders;
                      template.render()     prompt text (Hugging Face semantics), the
                                            placeholders restored;
                                            prompt ids, that text spelled from
                                            ordinary sub-words
                    --reasoning-----------> does the prompt end inside reasoning?

`render_prompt` is the one entry point; `Prompt` is its result. With `isolate=False`
the template sees the request as it is (it may act on delimiter text in content) and
the ids are the tokenizer's plain encoding of the text, as `transformers`'
`apply_chat_template(..., tokenize=True)` gives them.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolwire.errors import PromptError, UsageError
from toolwire.formats import get as get_format
from toolwire.prompt.accepts import accepts, fit
from toolwire.prompt.call_ids import numbering, renumber
from toolwire.prompt.isolate import encode as plain_ids
from toolwire.prompt.isolate import isolate as isolate_ids
from toolwire.prompt.messages import plain, prepare
from toolwire.prompt.reasoning import ends_in_reasoning
from toolwire.prompt.sandbox import MAX_RENDER_CHARS
from toolwire.prompt.template import (
    control_strings,
    is_markup,
    iterates_content,
    render,
    variables_read,
)
from toolwire.tokenizer import Tokenizer

__all__ = ["Prompt", "render_prompt"]

#: The tokenizer's named special tokens, offered to templates as transformers does.
_SPECIAL_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)

_SURROGATE = re.compile("[\ud800-\udfff]")

#: Reasoning delimiters assumed when no format is named.
_DEFAULT_REASONING = ("<think>", "</think>")


@dataclass(frozen=True)
class Prompt:
    """A rendered chat request."""

    #: The prompt token ids for the engine (no BOS added beyond what the template wrote).
    ids: list[int]
    #: The rendered prompt text (the ids decode to it).
    text: str
    #: True when the prompt ends inside a reasoning block it opened: pass it to
    #: `Parser(..., in_reasoning=...)`.
    in_reasoning: bool


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    tokenizer: Tokenizer,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    format: str | None = None,
    template: str | os.PathLike[str] | None = None,
    add_generation_prompt: bool = True,
    isolate: bool = True,
    template_kwargs: Mapping[str, Any] | None = None,
    max_prompt_tokens: int | None = None,
    special_tokens: Mapping[str, str] | None = None,
    max_render_chars: int | None = None,
) -> Prompt:
    """Render `messages` (OpenAI shapes) with the model's chat template into prompt ids.

    `template`: the template text, or a path to a `.jinja` file; by default the
    tokenizer's own. `format`: the output format's name, whose reasoning delimiters
    decide `in_reasoning` (`<think>`/`</think>` when None). `template_kwargs`: extra
    template variables such as `enable_thinking`; those the template never reads are
    dropped, and string values are request data, isolated like message content.
    `max_prompt_tokens`: a longer prompt raises `PromptError`. `special_tokens`: the
    tokenizer's named tokens (`bos_token`, `eos_token`, ...) where its config lacks
    them; trusted like the config: the template writes them as their ids.
    `max_render_chars`: the longest text the template may build (default
    `sandbox.MAX_RENDER_CHARS`); a template that would build more raises `PromptError`
    before it allocates it.
    """
    if not isinstance(tokenizer, Tokenizer):
        raise UsageError(
            f"render_prompt needs a toolwire.Tokenizer (load_tokenizer(path)), "
            f"got {type(tokenizer).__name__}"
        )
    source = _template_source(tokenizer, template)
    delimiters = get_format(format).reasoning if format is not None else _DEFAULT_REASONING
    prepared = prepare(messages, list_content=iterates_content(source))
    if tools is not None and not isinstance(tools, list | tuple):
        raise PromptError(f"tools must be a list of tool objects, got {type(tools).__name__}")
    tool_data = None if tools is None else plain(list(tools), "tools")
    kwargs = _template_kwargs(template_kwargs, variables_read(source))
    specials = {k: v for k in _SPECIAL_TOKENS if (v := tokenizer.token_string(k)) is not None}
    for key, value in (special_tokens or {}).items():
        if key not in _SPECIAL_TOKENS or not isinstance(value, str):
            raise UsageError(
                f"special_tokens takes {', '.join(_SPECIAL_TOKENS)} as strings, got {key!r}"
            )
        specials[key] = value
    taken = accepts(source, specials)
    prepared = fit(prepared, taken)
    scheme = numbering(source, specials, taken)
    if scheme.own or (format is not None and get_format(format).name == "kimi_k2"):
        renumber(prepared, scheme)

    limit = MAX_RENDER_CHARS if max_render_chars is None else max_render_chars
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise UsageError(f"max_render_chars must be a positive integer, got {limit!r}")

    def render_with(data: list[Any]) -> str:
        # A fresh copy per render: templates may mutate what they are given.
        *chat, marked_tools, marked_kwargs = copy.deepcopy(data)
        return render(
            source,
            chat,
            tools=marked_tools,
            add_generation_prompt=add_generation_prompt,
            variables={**specials, **dict(zip(kwargs, marked_kwargs, strict=True))},
            max_chars=limit,
        )

    # Every string of the request is hidden from the template where it holds delimiter
    # text, template kwargs' values included: a client's kwarg is request data like
    # message content (only their names, which the template reads, are not).
    data: list[Any] = [*prepared, tool_data, list(kwargs.values())]
    content: list[tuple[int, int]] = []
    if isolate:
        controls = _controls(source, format, delimiters)
        reserved = (source, *specials.values())
        text, ids, content = isolate_ids(
            tokenizer, data, render_with, controls=controls, reserved=reserved
        )
    else:
        text = render_with(data)
        ids = plain_ids(tokenizer, text)
    if _SURROGATE.search(text):
        raise PromptError("the chat template wrote a lone surrogate, which is not text")
    if max_prompt_tokens is not None and len(ids) > max_prompt_tokens:
        raise PromptError(
            f"the prompt is {len(ids)} tokens, more than max_prompt_tokens={max_prompt_tokens}; "
            f"shorten the conversation by at least {len(ids) - max_prompt_tokens} tokens"
        )
    return Prompt(ids=ids, text=text, in_reasoning=ends_in_reasoning(text, delimiters, content))


def _controls(source: str, format: str | None, reasoning: tuple[str, str] | None) -> frozenset[str]:
    """Markup the template must not find in request text: what it searches content
    for, and the format's delimiters (which may not be tokens of this vocabulary)."""
    named = get_format(format).delimiters if format is not None else ()
    own = {d for d in (*named, *(reasoning or ())) if is_markup(d)}
    return control_strings(source) | own


def _template_kwargs(given: Mapping[str, Any] | None, read: frozenset[str]) -> dict[str, Any]:
    """The kwargs the template reads, as plain data; the others could change nothing."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise PromptError(f"template_kwargs must be a mapping, got {type(given).__name__}")
    return {
        key: plain(value, f"template_kwargs.{key}")
        for key, value in given.items()
        if isinstance(key, str) and key in read
    }


def _template_source(tokenizer: Tokenizer, template: str | os.PathLike[str] | None) -> str:
    if isinstance(template, os.PathLike):
        try:
            return Path(template).read_text(encoding="utf-8")
        except OSError as exc:
            raise PromptError(f"cannot read the chat template {template}: {exc}") from exc
    if isinstance(template, str):
        return template
    if template is not None:
        raise UsageError(
            f"template must be the template text or a path, got {type(template).__name__}"
        )
    if tokenizer.chat_template is None:
        raise PromptError(
            f"the tokenizer {tokenizer.name or '(unnamed)'} has no chat template; pass "
            "template= (the template text or a .jinja path)"
        )
    return tokenizer.chat_template
