"""Per-format facts the conformance run needs, and how each peer's server drives its parser.

A `Profile` names a format's tokenizer, chat template, thinking switch and stop tokens;
a `PeerSpec` names the parsers a peer's server is started with for that format and the
`skip_special_tokens` its server sets on a request with tools (`tool_choice` "auto").
A format registered in `toolwire.formats` but missing here is still checked for
toolwire when its tokenizer can be guessed (a folder of the same name); peers only
run formats listed with their parser names.

How the peers are driven, per request (`worker.py` does it; each step follows the
server's code at the file:line given in `VLLM_DRIVING` / `SGLANG_DRIVING`, paths
relative to the peers' site-packages; `tests/test_check.py` checks every citation
against the installed package):

* the request carries the case's tools, its `tool_choice` and its
  `chat_template_kwargs` (the thinking switch as the case's request sets it);
* the prompt is the chat template rendered for that request, and its ids are passed
  where the server passes them (vLLM: every streaming step and the non-streaming
  parser; SGLang's parsers take no prompt ids);
* `skip_special_tokens` is what the server leaves on that request (vLLM: the parser's
  own `adjust_request`; SGLang: `_process_messages`), and each delta is detokenized
  incrementally with it;
* the reasoning parser runs when the server is started with one; whether output
  starts inside reasoning is the parser's own decision from the request (vLLM: from
  `chat_template_kwargs` and the prompt ids; SGLang: `_get_reasoning_from_request`
  with the template's switch as its template manager detects it);
* generation ends at a stop token: no case continues past one (`cases.check_stops`),
  and a final stop token's text is trimmed as the server's detokenizer trims it.

Tokenizer sources: a folder (or file) under `<data>/tokenizers/` holding a real
vocabulary, or `derived:<family>` for families whose vocabulary is not available
offline (Qwen3's real byte-level BPE vocabulary with the family's own special tokens;
see `vocab.py`). Stop tokens are each model's `generation_config.json`
`eos_token_id` list (as token text), which is what both servers stop on.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolwire.check.setup import Setup

__all__ = [
    "PROFILES",
    "SGLANG_DRIVING",
    "VLLM_DRIVING",
    "Cite",
    "PeerSpec",
    "Profile",
    "profile",
]


@dataclass(frozen=True)
class Cite:
    """A line of a peer's installed code: `path` under site-packages, 1-based `line`,
    and `text` that line contains (checked by the tests against the installed package)."""

    path: str
    line: int
    text: str
    #: What the check does because of it.
    why: str = ""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class PeerSpec:
    """How a peer's server parses this format."""

    #: Tool parser (vLLM `--tool-call-parser`, SGLang `--tool-call-parser`).
    tool: str
    #: Reasoning parser (`--reasoning-parser`), or None when the format has none.
    reasoning: str | None = None
    #: vLLM only: the harmony path (gpt-oss).
    harmony: bool = False
    #: `skip_special_tokens` the server leaves on a request with tools and
    #: `tool_choice` "auto" (the worker reads it from the peer's code per request;
    #: the tests check that it equals this).
    skip_special_tokens: bool = False
    #: Where that value comes from in the peer's code.
    skip_cite: Cite | None = None


@dataclass(frozen=True)
class Profile(Setup):
    """A format's setup (its tokenizer: a folder or file under `<data>/tokenizers/`, or
    `derived:<family>`; chat template, thinking switch, stop tokens) and its peers."""

    vllm: PeerSpec | None = None
    sglang: PeerSpec | None = None


_VLLM = "vllm/entrypoints/openai/chat_completion"
_SGL = "sglang/srt/entrypoints/openai/serving_chat.py"

