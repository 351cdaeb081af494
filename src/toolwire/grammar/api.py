"""The public entry points: `structural_tag`, `structural_tag_with_reason`, legacy shape.

Data flow of one request::

    format name + tools + tool_choice + policy
        -> policy: constrain at all? which schema per tool (normalized / relaxed)
        -> shape lookup (grammar data per format) and token level (Parser.gated);
           pythonic / llama3_json (`anchored`) and gpt_oss (`harmony`) are built whole
        -> build_format() -> {"type": "structural_tag", "format": ...}
        -> custom tools' grammars inside their calls (`freeform.enforce`)
        -> preflight (XGrammar, when installed); on failure the documented fallback:
           auto -> no constraint; required/named -> the native envelope with any
           JSON object as arguments; if that fails too -> no constraint
        -> shared rules (`policy.shared_rules`, XGrammar installed): the tag as one
           EBNF grammar in which the rules every tool repeats exist once
        -> TagResult(tag or None, reasons, fallback code)

Never raises for a request's tools or schemas (those become reasons); raises
`UsageError` only for caller mistakes (a bad tool_choice, `in_reasoning` for a format
without reasoning).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolwire import formats
from toolwire.errors import UsageError
from toolwire.formats.spec import Format
from toolwire.grammar.anchored import ANCHORED, anchored_format, unenforced_reasons
from toolwire.grammar.build import Delimiters, build_format
from toolwire.grammar.freeform import FREEFORM, enforce
from toolwire.grammar.harmony import harmony_format
from toolwire.grammar.policy import RELAXED, GrammarPolicy, bound_tag, choose, tool_specs
from toolwire.grammar.preflight import check
from toolwire.grammar.schema import sort_properties
from toolwire.grammar.shapes import SHAPES, UNSUPPORTED, Shape
from toolwire.grammar.shared import share
from toolwire.tokenizer import Tokenizer

#: Formats whose tag is built whole rather than from a `Shape` (no call delimiters
#: around the arguments): line-anchored lists (`anchored`) and harmony headers.
WHOLE = frozenset({*ANCHORED, "gpt_oss"})

__all__ = ["TagResult", "legacy_structural_tag", "structural_tag", "structural_tag_with_reason"]


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


def structural_tag(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
) -> dict[str, Any] | None:
    """The structural tag for a request, or None for no constraint (see the result's
    reasons with `structural_tag_with_reason`)."""
    return structural_tag_with_reason(
        format,
        tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        tokenizer=tokenizer,
        in_reasoning=in_reasoning,
        policy=policy,
    ).tag


def structural_tag_with_reason(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
) -> TagResult:
    """`structural_tag`, with the reasons and fallback code the server logs and counts.

    `in_reasoning`: the output starts inside the reasoning block (None: the format's
    default, as `Parser`). `tokenizer`: when given and the format is gated by it, the
    tag names delimiters by token id.
    """
    policy = policy or GrammarPolicy()
    if not policy.enabled:
        return TagResult(None, ("grammar policy disabled",), "disabled")
    try:
        fmt = format if isinstance(format, Format) else formats.get(format)
    except UsageError as exc:
        return TagResult(None, (str(exc),), "unknown_format")
    shape = SHAPES.get(fmt.name)
    if shape is None and fmt.name not in WHOLE:
        why = UNSUPPORTED.get(fmt.name, "no structural tag is defined for this format")
        return TagResult(None, (f"format {fmt.name!r}: {why}",), "unsupported_format")
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
    if shape is None or shape.style == "pythonic":
        python = shape is not None and shape.style == "pythonic"
        reasons += unenforced_reasons("pythonic" if python else fmt.name, specs)
    unnamed = _unnamed_marks(fmt, shape) if token_level and shape is not None else []
    if unnamed:
        why = (
            f"format {fmt.name!r}: the argument syntax writes the token(s) {unnamed} "
            "inside values, which this tag cannot name by id"
        )
        return TagResult(None, (*reasons, why), "unsupported_format", token_level)
    lex = Delimiters(fmt, tokenizer, token_level)
    entry = fmt.section[0] if fmt.section else fmt.call[0]
    pieces = lex.pieces(entry)
    if (
        token_level
        and shape is not None
        and not isinstance(pieces[0], int)
        and not (len(pieces) > 1 and isinstance(pieces[1], int))
    ):
        why = (
            f"format {fmt.name!r}: {entry!r} begins with text before its token, so a "
            "token-level trigger cannot be built (pass no tokenizer for a text-level tag "
            "with a text-matching parser)"
        )
        return TagResult(None, (*reasons, why), "unsupported_format", token_level)
    exclude = policy.exclude_delimiters
    freeform = [s.name for s in chosen if FREEFORM in s.schema]

    def build(relax: bool) -> dict[str, Any]:
        tag: dict[str, Any] = bound_tag(unbounded(relax), policy.max_whitespace)
        if freeform and not relax:  # relaxed: any object, so no grammar either
            tag, why = enforce(tag, freeform)
            reasons.extend(why)
        return tag

    def unbounded(relax: bool) -> dict[str, Any]:
        use = [replace(s, schema=RELAXED) for s in chosen] if relax else chosen
        if fmt.name in ANCHORED:
            whole = anchored_format(fmt.name, use, choice, parallel=parallel_tool_calls)
            return {"type": "structural_tag", "format": whole}
        if shape is None:  # harmony
            whole = harmony_format(
                fmt, lex, use, choice, parallel=parallel_tool_calls, exclude=exclude
            )
            return {"type": "structural_tag", "format": whole}
        if shape.sort_keys:
            use = [replace(s, schema=sort_properties(s.schema)) for s in use]
        body = build_format(
            fmt,
            shape,
            use,
            choice,
            parallel=parallel_tool_calls,
            lex=lex,
            in_reasoning=in_reasoning,
            exclude=exclude,
        )
        return {"type": "structural_tag", "format": body}

    def result(tag: dict[str, Any], fallback: str | None) -> TagResult:
        sent = share(tag) if policy.shared_rules else tag
        return TagResult(sent, tuple(reasons), fallback, token_level, tag)

    tag = build(False)
    error = check(tag)
    if error is None:
        return result(tag, None)
    reasons.append(f"the tag does not compile: {error}")
    if choice in ("required", "named"):
        tag = build(True)
        if check(tag) is None:
            reasons.append("fell back to the native envelope with any JSON object as arguments")
            return result(tag, "relaxed")
    return TagResult(None, tuple(reasons), "compile_failed", token_level)


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


def legacy_structural_tag(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    policy: GrammarPolicy | None = None,
) -> dict[str, Any] | None:
    """The legacy `{"type": "structural_tag", "structures": [...], "triggers": [...]}`
    shape (text-level, `tool_choice="auto"` semantics), for engines that only take it.

    Only for formats whose arguments are one JSON object after a fixed head (hermes,
    qwen3, DeepSeek V3/V3.1, ...); None for any other format, or when the modern tag
    would be None or does not compile.
    """
    policy = policy or GrammarPolicy()
    modern = structural_tag_with_reason(format, tools, policy=policy)
    if modern.tag is None:
        return None
    fmt = format if isinstance(format, Format) else formats.get(format)
    shape = SHAPES[fmt.name]
    if shape.style != "json" or "{index}" in shape.head or shape.items is not None:
        return None
    specs, _ = tool_specs(tools or [], policy)
    structures = []
    for spec in specs:
        name = spec.name
        if shape.name == "json":
            name = _json_inner(name)
        structures.append(
            {
                "begin": fmt.call[0] + shape.head.replace("{name}", name),
                "schema": dict(spec.schema),
                "end": shape.tail + (fmt.call[1] or ""),
            }
        )
    return {"type": "structural_tag", "structures": structures, "triggers": [fmt.call[0]]}


def _json_inner(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]
