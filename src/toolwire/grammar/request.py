"""Eligibility: may this request have a structural tag, and if not, why not.

    format + tools + tool_choice + parallel + tokenizer + in_reasoning + policy
        -> eligibility() -> TagRequest (everything a builder needs, resolved)
                          | TagResult(None, reasons, fallback code) (no tag, and why)

The checks, in order (the first that fails decides the code):

    policy disabled                                       -> "disabled"
    the format is not registered                          -> "unknown_format"
    the format has no `grammar`                           -> "unsupported_format"
    no tool declared                                      -> "no_tools"
    tool_choice auto under scope "auto", no tool strict,
      parallel calls allowed                              -> "scope"
    token level: the argument syntax writes a mark as
      text inside values, or the entry delimiter begins
      with text before its token                          -> "unsupported_format"

A bad `tool_choice`, or `in_reasoning` for a format without reasoning, is the caller's
mistake: `UsageError`. Reasons collected on the way (schema normalizations, a
text-level tag, keywords the pythonic grammar does not enforce) travel with the
request. Pure: no xgrammar here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolwire import formats
from toolwire.errors import UsageError
from toolwire.formats.spec import AnchoredShape, Format, GrammarShape, Shape
from toolwire.grammar.anchored import unenforced_reasons
from toolwire.grammar.build import Delimiters
from toolwire.grammar.policy import GrammarPolicy, ToolSpec, choose, tool_specs
from toolwire.tokenizer import Tokenizer

__all__ = ["TagRequest", "TagResult", "eligibility"]


@dataclass(frozen=True)
class TagResult:
    """A structural tag (or None: send no constraint) and why it is what it is."""

    #: XGrammar's `{"type": "structural_tag", "format": {...}}`, or None.
    tag: dict[str, Any] | None
    #: Human-readable reasons: schema normalizations, fallbacks, why there is no tag.
    reasons: tuple[str, ...] = ()
    #: None when `tag` is the full constraint; otherwise a short code to count:
    #: "disabled", "scope", "no_tools", "unknown_format", "unsupported_format",
    #: "relaxed" (compile failed; arguments relaxed), "compile_failed" (no tag).
    fallback: str | None = None
    #: True when delimiters are named by token id.
    token_level: bool = False
    #: The tag as structural elements, before its rules were shared (None when `tag`
    #: is None); equal to `tag` when rules are not shared.
    elements: dict[str, Any] | None = None


@dataclass(frozen=True, eq=False)
class TagRequest:
    """A request that may have a tag: what every builder needs, resolved."""

    fmt: Format
    #: The format's grammar data (`Format.grammar`).
    shape: GrammarShape
    #: "auto", "none", "required" or "named".
    choice: str
    #: The tools a call may name (one, for a named choice).
    specs: tuple[ToolSpec, ...]
    parallel: bool
    #: The output starts inside the reasoning block.
    in_reasoning: bool
    #: Delimiters are named by token id.
    token_level: bool
    #: The format's delimiters as the grammar writes them.
    lex: Delimiters
    policy: GrammarPolicy
    #: Reasons collected so far (normalizations, a text-level tag, ...).
    reasons: tuple[str, ...]


def eligibility(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
) -> TagRequest | TagResult:
    """The resolved request, or the result saying why it gets no tag (module doc)."""
    policy = policy or GrammarPolicy()
    if not policy.enabled:
        return TagResult(None, ("grammar policy disabled",), "disabled")
    try:
        fmt = format if isinstance(format, Format) else formats.get(format)
    except UsageError as exc:
        return TagResult(None, (str(exc),), "unknown_format")
    shape = fmt.grammar
    if shape is None:
        why = f"format {fmt.name!r}: no structural tag is defined for this format"
        return TagResult(None, (why,), "unsupported_format")
    specs, reasons = tool_specs(tools or [], policy)
    choice, chosen = choose(tool_choice, specs)
    if not specs:
        return TagResult(None, (*reasons, "no tools declared"), "no_tools")
    if (
        choice == "auto"
        and policy.scope == "auto"
        and parallel_tool_calls
        and not any(s.strict for s in specs)
    ):
        why = "scope 'auto': no tool is strict and parallel calls are allowed"
        return TagResult(None, (*reasons, why), "scope")
    if in_reasoning is None:
        in_reasoning = fmt.starts_in_reasoning
    if in_reasoning and fmt.reasoning is None:
        raise UsageError(f"format {fmt.name!r} has no reasoning block")
    token_level = tokenizer is not None and formats.is_gated(fmt, tokenizer)
    if tokenizer is not None and not token_level:
        reasons.append(f"{fmt.name}: delimiters are not single tokens here; text-level tag")
    if isinstance(shape, Shape | AnchoredShape) and shape.style == "pythonic":
        reasons += unenforced_reasons(specs)
    lex = Delimiters(fmt, tokenizer, token_level)
    if token_level and isinstance(shape, Shape):
        problem = _token_level_problem(fmt, shape, lex)
        if problem is not None:
            return TagResult(None, (*reasons, problem), "unsupported_format", token_level)
    return TagRequest(
        fmt,
        shape,
        choice,
        tuple(chosen),
        parallel_tool_calls,
        in_reasoning,
        token_level,
        lex,
        policy,
        tuple(reasons),
    )


def _token_level_problem(fmt: Format, shape: Shape, lex: Delimiters) -> str | None:
    """Why a token-level tag cannot be built from this shape, or None."""
    unnamed = _unnamed_marks(fmt, shape)
    if unnamed:
        return (
            f"format {fmt.name!r}: the argument syntax writes the token(s) {unnamed} "
            "inside values, which this tag cannot name by id"
        )
    entry = fmt.section[0] if fmt.section else fmt.call[0]
    pieces = lex.pieces(entry)
    if not isinstance(pieces[0], int) and not (len(pieces) > 1 and isinstance(pieces[1], int)):
        return (
            f"format {fmt.name!r}: {entry!r} begins with text before its token, so a "
            "token-level trigger cannot be built (pass no tokenizer for a text-level tag "
            "with a text-matching parser)"
        )
    return None


def _unnamed_marks(fmt: Format, shape: Shape) -> list[str]:
    """Marks (token delimiters inside a call body) that no template of the shape writes:
    the argument style writes them as text, so a token-level tag cannot force their id."""
    if shape.style in ("json", "gemma"):
        # JSON arguments hold no marks (Mistral's optional [CALL_ID] is unused); Gemma's
        # `<|"|>` is written by id element by element (`gemma_values`).
        return []
    texts = [shape.head, shape.tail, *shape.section_text, shape.list_end]
    if shape.params is not None:
        texts += [shape.params.open, shape.params.close, shape.params.after]
    return [m for m in fmt.marks if not any(m in t for t in texts)]
