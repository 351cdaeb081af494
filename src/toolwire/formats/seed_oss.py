"""Seed-OSS: Qwen3-Coder's XML body inside `<seed:tool_call>`, `<seed:think>` reasoning.

Sample (llama.cpp's Seed-OSS grammar test, `test_seed_tool_call`; the same body vLLM's
`seed_oss` parser reads, a `Qwen3Parser` with only the wrapper tokens renamed)::

    <seed:tool_call>
    <function=get_weather>
    <parameter=location>Berlin</parameter>
    </function>
    </seed:tool_call>

Everything between the wrapper tokens is Qwen3-Coder's (`syntax.tagged` with
`qwen3_coder.TAGS`); values are typed by the declared schema. Reasoning is
`<seed:think>`...`</seed:think>`, with `<seed:cot_budget_reflect>` notes inside it.

Gating. The chat template names `<seed:bos>`, `<seed:eos>`, `<seed:pad>`,
`<seed:think>`, `<seed:tool_call>` and `<seed:cot_budget_reflect>` (with their
closing forms); the think, tool-call and budget tokens are added to the vocabulary but
not marked special. Added is what gating rests on: each is one id, matched only by
that id, so the format is gated and a `<seed:tool_call>` spelled from sub-words in a
tool result is text. Not special means only that a decoder skipping special tokens
keeps their text (why vLLM can parse them from text at all) and that
`tokenizer.special_ids` does not hold them; toolwire reads ids, so neither matters
here. The budget notes' tokens, added and not special, are text (in reasoning, where
the model writes them), as every such token is.
"""

from __future__ import annotations

from functools import partial

from toolwire.formats import register
from toolwire.formats.qwen3_coder import BARE, QWEN3_CODER, render
from toolwire.formats.qwen3_coder import syntax as qwen3_coder_syntax
from toolwire.formats.spec import Format

CALL = ("<seed:tool_call>", "</seed:tool_call>")

SEED_OSS = register(
    Format(
        name="seed_oss",
        call=CALL,
        syntax=qwen3_coder_syntax,
        render=partial(render, call=CALL),
        reasoning=("<seed:think>", "</seed:think>"),
        bare=BARE,  # the same body, standing alone
        grammar=QWEN3_CODER.grammar,
    )
)
