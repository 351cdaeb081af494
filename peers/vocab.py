"""Tokenizers for the conformance run: real folders, or derived ones.

`tokenizer_for(source, data)` loads `<data>/tokenizers/<source>` with
`toolwire.load_tokenizer`. `derived:<family>` builds a tokenizer for a family whose
vocabulary is not available offline (Kimi K2, GLM, MiniMax M2, Gemma 4): Qwen3's real
byte-level BPE vocabulary with Qwen's added tokens replaced by the family's special
tokens (Kimi keeps its real ids from its `tokenizer_config.json`, the gap filled with
reserved tokens).

A derived vocabulary is built once per content and reused::

    recipe (family tokens, config, template) + sha256(qwen3 tokenizer.json.gz)
        -> key (sha256)
        -> <cache>/vocab/<family>-<key>/   written to a temporary folder beside it and
                                           renamed into place: concurrent processes
                                           each build or find a complete folder, never
                                           a half-written one; the loser removes its copy
        -> toolwire.load_tokenizer (the ordinary path)

`<cache>` is `$TOOLWIRE_CACHE`, else `$XDG_CACHE_HOME/toolwire`, else
`~/.cache/toolwire`; any entry may be deleted at any time (it is rebuilt). The
plain `tokenizer.json` files of `tokenizer_file` are cached the same way, keyed by
their text. Loaded tokenizers are cached per (source, resolved data folder) in this
process: one per vocabulary.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from toolwire.errors import UsageError
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = ["DERIVED", "NOT_SPECIAL", "cache_dir", "tokenizer_file", "tokenizer_for"]

#: family -> (special tokens in id order, eos token, chat template file or "" for none
#: available offline)
DERIVED: dict[str, tuple[list[str], str, str]] = {
    "glm": (
        [
            "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>",
            "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>",
            "<think>", "</think>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>",
            "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
        ],
        "<|endoftext|>",
        "GLM-4.7-Flash.jinja",
    ),
    "minimax_m2": (
        ["]~!b[", "]~b]", "[e~[", "<minimax:tool_call>", "</minimax:tool_call>",
         "<think>", "</think>"],
        "[e~[",
        "MiniMax-M2.jinja",
    ),
    "gemma4": (
        [
            "<pad>", "<eos>", "<bos>", "<|turn>", "<turn|>", "<|tool_call>", "<tool_call|>",
            '<|"|>', "<|channel>", "<channel|>", "<|tool>", "<tool|>",
            "<|tool_response>", "<tool_response|>", "<|think|>",
            "<|image|>", "<|audio|>", "<|video|>",
        ],
        "<turn|>",
        "google-gemma-4-31B-it.jinja",
    ),
    # FunctionGemma: Gemma 3's turn tokens and the six function tokens plus `<escape>`
    # its documentation names (special: vLLM keeps special tokens for its parser); no
    # FunctionGemma vocabulary or template is available offline.
    "functiongemma": (
        [
            "<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
            "<start_function_declaration>", "<end_function_declaration>",
            "<start_function_call>", "<end_function_call>",
            "<start_function_response>", "<end_function_response>", "<escape>",
        ],
        "<end_of_turn>",
        "",
    ),
    # Apertus: the reasoning and call tokens its peers' parsers name, with
    # `<|assistant_end|>` standing for its end-of-turn token (no Apertus vocabulary or
    # template is available offline, so the rest of its added tokens are not checked).
    "apertus": (
        ["<|assistant_end|>", "<|inner_prefix|>", "<|inner_suffix|>", "<|tools_prefix|>",
         "<|tools_suffix|>"],
        "<|assistant_end|>",
        "",
    ),
    # Jamba: the call tags as special tokens (vLLM's parser keeps special tokens for
    # them), with `<|end|>` standing for its end-of-turn token (no Jamba vocabulary or
    # template is available offline, so the rest of its added tokens are not checked).
    "jamba": (["<|end|>", "<tool_calls>", "</tool_calls>"], "<|end|>", ""),
    # Granite 4.0: its tokenizer.json's added tokens 100256-100283, in order.
    "granite4": (
        [
            "<|pad|>", "<|end_of_text|>", "<|fim_prefix|>", "<|fim_middle|>",
            "<|fim_suffix|>", "<|fim_pad|>", "<|filename|>", "<|reponame|>",
            "<|start_of_role|>", "<|end_of_role|>", "<|unused_1|>", "<|start_of_plugin|>",
            "<|end_of_plugin|>", "<|unk|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>", "<think_on>",
            "<think_off>", "<schema>", "</schema>", "<tools>", "</tools>", "<documents>",
            "</documents>",
        ],
        "<|end_of_text|>",
        "",
    ),
    # Seed-OSS: the tokens its chat template names (bos, eos, pad, then the
    # think, budget and tool-call pairs).
    "seed_oss": (
        [
            "<seed:bos>", "<seed:pad>", "<seed:eos>", "<seed:think>", "</seed:think>",
            "<seed:cot_budget_reflect>", "</seed:cot_budget_reflect>", "<seed:tool_call>",
            "</seed:tool_call>",
        ],
        "<seed:eos>",
        "",
    ),
    # LFM2: ids 0-13 of its vocabulary, then LFM2.5's <think> pair (64400-64401).
    "lfm2": (
        [
            "<|pad|>", "<|startoftext|>", "<|endoftext|>", "<|fim_pre|>", "<|fim_mid|>",
            "<|fim_suf|>", "<|im_start|>", "<|im_end|>", "<|tool_list_start|>",
            "<|tool_list_end|>", "<|tool_call_start|>", "<|tool_call_end|>",
            "<|tool_response_start|>", "<|tool_response_end|>", "<think>", "</think>",
        ],
        "<|im_end|>",
        "",
    ),
    # Command A: its special tokens (turn, role, thinking, response/text, action and
    # tool-result markers).
    "command": (
        [
            "<PAD>", "<UNK>", "<BOS_TOKEN>", "<EOS_TOKEN>", "<|START_OF_TURN_TOKEN|>",
            "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
            "<|SYSTEM_TOKEN|>", "<|START_THINKING|>", "<|END_THINKING|>",
            "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_ACTION|>", "<|END_ACTION|>",
            "<|START_TOOL_RESULT|>", "<|END_TOOL_RESULT|>", "<|START_TEXT|>", "<|END_TEXT|>",
        ],
        "<|END_OF_TURN_TOKEN|>",
        "",
    ),
    # Granite 3.3: <|end_of_text|> and its role, tool-call, citation and plugin markers.
    "granite": (
        [
            "<|end_of_text|>", "<|start_of_role|>", "<|end_of_role|>", "<|tool_call|>",
            "<|start_of_cite|>", "<|end_of_cite|>", "<|start_of_plugin|>",
            "<|end_of_plugin|>",
        ],
        "<|end_of_text|>",
        "",
    ),
    # Hunyuan A13B: its turn markers and the think, answer and tool-call pairs.
    "hunyuan": (
        [
            "<|startoftext|>", "<|extra_0|>", "<|extra_4|>", "<|eos|>", "<think>",
            "</think>", "<answer>", "</answer>", "<tool_calls>", "</tool_calls>",
            "<tool_call>", "</tool_call>",
        ],
        "<|eos|>",
        "",
    ),
    # Hunyuan V3 / V4: A13B's turn markers (no Hy3/Hy4 vocabulary is available offline)
    # and the structural tokens SGLang's `hunyuan` detector resolves; Hy4 has no
    # `<tool_sep>` (the detector's note).
    "hy_v3": (
        [
            "<|startoftext|>", "<|eos|>", "<think>", "</think>", "<tool_calls>",
            "</tool_calls>", "<tool_call>", "</tool_call>", "<tool_sep>", "<arg_key>",
            "</arg_key>", "<arg_value>", "</arg_value>",
        ],
        "<|eos|>",
        "",
    ),
    "hy_v4": (
        [
            "<|startoftext|>", "<|eos|>", "<think>", "</think>", "<tool_calls>",
            "</tool_calls>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
            "<arg_value>", "</arg_value>",
        ],
        "<|eos|>",
        "",
    ),
    # Llama 4: the markers of its chat format (`<|header_start|>` roles, `<|eot|>`,
    # `<|eom|>`) and its call tokens; no Llama 4 vocabulary is available offline.
    "llama4": (
        [
            "<|begin_of_text|>", "<|end_of_text|>", "<|header_start|>", "<|header_end|>",
            "<|eom|>", "<|eot|>", "<|step|>", "<|python_start|>", "<|python_end|>",
            "<|finetune_right_pad|>",
        ],
        "<|eot|>",
        "",
    ),
    # Nemotron Nano v2: the `<think>` pair and the `<TOOLCALL>` tags as tokens, with
    # `<|end|>` standing for its end-of-turn token (no Nemotron vocabulary or template
    # is available offline, so which of these the real vocabulary holds is not checked).
    "nemotron": (
        ["<|end|>", "<think>", "</think>", "<TOOLCALL>", "</TOOLCALL>"],
        "<|end|>",
        "",
    ),
    # ERNIE 4.5: the six markers vLLM's ERNIE parsers look up by id and its turn
    # tokens, `<|end_of_sentence|>` standing for its end token `</s>` (a word of
    # Qwen's vocabulary); no ERNIE vocabulary or template is available offline, so which
    # of these the real vocabulary holds, and with which flags, is not checked.
    "ernie45": (
        ["<|begin_of_sentence|>", "<|end_of_sentence|>", "<think>", "</think>",
         "<response>", "</response>", "<tool_call>", "</tool_call>"],
        "<|end_of_sentence|>",
        "",
    ),
    # OLMo 3: ChatML's turn tokens, the `<functions>` tags its template writes the tools
    # in and the `<function_calls>` tags of its calls (no OLMo vocabulary or template is
    # available offline, so which of these the real vocabulary holds is not checked).
    "olmo3": (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<functions>", "</functions>",
         "<function_calls>", "</function_calls>"],
        "<|im_end|>",
        "",
    ),
    # MiniCPM: ChatML's turn tokens and the `<think>` pair (no MiniCPM vocabulary or
    # template is available offline); its call tags are text.
    "minicpm5": (
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"],
        "<|im_end|>",
        "",
    ),
    # GigaChat 3 / 3.1: the role and message separators, the 3.1 call token and the
    # SentencePiece ends (no GigaChat vocabulary or template is available offline, so
    # which of these the real vocabulary holds as special tokens is not checked).
    "gigachat3": (
        ["</s>", "<|message_sep|>", "<|role_sep|>", "<|function_call|>"],
        "</s>",
        "",
    ),
    # GigaChat 3.5: GigaChat 3's tokens and `｜GCML｜` taken as one token, as `｜DSML｜`
    # is DeepSeek's (not checked: no GigaChat 3.5 vocabulary is available offline).
    "gigachat35": (
        ["</s>", "<|message_sep|>", "<|role_sep|>", "<|function_call|>", "｜GCML｜"],
        "</s>",
        "",
    ),
    # InternLM 2: its added tokens in their real order (92538-92543 in its
    # tokenizer_config.json), and Intern-S1's `<think>` pair (not checked: no InternLM
    # or Intern-S1 vocabulary is available offline).
    "internlm": (
        [
            "<|plugin|>", "<|interpreter|>", "<|action_end|>", "<|action_start|>",
            "<|im_end|>", "<|im_start|>", "<think>", "</think>",
        ],
        "<|im_end|>",
        "",
    ),
    # Step3: its turn markers, the `<think>` pair and the five tool-call markers the
    # peers' parsers name (no Step3 vocabulary or template is available offline, so
    # which of these the real vocabulary holds, and in what order, is not checked).
    "step3": (
        [
            "<|BOT|>", "<|EOT|>", "<think>", "</think>",
            "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
            "<｜tool_call_end｜>", "<｜tool_sep｜>",
        ],
        "<|EOT|>",
        "",
    ),
    # LongCat-Flash: its sentence markers and tool tags (not checked: no LongCat
    # vocabulary or template is available offline).
    "longcat": (
        [
            "<longcat_s>", "</longcat_s>", "<longcat_tool_call>", "</longcat_tool_call>",
            "<longcat_tool_response>", "</longcat_tool_response>",
        ],
        "</longcat_s>",
        "",
    ),
    # Kimi K3 ships no Jinja template (its tokenizer renders prompts in Python); the
    # turn tokens are the ones SGLang's K3 reasoning detector names.
    "kimi_k3": (
        ["[BOS]", "[EOS]", "[EOT]", "<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"],
        "<|end_of_msg|>",
        "",
    ),
    # MiniMax M3: its namespace token and `<mm:think>`/`</mm:think>` (added, not
    # special, as in the real vocabulary; vLLM's reasoning parser looks them up), the
    # media markers transformers' M3 processor names, and M2's turn tokens.
    "minimax_m3": (
        ["]~!b[", "]~b]", "[e~[", "]<]minimax[>[", "<mm:think>", "</mm:think>",
         "]<]image[>[", "]<]video[>["],
        "[e~[",
        "",
    ),
    # Inkling: the markers vLLM's `parser/inkling.py` lists (no template is available).
    "inkling": (
        [
            "<|message_model|>", "<|content_text|>", "<|content_thinking|>",
            "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>",
            "<|content_tool_error|>", "<|content_model_end_sampling|>", "<|end_message|>",
        ],
        "<|content_model_end_sampling|>",
        "",
    ),
}  # fmt: skip

#: family -> its added tokens that the real vocabulary marks `"special": false` (added
#: tokens all the same: single ids, which is what gating rests on).
NOT_SPECIAL: dict[str, frozenset[str]] = {
    "granite4": frozenset(
        {
            "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
            "<|filename|>", "<|reponame|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>",
        }
    ),
    "seed_oss": frozenset(
        {
            "<seed:think>", "</seed:think>", "<seed:cot_budget_reflect>",
            "</seed:cot_budget_reflect>", "<seed:tool_call>", "</seed:tool_call>",
        }
    ),
    "minimax_m3": frozenset({"]<]minimax[>[", "<mm:think>", "</mm:think>"}),
    # ERNIE 4.5: vLLM's tool parser reads `<tool_call>` and `</think>` in text decoded
    # with special tokens skipped, so they are taken as added, not special.
    "ernie45": frozenset({"<think>", "</think>", "<tool_call>", "</tool_call>"}),
    # OLMo 3: vLLM's parser reads the `<function_calls>` tags in text decoded with
    # special tokens skipped (were they special, it would never see a call).
    "olmo3": frozenset({"<functions>", "</functions>", "<function_calls>", "</function_calls>"}),
}  # fmt: skip

_BASE_VOCAB = 151643  # Qwen3's BPE vocabulary; its first added token is <|endoftext|>


def _token(content: str, special: bool = True) -> dict[str, Any]:
    return {
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": special,
    }


def _family_tokens(family: str, data: Path) -> tuple[dict[int, str], dict[str, Any], str]:
    """Ids -> token text, extra tokenizer_config keys, and the template file name."""
    if family == "kimi_k2":
        config = json.loads((data / "tokenizers/kimi_k2/tokenizer_config.json").read_text())
        tokens = {int(k): v["content"] for k, v in config["added_tokens_decoder"].items()}
        extra = {k: config[k] for k in ("bos_token", "eos_token") if k in config}
        return tokens, extra, "Kimi-K2-Thinking.jinja"
    if family not in DERIVED:
        raise UsageError(f"no derived tokenizer recipe for {family!r}")
    names, eos, template = DERIVED[family]
    return {_BASE_VOCAB + 1 + n: t for n, t in enumerate(names)}, {"eos_token": eos}, template


#: Bump when `_derive` writes something different from the same inputs.
_RECIPE = 1
#: A temporary folder older than this (seconds) was abandoned.
_STALE = 3600


def cache_dir() -> Path:
    """Where built vocabularies are kept (`$TOOLWIRE_CACHE`, else the user's cache)."""
    explicit = os.environ.get("TOOLWIRE_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "toolwire"


def _digest(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little") + part)
    return h.hexdigest()[:24]


def _cached(name: str, write: Callable[[Path], None]) -> Path:
    """`<cache>/vocab/<name>`, written by `write` into a fresh folder the first time.

    The folder is complete or absent: `write` fills a temporary folder beside it,
    which is renamed into place; when another process renamed its own first, that one
    is kept and this copy removed.
    """
    root = cache_dir() / "vocab"
    final = root / name
    if final.is_dir():
        return final
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f".{name}-*"):  # left by a process killed while writing
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > _STALE:
                shutil.rmtree(stale)
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        building.chmod(0o755)  # an ordinary folder once in place (mkdtemp's is private)
        write(building)
        try:
            building.rename(final)
        except OSError:  # another process put it there first
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def _derive(family: str, data: Path) -> Path:
    """The derived model folder for `family` (built on first use, then reused)."""
    tokens, extra, template = _family_tokens(family, data)
    base = data / "tokenizers/qwen3/tokenizer.json.gz"
    table: dict[int, str] = {_BASE_VOCAB: "<|endoftext|>", **tokens}
    plain = NOT_SPECIAL.get(family, frozenset())
    added = [
        {"id": i, **_token(text, text not in plain)}
        for i in range(_BASE_VOCAB, max(table) + 1)
        for text in [table.get(i, f"<|reserved_{i}|>")]
    ]
    config: dict[str, Any] = {
        "added_tokens_decoder": {
            str(i): _token(t, t not in plain) for i, t in sorted(tokens.items())
        },
        **extra,
    }
    template_path = data / "tokenizers" / family / template
    if template and template_path.is_file():
        config["chat_template"] = template_path.read_text(encoding="utf-8")
    key = _digest(
        str(_RECIPE).encode(),
        base.read_bytes(),
        json.dumps(added, sort_keys=True).encode(),
        json.dumps(config, sort_keys=True).encode(),
    )

    def write(folder: Path) -> None:
        with gzip.open(base, "rt", encoding="utf-8") as fh:
            vocab = json.load(fh)
        vocab["added_tokens"] = added
        (folder / "tokenizer.json").write_text(json.dumps(vocab), encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")

    return _cached(f"{family}-{key}", write)


def tokenizer_for(source: str, data: Path) -> Tokenizer:
    """The tokenizer named by a profile's `tokenizer` field, under `data`."""
    return _tokenizer(source, _resolved(data))


@cache
def _resolved(data: Path) -> Path:
    return data.resolve()


@cache
def _tokenizer(source: str, data: Path) -> Tokenizer:
    if source.startswith("derived:"):
        return load_tokenizer(_derive(source.split(":", 1)[1], data))
    path = data / "tokenizers" / source
    if not path.exists():
        raise UsageError(f"no tokenizer at {path}")
    return load_tokenizer(path)


def tokenizer_file(source: str, data: Path) -> Path:
    """A plain `tokenizer.json` of the same vocabulary (for peers that load files)."""
    return _tokenizer_file(source, _resolved(data))


@cache
def _tokenizer_file(source: str, data: Path) -> Path:
    text = _tokenizer(source, data).backend.to_str()
    key = _digest(text.encode())

    def write(folder: Path) -> None:
        (folder / "tokenizer.json").write_text(text, encoding="utf-8")

    return _cached(f"file-{key}", write) / "tokenizer.json"
