"""Derived vocabularies (`peers.vocab`): built once per content into the cache, reused.

Each case runs `peers.vocab.tokenizer_for` in fresh processes with `TOOLWIRE_CACHE`
pointing at a temporary folder, on a data folder made here (Qwen3's real vocabulary
linked in, a GLM template written by the test), so what the key covers can be changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.data import ROOT, data_dir

_LOAD = """
import json, sys
from pathlib import Path
from peers.vocab import tokenizer_for
tok = tokenizer_for(sys.argv[1], Path(sys.argv[2]))
print(json.dumps([tok.name, tok.vocab_size, sorted(tok.added_tokens.items()), tok.chat_template]))
"""


def _data(tmp_path: Path, template: str) -> Path:
    data = tmp_path / "data"
    (data / "tokenizers/qwen3").mkdir(parents=True, exist_ok=True)
    (data / "tokenizers/glm").mkdir(parents=True, exist_ok=True)
    base = data / "tokenizers/qwen3/tokenizer.json.gz"
    if not base.exists():
        base.symlink_to(data_dir() / "tokenizers/qwen3/tokenizer.json.gz")
    (data / "tokenizers/glm/GLM-4.7-Flash.jinja").write_text(template, encoding="utf-8")
    return data


def _start(family: str, data: Path, cache: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "TOOLWIRE_CACHE": str(cache),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    command = [sys.executable, "-c", _LOAD, f"derived:{family}", str(data)]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen[str]) -> list[object]:
    out, _ = process.communicate(timeout=300)
    assert process.returncode == 0
    loaded: list[object] = json.loads(out)
    return loaded


def test_concurrent_builds_give_one_complete_folder_then_reuse_it(tmp_path: Path) -> None:
    data, cache = _data(tmp_path, "{{ 'A' }}"), tmp_path / "cache"
    first, second = (_result(p) for p in [_start("glm", data, cache) for _ in range(2)])
    assert first == second
    folders = list((cache / "vocab").iterdir())
    assert [Path(str(first[0]))] == folders  # one folder, no temporary one left
    assert first[3] == "{{ 'A' }}" and "<arg_key>" in dict(first[2])
    written = (folders[0] / "tokenizer.json").stat().st_mtime_ns
    assert _result(_start("glm", data, cache)) == first
    assert (folders[0] / "tokenizer.json").stat().st_mtime_ns == written  # reused


def test_a_changed_input_is_a_new_folder(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    before = _result(_start("glm", _data(tmp_path, "{{ 'A' }}"), cache))
    after = _result(_start("glm", _data(tmp_path, "{{ 'B' }}"), cache))
    other = _result(_start("minimax_m2", _data(tmp_path, "{{ 'B' }}"), cache))
    assert after[3] == "{{ 'B' }}" and before[0] != after[0] != other[0]
    assert before[1:3] == after[1:3]
    assert len(list((cache / "vocab").iterdir())) == 3