#: The steps of vLLM's server that the worker follows (see the module docstring).
VLLM_DRIVING: tuple[Cite, ...] = (
    Cite("vllm/tokenizers/hf.py", 226, "return get_cached_tokenizer(tokenizer)",
         "the tokenizer the parsers get is get_cached_tokenizer's wrapper"),
    Cite(f"{_VLLM}/serving.py", 166, "self.parser_cls = ParserManager.get_parser",
         "one parser class from the tool and reasoning parser names"),
    Cite(f"{_VLLM}/serving.py", 220, "chat_template_kwargs=chat_template_kwargs,",
         "a parser per request, built with the request's chat_template_kwargs"),
    Cite("vllm/renderers/online_renderer.py", 850, "should_adjust_request = (",
         "adjust_request runs unless tool_choice is none (and no reasoning parser)"),
    Cite("vllm/renderers/online_renderer.py", 874,
         "request_parser.set_prompt_token_ids(prompt_token_ids)",
         "the prompt ids are given before adjust_request"),
    Cite("vllm/renderers/online_renderer.py", 875,
         "request = request_parser.adjust_request(request=request)",
         "the parser sets skip_special_tokens on the request"),
    Cite(f"{_VLLM}/protocol.py", 726, '"skip_special_tokens", True',
         "skip_special_tokens defaults to True"),
    Cite(f"{_VLLM}/serving.py", 712, "delta_message, finish_reason = processor.step(",
         "streaming: ChatStreamProcessor.step per engine delta"),
    Cite(f"{_VLLM}/serving.py", 716, "res.prompt_token_ids,",
         "streaming: the prompt ids at every step"),
    Cite(f"{_VLLM}/serving.py", 997,
         "parser.set_prompt_token_ids(final_res.prompt_token_ids)",
         "non-streaming: the prompt ids before parse"),
    Cite(f"{_VLLM}/serving.py", 1015, "reasoning, content, tool_calls = parser.parse(",
         "non-streaming: parser.parse on the whole text and ids"),
    Cite(f"{_VLLM}/serving.py", 1031, "fields = assemble_chat_message_fields(",
         "non-streaming: the message fields as the server assembles them"),
    Cite("vllm/v1/engine/detokenizer.py", 107,
         "if stop_terminated and not self.include_stop_str_in_output:",
         "a final stop token's text is not detokenized (its id is still passed)"),
)  # fmt: skip

#: The steps of SGLang's server that the worker follows.
SGLANG_DRIVING: tuple[Cite, ...] = (
    Cite(_SGL, 1822, "if self.is_gpt_oss or self.is_gemma4:",
         "gpt-oss and Gemma 4 requests keep special tokens"),
    Cite(_SGL, 1861, 'if effective_tools and request.tool_choice != "none":',
         "a request with tools keeps special tokens (the next line sets it)"),
    Cite("sglang/srt/entrypoints/openai/protocol.py", 1014, "skip_special_tokens: bool = True",
         "skip_special_tokens defaults to True"),
    Cite("sglang/srt/parser/template_manager.py", 138,
         "self._force_reasoning, self._reasoning_config = detect_reasoning_pattern(",
         "the template's thinking switch, detected from the chat template"),
    Cite(_SGL, 3518, "def _get_reasoning_from_request",
         "whether output starts in reasoning, per request"),
    Cite(_SGL, 1092, 'return request.tool_choice != "none"',
         "tool_choice none: the tool parser does not run"),
    Cite(_SGL, 975, "reasoning_text, delta = self._process_reasoning_stream(",
         "streaming: the reasoning parser first, per delta"),
    Cite(_SGL, 1008, "async for chunk in self._process_tool_call_stream(",
         "streaming: then the tool-call parser, flushed on the last delta"),
    Cite(_SGL, 1025, "remaining_chunk = self._check_for_unstreamed_tool_args(",
         "streaming: the server's top-up of arguments not yet streamed"),
    Cite(_SGL, 2931, "force_reasoning = (",
         "non-streaming: the reasoning parser with the request's force_reasoning"),
    Cite(_SGL, 2962, "tool_calls, text, finish_reason = self._process_tool_calls(",
         "non-streaming: the server's tool-call step"),
    Cite("sglang/srt/managers/detokenizer_manager.py", 225, "return output[:-1]",
         "a final stop token's ids are trimmed before detokenizing ..."),
    Cite("sglang/srt/managers/detokenizer_manager.py", 221,
         "if output[-1] in self.tool_close_token_ids:",
         "... unless it closes a tool call (gpt-oss <|call|> too, line 219)"),
)  # fmt: skip

