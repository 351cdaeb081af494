"""Which constraint backend an engine gets its grammar for, and that grammar.

    engine.grammar_backends         the backends the engine applies, preferred first
        embedded (llama.cpp)        ("llguidance", "xgrammar") with both installed: for a
                                    new tool set llguidance builds and compiles in
                                    milliseconds where XGrammar's compile takes tenths
                                    of a second to seconds, and its dearer masks cost
                                    less than that over any call a model writes
                                    (`python -m bench.grammar`, docs/benchmarks.md); XGrammar where
                                    llguidance cannot express the tag
        vLLM / SGLang               the one the upstream is configured for
                                    (`--grammar-backend xgrammar|llguidance`; SGLang's
                                    is read from its server info with `auto`)

    request_grammar(engine, format, tools, ...) -> TagResult
        tag: what the engine applies: XGrammar's structural tag, or llguidance's grammar
        JSON (`{"grammars": [{"lark_grammar": ...}]}`) of the same language

The grammar modules build the language (`toolwire.grammar`); this module only chooses.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from threading import Thread
from typing import Any

from toolwire.formats.spec import Format
from toolwire.grammar import (
    GrammarPolicy,
    TagResult,
    lark_grammar_with_reason,
    structural_tag_with_reason,
)
from toolwire.grammar.guidance import llguidance_module, upstream_specials
from toolwire.tokenizer import Tokenizer

__all__ = [
    "BACKENDS",
    "GUIDANCE",
    "XGRAMMAR",
    "backends_of",
    "lark_of",
    "request_grammar",
    "warm_upstream_specials",
]

XGRAMMAR = "xgrammar"
GUIDANCE = "llguidance"
BACKENDS = (XGRAMMAR, GUIDANCE)


def warm_upstream_specials(tokenizer: Tokenizer) -> None:
    """Start reading which added tokens an llguidance upstream takes as special (seconds,
    once per vocabulary), on a thread, so no request waits for it."""
    if llguidance_module() is not None:
        Thread(target=upstream_specials, args=(tokenizer,), daemon=True).start()


def _specials(
    engine: Any, tokenizer: Tokenizer | None
) -> tuple[frozenset[int] | None, tuple[str, ...]]:
    """The ids the engine's llguidance takes as special (None: every added token, as the
    embedded engine builds its tokenizer), and a reason when they are only assumed."""
    if tokenizer is None or callable(getattr(engine, "compile_structural_tag", None)):
        return None, ()
    if llguidance_module() is None:
        why = "llguidance is not installed here: every added token is assumed special upstream"
        return None, (why,)
    return upstream_specials(tokenizer), ()


def lark_of(constraint: Mapping[str, Any]) -> str | None:
    """The Lark grammar of a constraint in llguidance's form, else None (a structural tag)."""
    grammars = constraint.get("grammars")
    if isinstance(grammars, list) and len(grammars) == 1 and isinstance(grammars[0], Mapping):
        text = grammars[0].get("lark_grammar")
        return text if isinstance(text, str) else None
    return None


def backends_of(engine: Any) -> tuple[str, ...]:
    """The backends an engine applies, preferred first (XGrammar when it says none)."""
    found = getattr(engine, "grammar_backends", None)
    return tuple(found) if found else (XGRAMMAR,)


def request_grammar(
    engine: Any,
    format: str | Format,
    tools: Sequence[Any] | None,
    *,
    tool_choice: Any = "auto",
    parallel_tool_calls: bool = True,
    tokenizer: Tokenizer | None = None,
    in_reasoning: bool | None = None,
    policy: GrammarPolicy | None = None,
) -> TagResult:
    """The request's constraint in the form of the engine's preferred backend that can
    express it; `TagResult.tag` is what the engine applies (None: no constraint)."""
    kw: dict[str, Any] = {
        "tool_choice": tool_choice,
        "parallel_tool_calls": parallel_tool_calls,
        "tokenizer": tokenizer,
        "in_reasoning": in_reasoning,
        "policy": policy,
    }
    reasons: tuple[str, ...] = ()
    result: TagResult | None = None
    for backend in backends_of(engine):
        if backend == GUIDANCE:
            specials, why = _specials(engine, tokenizer)
            lark = lark_grammar_with_reason(format, tools, special_ids=specials, **kw)
            lark = replace(lark, reasons=(*lark.reasons, *why))
            tag = None if lark.lark is None else {"grammars": [{"lark_grammar": lark.lark}]}
            result = TagResult(tag, lark.reasons, lark.fallback, lark.token_level)
            if lark.fallback == "unsupported_backend":
                reasons = tuple(r for r in lark.reasons if r.startswith("llguidance"))
                continue  # XGrammar's tag, when the engine has it
            return result
        tagged = structural_tag_with_reason(format, tools, **kw)
        return TagResult(
            tagged.tag,
            (*tagged.reasons, *reasons),
            tagged.fallback,
            tagged.token_level,
            tagged.elements,
        )
    assert result is not None
    return result
