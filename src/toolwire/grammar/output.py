"""Structured output (`response_format`): a tag that keeps the answer to a JSON schema.

Data flow::

    format name + JSON schema (`json_object`: any object) + tokenizer + in_reasoning
        -> schema normalization (as for tool parameters)
        -> [the format's reasoning block, as tool tags build it] + optional leading
           whitespace + {"type": "json_schema", ...}
        -> preflight (XGrammar, when installed); on failure the policy's fallback:
           any JSON object; if that fails too -> no tag
        -> TagResult(tag or None, reasons, fallback code)

No tool call can be written under this tag: the answer is content, JSON only. Formats
whose answer sits behind a header (gpt-oss's `final` channel) get no tag and a reason.
Never raises for a request's schema. Pure but for the preflight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolwire import formats
from toolwire.errors import ToolwireError
from toolwire.formats.spec import Shape
from toolwire.grammar.api import TagResult
from toolwire.grammar.build import Delimiters, _Builder
from toolwire.grammar.policy import RELAXED
from toolwire.grammar.preflight import check
from toolwire.grammar.schema import normalize
from toolwire.tokenizer import Tokenizer

__all__ = ["output_tag"]

_LEADING_SPACE = {"type": "regex", "pattern": "[ \\n]{0,2}"}


def output_tag(
    format: str,
    schema: Mapping[str, Any],
    *,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
) -> TagResult:
    """The tag that makes the output one JSON value of `schema` (after any reasoning)."""
    try:
        fmt = formats.get(format)
    except ToolwireError as exc:
        return TagResult(None, (str(exc),), "unknown_format")
    prefix: dict[str, Any] | None = None
    token_level = False
    if fmt.reasoning is not None or fmt.header is not None:
        # The answer follows a reasoning block or sits behind a header. A header's
        # tag is written by its shape of delimited calls (harmony's is not one); a
        # reasoning block alone needs only the format's reasoning pair (a shape of
        # line-anchored calls, MiniCPM's, says nothing more about it).
        shape = fmt.grammar
        if not isinstance(shape, Shape) and fmt.header is not None:
            why = f"format {fmt.name!r}: response_format is not supported for this format"
            return TagResult(None, (why,), "unsupported_format")
        if not isinstance(shape, Shape):
            shape = Shape(head="")
        token_level = tokenizer is not None and formats.is_gated(fmt, tokenizer)
        builder = _Builder(fmt, shape, Delimiters(fmt, tokenizer, token_level), True, True)
        inside = fmt.starts_in_reasoning if in_reasoning is None else in_reasoning
        prefix = builder.reasoning(inside)
    normalized, reasons = normalize(schema, "response_format.schema")

    def build(json_schema: Mapping[str, Any]) -> dict[str, Any]:
        value = {"type": "json_schema", "json_schema": dict(json_schema)}
        elements = [e for e in (prefix, _LEADING_SPACE, value) if e is not None]
        return {"type": "structural_tag", "format": {"type": "sequence", "elements": elements}}

    tag = build(normalized)
    error = check(tag)
    if error is None:
        return TagResult(tag, tuple(reasons), None, token_level)
    reasons.append(f"the schema does not compile: {error}")
    tag = build(RELAXED)
    if check(tag) is None:
        reasons.append("fell back to any JSON object")
        return TagResult(tag, tuple(reasons), "relaxed", token_level)
    return TagResult(None, tuple(reasons), "compile_failed", token_level)
