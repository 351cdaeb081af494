"""Hunyuan (Tencent): a JSON list of calls between `<tool_calls>` tokens.

Sample (vLLM's `hunyuan_a13b` parser, which reads `<tool_calls>([\\s\\S]*?)</tool_calls>`
as a JSON list of `{"name", "arguments"}` objects)::

    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_calls>

Each item is one call (`syntax.json_calls`, the model's own argument bytes);
`</tool_calls>` ends the list (`syntax.end_marked`). Reasoning is `<think>`...
`</think>`; Hunyuan A13B wraps its answer in `<answer>`...`</answer>`, special tokens
that are dropped (the text between them is the content). The call tokens are added
tokens, so the format is gated.

Which Hunyuan the vocabulary is. Hy3 and Hy4 (`formats.hy_v3`, `formats.hy_v4`) write
tagged calls (`<tool_call>NAME[<tool_sep>]<arg_key>...`) in the same `<tool_calls>`
section, and their checkpoints spell every structural token with a suffix
(`<tool_calls:opensource>`; vLLM's `hy_v3`/`hy_v4` and SGLang's `hunyuan` parsers read
it from the vocabulary). `resolve(vocabulary)` is the pure hook that reads the served
vocabulary (the token texts): argument tags with `<tool_sep>` are Hy3, argument tags
without it Hy4 (SGLang's detector tells them apart the same way), neither this
format's JSON lists; each is returned spelled with the vocabulary's suffix, or
unchanged when it has none.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from toolwire.formats import register
from toolwire.formats.json_list import JsonList
from toolwire.formats.spec import Format

#: A structural token, with the checkpoint's suffix when it has one.
_STRUCTURAL = re.compile(
    r"</?(?P<word>think|tool_calls|tool_call|tool_sep|arg_key|arg_value|answer)"
    r"(?P<suffix>:[^\s>]+)?>"
)


def _format(suffix: str) -> Format:
    calls = JsonList(f"<tool_calls{suffix}>", f"</tool_calls{suffix}>")
    return Format(
        name="hunyuan",
        call=(calls.start, None),
        syntax=calls.syntax,
        render=calls.render,
        reasoning=(f"<think{suffix}>", f"</think{suffix}>"),
        marks=(calls.end,),
        grammar=calls.shape,
    )


def suffix_of(vocabulary: Iterable[str]) -> str:
    """The suffix the vocabulary's structural tokens carry (`:6124c78e`), or ""."""
    for token in vocabulary:
        match = _STRUCTURAL.fullmatch(token)
        if match and match["suffix"]:
            return str(match["suffix"])
    return ""


def resolve(vocabulary: Iterable[str]) -> Format:
    """The Hunyuan format of the served vocabulary, spelled as it spells its tokens
    (pure): Hy3 for argument tags with `<tool_sep>`, Hy4 for argument tags without it,
    else A13B's JSON lists."""
    from toolwire.formats import hy_v3, hy_v4  # siblings: registered on first lookup

    words: set[str] = set()
    suffix = ""
    for token in vocabulary:
        match = _STRUCTURAL.fullmatch(token)
        if match:
            words.add(match["word"])
            suffix = suffix or (match["suffix"] or "")
    if "arg_key" in words:
        fmt = hy_v3.HY_V3 if "tool_sep" in words else hy_v4.HY_V4
        return hy_v3.spelled(suffix, sep="tool_sep" in words, name=fmt.name) if suffix else fmt
    return _format(suffix) if suffix else HUNYUAN


HUNYUAN = register(_format(""))
