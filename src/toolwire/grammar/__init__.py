"""The constraint side: structural tags (XGrammar) and Lark grammars (llguidance) of one
language, built from the formats the parser runs.

    tag = toolwire.structural_tag("qwen3", tools, tool_choice="auto", tokenizer=tok)
    result = toolwire.structural_tag_with_reason(...)   # .tag .reasons .fallback
    lark = toolwire.grammar.lark_grammar("qwen3", tools, tokenizer=tok)  # llguidance's form

A format carries its grammar as data (`Format.grammar`, `toolwire.formats.shape`), so
a format added with `formats.register()` gets a tag like the built-ins. Modules:
`schema` (normalization), `policy` (when and with which schema), `request`
(eligibility: a tag at all, and why not), `build` / `anchored` / `harmony` (the tag
of each grammar kind), `preflight` (XGrammar compile check, optional), `shared`
(one conversion: preflight and equal rules once), `whitespace` (bounded JSON
whitespace, both backends), `lark` (the elements as Lark), `guidance` (llguidance's
tokenizer and check, optional), `api` (the entry points).
"""

from __future__ import annotations

from toolwire.grammar.api import (
    LarkResult,
    TagResult,
    lark_grammar,
    lark_grammar_with_reason,
    legacy_structural_tag,
    structural_tag,
    structural_tag_with_reason,
)
from toolwire.grammar.policy import GrammarPolicy
from toolwire.grammar.schema import normalize

__all__ = [
    "GrammarPolicy",
    "LarkResult",
    "TagResult",
    "lark_grammar",
    "lark_grammar_with_reason",
    "legacy_structural_tag",
    "normalize",
    "structural_tag",
    "structural_tag_with_reason",
]
