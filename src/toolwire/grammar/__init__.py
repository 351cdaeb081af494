"""The constraint side: XGrammar structural tags built from the formats the parser runs.

    tag = toolwire.structural_tag("qwen3", tools, tool_choice="auto", tokenizer=tok)
    result = toolwire.structural_tag_with_reason(...)   # .tag .reasons .fallback

A format carries its grammar as data (`Format.grammar`, `toolwire.formats.shape`), so
a format added with `formats.register()` gets a tag like the built-ins. Modules:
`schema` (normalization), `policy` (when and with which schema), `request`
(eligibility: a tag at all, and why not), `build` / `anchored` / `harmony` (the tag
of each grammar kind), `preflight` (XGrammar compile check, optional), `shared`
(equal rules once), `api` (the entry points).
"""

from __future__ import annotations

from toolwire.grammar.api import (
    TagResult,
    legacy_structural_tag,
    structural_tag,
    structural_tag_with_reason,
)
from toolwire.grammar.policy import GrammarPolicy
from toolwire.grammar.schema import normalize

__all__ = [
    "GrammarPolicy",
    "TagResult",
    "legacy_structural_tag",
    "normalize",
    "structural_tag",
    "structural_tag_with_reason",
]
