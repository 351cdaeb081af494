"""The public entry points: `structural_tag`, `structural_tag_with_reason`, legacy shape.

Data flow of one request::

    format + tools + tool_choice + policy
        -> eligibility (`grammar.request`): a tag at all? which schema per tool,
           token level (Parser.gated); a TagRequest, or the TagResult saying why not
        -> build_tag(): by the format's grammar kind (`Format.grammar`):
               Shape          calls between delimiters       (`build.build_format`)
               AnchoredShape  line-anchored lists            (`anchored.anchored_format`)
               HeaderShape    header-routed messages         (`harmony.harmony_format`)
           -> {"type": "structural_tag", "format": ...}, JSON values bounded
        -> custom tools' grammars inside their calls (`freeform.enforce`)
        -> `shared.prepare` (XGrammar, when installed): one conversion of the tag is
           both its preflight and, with `policy.shared_rules`, the one EBNF grammar
           in which the rules every tool repeats exist once and JSON whitespace is
           bounded by literal alternatives; when it does not compile, the documented
           fallback: auto -> no constraint; required/named -> the native envelope
           with any JSON object as arguments; if that fails too -> no constraint
        -> TagResult(tag or None, reasons, fallback code)

Never raises for a request's tools or schemas (those become reasons); raises
`UsageError` only for caller mistakes (a bad tool_choice, `in_reasoning` for a format
without reasoning).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from toolwire import formats
from toolwire.formats.spec import AnchoredShape, Format, HeaderShape, Shape
from toolwire.grammar.anchored import anchored_format
from toolwire.grammar.build import build_format
from toolwire.grammar.freeform import FREEFORM, enforce
from toolwire.grammar.guidance import check_lark
from toolwire.grammar.harmony import harmony_format
from toolwire.grammar.lark import LarkUnsupported, to_lark
from toolwire.grammar.policy import RELAXED, GrammarPolicy, bound_tag, tool_specs
from toolwire.grammar.request import TagRequest, TagResult, eligibility
from toolwire.grammar.schema import sort_properties
from toolwire.grammar.shared import prepare
from toolwire.tokenizer import Tokenizer

__all__ = [
    "LarkResult",
    "TagResult",
    "build_tag",
    "lark_grammar",
    "lark_grammar_with_reason",
    "legacy_structural_tag",
    "structural_tag",
    "structural_tag_with_reason",
]


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
    request = eligibility(
        format,
        tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        tokenizer=tokenizer,
        in_reasoning=in_reasoning,
        policy=policy,
    )
    if isinstance(request, TagResult):
        return request
    reasons = list(request.reasons)
    share = request.policy.shared_rules
    tag = build_tag(request)
    freeform = [s.name for s in request.specs if FREEFORM in s.schema]
    if freeform:  # relaxed below: any object, so no grammar there either
        tag, why = enforce(tag, freeform)
        reasons.extend(why)
    error, sent = prepare(tag, share=share)
    if error is None:
        return TagResult(sent, tuple(reasons), None, request.token_level, tag)
    reasons.append(f"the tag does not compile: {error}")
    if request.choice in ("required", "named"):
        tag = build_tag(request, relax=True)
        error, sent = prepare(tag, share=share)
        if error is None:
            reasons.append("fell back to the native envelope with any JSON object as arguments")
            return TagResult(sent, tuple(reasons), "relaxed", request.token_level, tag)
    return TagResult(None, tuple(reasons), "compile_failed", request.token_level)


@dataclass(frozen=True)
class LarkResult:
    """An llguidance grammar (or None: no constraint from this backend) and why."""

    #: The Lark grammar (llguidance's dialect), or None.
    lark: str | None
    reasons: tuple[str, ...] = ()
    #: As `TagResult.fallback`, and "unsupported_backend": llguidance cannot express
    #: this tag (the reason says why); XGrammar's structural tag can.
    fallback: str | None = None
    token_level: bool = False


def lark_grammar(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
    special_ids: Collection[int] | None = None,
) -> str | None:
    """The request's constraint for llguidance: the language of `structural_tag` as a
    Lark grammar (`grammar.lark`), or None (see `lark_grammar_with_reason`)."""
    return lark_grammar_with_reason(
        format,
        tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        tokenizer=tokenizer,
        in_reasoning=in_reasoning,
        policy=policy,
        special_ids=special_ids,
    ).lark


def lark_grammar_with_reason(
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
    special_ids: Collection[int] | None = None,
) -> LarkResult:
    """`lark_grammar` with the reasons and fallback code. The same eligibility and the
    same elements as the structural tag; the check is llguidance's (when installed),
    and a grammar it rejects gets the tag's fallback (relaxed arguments for forced
    calls, else none). No XGrammar runs here.

    `special_ids`: the ids the llguidance that applies the grammar takes as special
    tokens (default: every added token, as `guidance.ll_tokenizer` builds it; an
    upstream's: `guidance.upstream_specials`). A delimiter id outside them could be
    written by text, so such a tag is not expressed ("unsupported_backend")."""
    request = eligibility(
        format,
        tools,
        tool_choice=tool_choice,
        parallel_tool_calls=parallel_tool_calls,
        tokenizer=tokenizer,
        in_reasoning=in_reasoning,
        policy=policy,
    )
    if isinstance(request, TagResult):
        return LarkResult(None, request.reasons, request.fallback, request.token_level)
    reasons = list(request.reasons)
    level = request.token_level
    specials = {}
    if tokenizer is not None and level:
        special = tokenizer.added_ids if special_ids is None else frozenset(special_ids)
        plain = sorted(set(request.lex.ids(request.fmt.delimiters)) - special)
        if plain:
            why = (
                f"llguidance cannot express this tag: the delimiter token(s) {plain} are "
                "not special tokens to its tokenizer, so text could write their ids"
            )
            return LarkResult(None, (*reasons, why), "unsupported_backend", level)
        specials = {i: tokenizer.decode([i]) for i in special - set(tokenizer.eos_ids)}
    try:
        text = to_lark(build_tag(request), token_level=level, specials=specials)
    except LarkUnsupported as exc:
        reasons.append(f"llguidance cannot express this tag: {exc}")
        return LarkResult(None, tuple(reasons), "unsupported_backend", level)
    error = check_lark(text)
    if error is None:
        return LarkResult(text, tuple(reasons), None, level)
    reasons.append(f"the grammar does not compile: {error}")
    if request.choice in ("required", "named"):
        text = to_lark(build_tag(request, relax=True), token_level=level, specials=specials)
        if check_lark(text) is None:
            reasons.append("fell back to the native envelope with any JSON object as arguments")
            return LarkResult(text, tuple(reasons), "relaxed", level)
    return LarkResult(None, tuple(reasons), "compile_failed", level)


def build_tag(request: TagRequest, *, relax: bool = False) -> dict[str, Any]:
    """The request's tag as structural elements (rules not shared), JSON values
    bounded; `relax`: every tool's arguments any JSON object."""
    specs = [replace(s, schema=RELAXED) for s in request.specs] if relax else list(request.specs)
    shape, choice, parallel = request.shape, request.choice, request.parallel
    body: dict[str, Any]
    if isinstance(shape, AnchoredShape):
        anchor = request.fmt.anchor
        anchors: str | list[str] = (
            "" if anchor is None else [anchor.word] if anchor.word else anchor.begins
        )
        body = anchored_format(shape, anchors, specs, choice, parallel=parallel)
    elif isinstance(shape, HeaderShape):
        exclude = request.policy.exclude_delimiters
        body = harmony_format(
            request.fmt, shape, request.lex, specs, choice, parallel=parallel, exclude=exclude
        )
    else:
        if shape.sort_keys:
            specs = [replace(s, schema=sort_properties(s.schema)) for s in specs]
        body = build_format(
            request.fmt,
            shape,
            specs,
            choice,
            parallel=parallel,
            lex=request.lex,
            in_reasoning=request.in_reasoning,
            exclude=request.policy.exclude_delimiters,
        )
    tag: dict[str, Any] = bound_tag(
        {"type": "structural_tag", "format": body}, request.policy.max_whitespace
    )
    return tag


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
    shape = fmt.grammar
    if (
        not isinstance(shape, Shape)
        or shape.style != "json"
        or "{index}" in shape.head
        or shape.items is not None
    ):
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