# -- where each parser's skip_special_tokens comes from ---------------------------------

_V_DEFAULT = VLLM_DRIVING[6]
_V_HERMES = Cite("vllm/tool_parsers/hermes_tool_parser.py", 67,
                 "request.skip_special_tokens = False", "hermes adjust_request")  # fmt: skip
_V_ENGINE = Cite(
    "vllm/parser/engine/parser_engine.py",
    272,
    "request.skip_special_tokens = False",
    "engine parsers' adjust_request",
)
_V_MINICPM5 = Cite("vllm/tool_parsers/minicpm5xml_tool_parser.py", 490,
                   "request.skip_special_tokens = False", "minicpm5 adjust_request")  # fmt: skip
_V_GRANITE4 = Cite("vllm/tool_parsers/granite4_tool_parser.py", 71,
                   "request.skip_special_tokens = False", "granite4 adjust_request")  # fmt: skip
_V_LFM2 = Cite("vllm/tool_parsers/lfm2_tool_parser.py", 91,
               "request.skip_special_tokens = False", "lfm2 adjust_request")  # fmt: skip
_V_FUNCTIONGEMMA = Cite("vllm/tool_parsers/functiongemma_tool_parser.py", 82,
                        "request.skip_special_tokens = False",
                        "functiongemma adjust_request")  # fmt: skip
_V_APERTUS = Cite("vllm/tool_parsers/apertus_tool_parser.py", 131,
                  "request.skip_special_tokens = False", "apertus adjust_request")  # fmt: skip
_V_JAMBA = Cite("vllm/tool_parsers/jamba_tool_parser.py", 80,
                "request.skip_special_tokens = False", "jamba adjust_request")  # fmt: skip
_V_K3 = Cite(
    "vllm/tool_parsers/kimi_k3_tool_parser.py",
    202,
    "request.skip_special_tokens = False",
    "Kimi K3's adjust_request (its markers must reach the parser as text)",
)
_S_TOOLS = SGLANG_DRIVING[1]
_S_OSS = SGLANG_DRIVING[0]


def _v(tool: str, reasoning: str | None = None, *, skip: bool = True,
       cite: Cite | None = None, harmony: bool = False) -> PeerSpec:  # fmt: skip
    return PeerSpec(tool, reasoning, harmony, skip, cite or (_V_DEFAULT if skip else _V_ENGINE))


def _s(tool: str, reasoning: str | None = None, cite: Cite = _S_TOOLS) -> PeerSpec:
    return PeerSpec(tool, reasoning, False, False, cite)


_QWEN = ("<|im_end|>", "<|endoftext|>")  # Qwen3 generation_config: [151645, 151643]
_DEEPSEEK = ("<｜end▁of▁sentence｜>",)
_GLM = ("<|endoftext|>", "<|user|>", "<|observation|>")  # GLM-4.5/4.7: 151329/36/38
_LLAMA3 = ("<|end_of_text|>", "<|eom_id|>", "<|eot_id|>")  # Llama 3.1/3.2: 128001/8/9

