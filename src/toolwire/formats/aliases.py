"""Other names for the built-in formats: the model names users know, and the peers'
parser names where they mean one toolwire format.

Lookups ignore case and the separators `-`, `_`, `.` and spaces (`spelling`), so
`GLM-5.1`, `glm_5_1` and `glm51` are one name. Each entry records why it maps where it
does; a peer name that could mean two toolwire formats (vLLM's `qwen3_json`, used for
Qwen2.5's hermes calls and Qwen3's hermes calls with `<think>`) is left out.
"""

from __future__ import annotations

__all__ = ["BUILTIN", "spelling"]


def spelling(name: str) -> str:
    """The form names are compared in: lower case, without `-`, `_`, `.` or spaces."""
    return "".join(c for c in name.lower() if c not in "-_. ")


#: alias -> canonical format name.
BUILTIN: dict[str, str] = {
    # GLM-5 and GLM-5.1: vLLM's recipes (recipes.vllm.ai/zai-org/GLM-5.1, docs.vllm.ai
    # recipes GLM5) serve both with `--tool-call-parser glm47`.
    "glm5": "glm47",
    "glm51": "glm47",
    # SGLang's `glm` is its GLM-4.5 detector (function_call_parser.py: "glm" and
    # "glm45" -> Glm4MoeDetector).
    "glm": "glm45",
    # Kimi K2.5: vLLM's recipe (moonshotai/Kimi-K2.5) uses `--tool-call-parser kimi_k2`;
    # K2.6: its tokenizer_config.json (the one in the shared test data) holds the same
    # tool-call tokens at the same ids (163595-163599).
    "kimi_k25": "kimi_k2",
    "kimi_k26": "kimi_k2",
    # MiniMax M2.5: vllm-mlx's MiniMax-M2 parser reported working on MiniMax-M2.5; the
    # M2 line keeps `<minimax:tool_call>`/`<invoke>` (M2.7: same family, no recipe of
    # its own found).
    "minimax_m25": "minimax_m2",
    "minimax_m27": "minimax_m2",
    # Qwen3.5 and Qwen3.6 emit Qwen3-Coder's XML calls (`<tool_call><function=...>
    # <parameter=...>`), as ROCm/ATOM's Qwen3.5/3.6 tool-call support states. vLLM 0.33
    # registers no parser of their own: its registry (vllm/tool_parsers/__init__.py:206,
    # :217) maps `qwen3_coder` and `qwen3_xml` to the one Qwen3EngineToolParser
    # (qwen3_engine_tool_parser.py:7, structural tag "qwen_3_coder"), whose single
    # grammar (vllm/parser/qwen3.py) also ends reasoning at a `<tool_call>` opened
    # before `</think>` (:199), the habit SGLang's Qwen3 reasoning detector names for
    # Qwen3.5 (sglang/srt/parser/reasoning_parser.py:477): `qwen3_coder`'s
    # `calls_in_reasoning`. The same wire form, so an alias.
    "qwen35": "qwen3_coder",
    "qwen36": "qwen3_coder",
    "qwen3_xml": "qwen3_coder",
    # Nemotron 3 (Nano, Super): vllm/parser/nemotron_v3.py "uses the same tool call and
    # reasoning format as Qwen3 (<think> + <tool_call> XML)", i.e. qwen3_coder here.
    "nemotron3": "qwen3_coder",
    "nemotron_v3": "qwen3_coder",
    # MiMo: vllm/parser/mimo.py reuses the Qwen3 XML grammar (`<function=`/`<parameter=`);
    # MiMo-V2.5 cards serve it with `--tool-call-parser qwen3_xml`. (vLLM keeps MiMo's
    # values as verbatim strings; toolwire types them by the schema.)
    "mimo": "qwen3_coder",
    # Step-3.5/3.7: vllm/parser/step3p5.py "use the Qwen3 XML tool-call grammar and
    # <think> reasoning unchanged" (the template prefills `<think>`: in_reasoning);
    # SGLang's `step3p5` is its Qwen3CoderDetector.
    "step3p5": "qwen3_coder",
    # Hermes 4: `<tool_call>` JSON calls like Hermes 2/3, plus `<think>` reasoning (its
    # hybrid-reasoning model card): that is `qwen3` here (hermes calls + `<think>`),
    # which reads outputs without reasoning exactly as `hermes` does.
    "hermes4": "qwen3",
    # Qwen2.5: Qwen's own answer (QwenLM/Qwen3 discussion 1098) is `--tool-call-parser
    # hermes`; SGLang's `qwen25` and `qwen` are its Qwen2.5 detector, the same calls.
    "qwen25": "hermes",
    "qwen": "hermes",
    # Peer parser names for the same formats.
    "deepseek_r1": "deepseek_v3",  # vLLM's reasoning parser for R1, whose calls are V3's
    "minimax_m2_append_think": "minimax_m2",  # vLLM's other M2 reasoning parser
    "openai": "gpt_oss",  # vLLM's gpt-oss tool parser
    "openai_gptoss": "gpt_oss",  # vLLM's gpt-oss reasoning parser
    "llama3": "llama3_json",  # SGLang's Llama 3.2 detector (JSON calls)
    "llama4_json": "llama3_json",  # vLLM: the same Llama3JsonToolParser class
    # Command A (cmd3) and Command A Reasoning (cmd4): vLLM's and SGLang's parser names
    # for the same `<|START_ACTION|>` lists.
    "cohere_command3": "command",
    "cohere_command4": "command",
    "command_a": "command",
    "hunyuan_a13b": "hunyuan",  # vLLM's Hunyuan A13B parser: `<tool_calls>` lists
    "lfm25": "lfm2",  # LFM2.5: the same tokens (its bare lists are `pythonic`)
}