PROFILES: dict[str, Profile] = {
    "hermes": Profile(
        "qwen3", "qwen3/Qwen-Qwen2.5-7B-Instruct.jinja", None, _QWEN,
        _v("hermes", skip=False, cite=_V_HERMES), _s("qwen25"),
    ),
    "qwen3": Profile(
        "qwen3", "qwen3/Qwen-Qwen3-0.6B.jinja", "enable_thinking", _QWEN,
        _v("hermes", "qwen3", skip=False, cite=_V_HERMES), _s("qwen25", "qwen3"),
    ),
    "qwen3_coder": Profile(
        "qwen3", "qwen3/Qwen3-Coder.jinja", None, _QWEN,
        _v("qwen3_coder", "qwen3", skip=False), _s("qwen3_coder", "qwen3"),
    ),
    "deepseek_v3": Profile(
        "deepseek_v3", None, None, _DEEPSEEK, _v("deepseek_v3"), _s("deepseekv3"),
    ),
    # V3.1's vocabulary with <think> ids: DeepSeek V4's (the V3 vocabulary lacks them).
    "deepseek_v31": Profile(
        "deepseek_v4", "deepseek_v3/deepseek-ai-DeepSeek-V3.1.jinja", "thinking", _DEEPSEEK,
        _v("deepseek_v31", "deepseek_v3"), _s("deepseekv31", "deepseek-v3"),
    ),
    "deepseek_v32": Profile(
        "deepseek_v4", "deepseek_v3/deepseek-ai-DeepSeek-V3.2.jinja", "thinking", _DEEPSEEK,
        _v("deepseek_v32", "deepseek_v3", skip=False), _s("deepseekv32", "deepseek-v3"),
    ),
    "deepseek_v4": Profile(
        "deepseek_v4", None, "thinking", _DEEPSEEK,
        _v("deepseek_v4", "deepseek_v4", skip=False), _s("deepseekv4", "deepseek-v4"),
    ),
    # DeepSeek V4.1: V4's vocabulary (the `｜DSML｜` token; no V4.1 folder offline).
    "deepseek_v41": Profile(
        "deepseek_v4", None, "thinking", _DEEPSEEK,
        _v("deepseek_v41", "deepseek_v41", skip=False), _s("deepseekv41", "deepseek-v4"),
    ),
    "kimi_k2": Profile(
        "derived:kimi_k2", "kimi_k2/Kimi-K2-Thinking.jinja", None, ("<|im_end|>", "[EOS]"),
        _v("kimi_k2", "kimi_k2", skip=False), _s("kimi_k2", "kimi_k2"),
    ),
    "glm45": Profile(
        "derived:glm", "glm/GLM-4.6.jinja", "enable_thinking", _GLM,
        _v("glm45", "glm45", skip=False), _s("glm45", "glm45"),
    ),
    "glm47": Profile(
        "derived:glm", "glm/GLM-4.7-Flash.jinja", "enable_thinking", _GLM,
        _v("glm47", "glm45", skip=False), _s("glm47", "glm45"),
    ),
    "minimax_m2": Profile(
        "derived:minimax_m2", "minimax_m2/MiniMax-M2.jinja", None, ("[e~[",),
        _v("minimax_m2", "minimax_m2", skip=False), _s("minimax-m2", "minimax"),
    ),
    "gemma4": Profile(
        "derived:gemma4", "gemma4/google-gemma-4-31B-it.jinja", "enable_thinking",
        ("<eos>", "<turn|>"),
        _v("gemma4", "gemma4", skip=False), _s("gemma4", "gemma4", _S_OSS),
    ),
    # Kimi K3 and Inkling: no chat template here (K3's tokenizer renders prompts in
    # Python), so no prompt ids; stop tokens as the peers' parsers name them. vLLM's
    # K3 reasoning parser reads the `thinking` switch from chat_template_kwargs.
    "kimi_k3": Profile(
        "derived:kimi_k3", None, "thinking", ("<|end_of_msg|>", "[EOS]"),
        _v("kimi_k3", "kimi_k3", skip=False, cite=_V_K3), _s("kimi_k3", "kimi_k3"),
    ),
    "inkling": Profile(
        "derived:inkling", None, None, ("<|content_model_end_sampling|>",),
        _v("inkling", "inkling", skip=False), _s("inkling", "inkling"),
    ),
    # MiniMax M3: its parser keeps vLLM's default skip_special_tokens (the namespace
    # token is not special); stop token as M2's. vLLM's switch is
    # `thinking_mode="enabled"`, not a boolean: no switch is sent.
    "minimax_m3": Profile(
        "derived:minimax_m3", None, None, ("[e~[",),
        _v("minimax_m3", "minimax_m3"), _s("minimax-m3", "minimax-m3"),
    ),
    # gpt-oss generation_config: <|return|> 200002, <|endoftext|> 199999, <|call|> 200012.
    "gpt_oss": Profile(
        "gpt_oss", "gpt_oss/openai-gpt-oss-120b.jinja", None,
        ("<|return|>", "<|endoftext|>", "<|call|>"),
        _v("openai", "openai_gptoss", harmony=True), _s("gpt-oss", "gpt-oss", _S_OSS),
    ),
    "llama3_json": Profile(
        "llama3", "llama3/meta-llama-Llama-3.1-8B-Instruct.jinja", None,
        _LLAMA3, _v("llama3_json"), _s("llama3"),
    ),
    "pythonic": Profile(
        "llama3", "llama3/meta-llama-Llama-3.2-3B-Instruct.jinja", None,
        _LLAMA3, _v("pythonic"), _s("pythonic"),
    ),
    # Granite 4.0 generation_config: <|end_of_text|> 100257. SGLang has no Granite 4 parser.
    "granite4": Profile(
        "derived:granite4", None, None, ("<|end_of_text|>",),
        _v("granite4", skip=False, cite=_V_GRANITE4),
    ),
    # Seed-OSS generation_config: <seed:eos>. vLLM: the engine parsers (Qwen3's, renamed).
    "seed_oss": Profile(
        "derived:seed_oss", None, None, ("<seed:eos>",), _v("seed_oss", "seed_oss", skip=False),
    ),
    # LFM2 generation_config: <|im_end|> 7.
    "lfm2": Profile(
        "derived:lfm2", None, None, ("<|im_end|>",),
        _v("lfm2", skip=False, cite=_V_LFM2), _s("lfm2"),
    ),
    # Command A: <|END_OF_TURN_TOKEN|>. vLLM's parser needs the cohere-melody package,
    # which its venv lacks: SGLang's cohere_command4 detectors only.
    "command": Profile(
        "derived:command", None, None, ("<|END_OF_TURN_TOKEN|>",), None,
        _s("cohere_command4", "cohere_command4"),
    ),
    # Granite 3 generation_config: <|end_of_text|> 0. SGLang has no Granite 3 parser.
    "granite": Profile(
        "derived:granite", None, None, ("<|end_of_text|>",), _v("granite", skip=False),
    ),
    # Granite 3.1's text opener: vLLM's `granite` parser reads it too.
    "granite31": Profile(
        "derived:granite", None, None, ("<|end_of_text|>",), _v("granite", skip=False),
    ),
    # Hunyuan A13B: <|eos|>. SGLang's `hunyuan` detector reads Hy3's XML calls instead.
    "hunyuan": Profile(
        "derived:hunyuan", None, None, ("<|eos|>",), _v("hunyuan_a13b", "hunyuan_a13b"),
    ),
    # Llama 4: <|eot|> and <|eom|> end a turn.
    "llama4": Profile(
        "derived:llama4", None, None, ("<|eot|>", "<|eom|>"), _v("llama4_pythonic"),
        _s("pythonic"),
    ),
    # Nemotron Nano v2: no vLLM or SGLang parser in the pinned builds.
    "nemotron": Profile("derived:nemotron", None, None, ("<|end|>",)),
    # FunctionGemma: <end_of_turn>, and <start_function_response>, which its template
    # writes after the calls (its documentation: an additional stop sequence). vLLM's
    # parser keeps special tokens (adjust_request); SGLang has no FunctionGemma parser.
    "functiongemma": Profile(
        "derived:functiongemma", None, None, ("<end_of_turn>", "<start_function_response>"),
        _v("functiongemma", skip=False, cite=_V_FUNCTIONGEMMA),
    ),
    # Apertus: <|assistant_end|> (a stand-in: no Apertus generation config offline).
    "apertus": Profile(
        "derived:apertus", None, None, ("<|assistant_end|>",),
        _v("apertus", skip=False, cite=_V_APERTUS), _s("apertus2509", "apertus2509"),
    ),
    # Jamba: <|end|> (a stand-in: no Jamba generation config offline). SGLang has no
    # Jamba detector.
    "jamba": Profile(
        "derived:jamba", None, None, ("<|end|>",), _v("jamba", skip=False, cite=_V_JAMBA),
    ),
    # GigaChat 3 / 3.1: </s> ends the turn; vLLM's and SGLang's `gigachat3` parsers
    # read both versions' calls (vLLM keeps special tokens when tools are given).
    "gigachat3": Profile(
        "derived:gigachat3", None, None, ("</s>",), _v("gigachat3", skip=False),
        _s("gigachat3"),
    ),
    "gigachat31": Profile(
        "derived:gigachat3", None, None, ("</s>",), _v("gigachat3", skip=False),
        _s("gigachat3"),
    ),
    # GigaChat 3.5: SGLang's `gigachat35` detector; vLLM 0.33 has no parser for it.
    "gigachat35": Profile("derived:gigachat35", None, None, ("</s>",), None, _s("gigachat35")),
    # InternLM 2 / Intern-S1: <|im_end|> ends the turn; vLLM's `internlm` parser (it
    # keeps special tokens when tools are given) and SGLang's `interns1` detector, without
    # a reasoning parser (InternLM 2 writes none; SGLang's `interns1` one starts inside).
    "internlm": Profile(
        "derived:internlm", None, None, ("<|im_end|>",), _v("internlm", skip=False),
        _s("interns1"),
    ),
    # Step3: <|EOT|> ends the turn (not checked: no Step3 generation config offline);
    # vLLM's `step3` tool and reasoning parsers (special tokens kept with tools) and
    # SGLang's `step3` detector.
    "step3": Profile(
        "derived:step3", None, None, ("<|EOT|>",), _v("step3", "step3", skip=False),
        _s("step3"),
    ),
    # LongCat-Flash: </longcat_s> ends the turn (not checked); vLLM's `longcat` parser
    # (Hermes' with LongCat's tags, its adjust_request too); SGLang has none.
    "longcat": Profile(
        "derived:longcat", None, None, ("</longcat_s>",),
        _v("longcat", skip=False, cite=_V_HERMES),
    ),
    # Phi-4-mini: text-gated, on Llama 3's vocabulary (no Phi vocabulary offline).
    "phi4_mini": Profile(
        "llama3", None, None, _LLAMA3, _v("phi4_mini_json"),
    ),
    # ERNIE 4.5: its end token, as the derived vocabulary spells it. SGLang has no
    # ERNIE parser.
    "ernie45": Profile(
        "derived:ernie45", None, None, ("<|end_of_sentence|>",), _v("ernie45", "ernie45"),
    ),
    # OLMo 3 Instruct: ChatML's ends (no OLMo generation config offline). SGLang has no
    # OLMo parser.
    "olmo3": Profile(
        "derived:olmo3", None, None, ("<|im_end|>", "<|endoftext|>"), _v("olmo3"),
    ),
    # MiniCPM: ChatML's ends (no MiniCPM generation config offline).
    "minicpm5": Profile(
        "derived:minicpm5", None, None, ("<|im_end|>", "<|endoftext|>"),
        _v("minicpm5", skip=False, cite=_V_MINICPM5), _s("minicpm5"),
    ),
    # xLAM-2-8b-fc-r: text-gated, on Llama 3's vocabulary (its base model's). SGLang
    # has no xLAM detector.
    "xlam": Profile("llama3", None, None, _LLAMA3, _v("xlam")),
    # Hunyuan V3 / V4: A13B's <|eos|> (no Hy3/Hy4 generation config offline).
    "hy_v3": Profile(
        "derived:hy_v3", None, None, ("<|eos|>",), _v("hy_v3", "hy_v3"), _s("hunyuan"),
    ),
    "hy_v4": Profile(
        "derived:hy_v4", None, None, ("<|eos|>",), _v("hy_v4", "hy_v4"), _s("hunyuan"),
    ),
    "mistral": Profile(
        "mistral/tekken_240718.json.gz", None, None, ("</s>",), _v("mistral"), _s("mistral"),
    ),
}  # fmt: skip


def profile(fmt: str) -> Profile:
    """The profile of `fmt`; a format without one is tested with a same-named folder."""
    return PROFILES.get(fmt) or Profile(fmt)
