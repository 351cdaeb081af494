"""What the agent tests share: a scripted upstream that plays one tool loop, and
`toolwire serve` in front of it as an operator starts it.

The upstream (`ScriptedUpstream` speaking vLLM's `/v1/completions`, with Qwen3's
vocabulary and a `/v1/models` that lists its context) answers each request by what its
prompt holds (`LoopResponder`):

* the last user turn holds a tool's result (`<tool_response>`, Qwen3's template):
  reasoning, then the final answer, `FINAL`;
* else, when a tool of `calls` is declared (its name in the prompt's `<tools>`):
  reasoning, then one genuine call to it (`<tool_call>` as the id 151657), with the
  arguments given there;
* else (a client's side request: a title, a summary): a short text.

So every client runs one whole loop: call -> the client runs the tool -> its result ->
the final answer. `agent_server(tmp_path)` starts `toolwire serve --engine vllm` in
front of it (a subprocess, its log kept) and a recording proxy in front of that, and
yields an `AgentServer`: the proxy's URL (what the clients are pointed at), what they
sent (`requests`), the upstream's bodies, and the server log's HTTP statuses.

The pinned clients (`make test-agents` installs them) are found under `.agents/`:
`CODEX`, `CLAUDE` (npm), and the Python SDKs in the test venv.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.data import data_dir, tokenizer_for
from tests.serving import MODEL, Script, ScriptedUpstream, running, toolwire_serve

#: Where `make test-agents` installs the npm clients (gitignored).
AGENTS = Path(__file__).resolve().parent.parent / ".agents"
CODEX = AGENTS / "node_modules" / ".bin" / "codex"
CLAUDE = AGENTS / "node_modules" / ".bin" / "claude"

#: The final answer every loop ends with.
FINAL = "The listing is done: the folder holds the files shown."
#: A tool call's reasoning, and the final answer's.
THINK_CALL = "The user wants the files listed; I will run a command."
THINK_FINAL = "The command ran; I can answer."

#: The context the scripted upstream lists as its `max_model_len`.
CONTEXT = 131072

_TOOLS = re.compile(r"<tools>\n(.*?)\n</tools>", re.S)  # the declared tools, as Qwen3 lists them
_TOOL_NAME = re.compile(r'"function": \{"name": "([^"]+)"')


@dataclass
class LoopResponder:
    """Answers a request by its prompt (see the module docstring)."""

    #: Tool name -> the arguments of the call made to it (the first declared one wins).
    calls: Mapping[str, dict[str, Any]]
    #: How the answers went: "call NAME", "final", "text" per request.
    log: list[str] = field(default_factory=list)

    def __call__(self, body: dict[str, Any]) -> Script:
        tok = tokenizer_for("qwen3")
        prompt = tok.decode(body["prompt"])
        turn = prompt.rsplit("<|im_start|>user", 1)[-1]
        tools = _TOOLS.search(prompt)
        declared = set(_TOOL_NAME.findall(tools[1] if tools else ""))
        thinking = not prompt.rstrip().endswith("</think>")
        if "<tool_response>" in turn:
            self.log.append("final")
            return _script(_think(THINK_FINAL, thinking) + FINAL)
        for name, arguments in self.calls.items():
            if name in declared:
                self.log.append(f"call {name}")
                call = json.dumps({"name": name, "arguments": arguments})
                return _script(_think(THINK_CALL, thinking) + f"<tool_call>\n{call}\n</tool_call>")
        self.log.append("text")
        return _script(_think("A short answer.", thinking) + "Listing files")


def _think(text: str, thinking: bool) -> str:
    """A reasoning block where the template left thinking on (else none)."""
    return f"<think>\n{text}\n</think>\n\n" if thinking else ""


def _script(text: str) -> Script:
    tok = tokenizer_for("qwen3")
    return Script([*tok.encode(text), tok.added_tokens["<|im_end|>"]], per_event=2)


#: An uvicorn access-log line: the method, path and status.
_ACCESS = re.compile(r'"(GET|POST|HEAD|PUT|DELETE) (\S+) HTTP/[\d.]+" (\d{3})')


@dataclass
class Recorded:
    """One request a client sent, and the status it was answered with."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0


class RecordingProxy:
    """Forwards every request to `target` (responses streamed back as they come) and
    records what the client sent: the test reads the clients' requests by field."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.requests: list[Recorded] = []

    def app(self) -> Starlette:
        methods = ["GET", "POST", "HEAD", "PUT", "DELETE"]
        return Starlette(routes=[Route("/{path:path}", self._forward, methods=methods)])

    async def _forward(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        headers = {k: v for k, v in request.headers.items() if k.lower() != "host"}
        record = Recorded(request.method, request.url.path, dict(request.headers), body)
        self.requests.append(record)
        client = httpx.AsyncClient(base_url=self.target, timeout=600)
        url = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        upstream = await client.send(
            client.build_request(request.method, url, content=raw, headers=headers),
            stream=True,
        )
        record.status = upstream.status_code

        async def relay() -> Any:
            try:
                async for chunk in upstream.aiter_raw():
                    yield chunk
            finally:
                await upstream.aclose()
                await client.aclose()

        keep = {
            k: v
            for k, v in upstream.headers.items()
            if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")
        }
        return StreamingResponse(relay(), status_code=upstream.status_code, headers=keep)


@dataclass
class AgentServer:
    """`toolwire serve` in front of a `LoopResponder`, and a recording proxy in front
    of it (`url`; `direct` is toolwire's own)."""

    url: str
    direct: str
    upstream: ScriptedUpstream
    responder: LoopResponder
    log: Path
    proxy: RecordingProxy

    def requests(self, path: str) -> list[Recorded]:
        """What the client sent to `path` (`/v1/responses`), in order."""
        return [r for r in self.proxy.requests if r.path == path]

    def summary(self) -> str:
        """What the client sent, by field, one request a line (printed with `-s`): the
        beta headers, then each top-level field in short."""
        lines = []
        for r in self.proxy.requests:
            line = f"{r.method} {r.path} -> {r.status}"
            beta = r.headers.get("anthropic-beta") or r.headers.get("x-codex-beta-features")
            if beta:
                line += f" beta={beta}"
            if isinstance(r.body, dict):
                body = r.body
                fields = {k: _shape(k, v) for k, v in body.items()}
                line += " " + json.dumps(fields, ensure_ascii=False)
            lines.append(line)
        return "\n".join(lines)

    def statuses(self) -> list[tuple[str, str, int]]:
        """Every request the server answered, from its access log."""
        text = self.log.read_text(errors="replace")
        return [(m[1], m[2], int(m[3])) for m in _ACCESS.finditer(text)]

    def failures(self) -> list[tuple[str, str, int]]:
        """The answers with a 4xx or 5xx status."""
        return [s for s in self.statuses() if s[2] >= 400]

    def bodies(self) -> list[dict[str, Any]]:
        """The bodies toolwire sent upstream."""
        return list(self.upstream.bodies)


def _shape(key: str, value: Any) -> Any:
    """A field's value in short: tools by type and name, messages by role, long text cut."""
    if key == "tools" and isinstance(value, list):
        return [
            f"{t.get('type', 'custom')}:{t.get('name', '')}" if isinstance(t, dict) else "?"
            for t in value
        ]
    if key in ("input", "messages") and isinstance(value, list):
        return [
            (m.get("type") or "message") + (f"/{m['role']}" if "role" in m else "")
            if isinstance(m, dict)
            else "?"
            for m in value
        ]
    text = json.dumps(value, ensure_ascii=False)
    return value if len(text) <= 80 else text[:77] + "..."


@contextlib.contextmanager
def agent_server(
    tmp: Path, calls: Mapping[str, dict[str, Any]], *flags: str
) -> Iterator[AgentServer]:
    """`toolwire serve --engine vllm` on Qwen3's tokenizer in front of a loop upstream;
    `flags` are more `serve` flags (`--served-model-name ...`)."""
    responder = LoopResponder(calls)
    upstream = ScriptedUpstream("vllm", responder=responder, context=CONTEXT)
    log = tmp / "toolwire.log"
    with running(upstream.app()) as upstream_url:
        serve = [
            "--engine",
            "vllm",
            "--upstream",
            upstream_url,
            "--tokenizer",
            str(data_dir() / "tokenizers" / "qwen3"),
            "--model",
            MODEL,
            *flags,
        ]
        with toolwire_serve(log, *serve) as direct:
            proxy = RecordingProxy(direct)
            with running(proxy.app()) as url:
                yield AgentServer(url, direct, upstream, responder, log, proxy)


def home(tmp: Path) -> dict[str, str]:
    """A throwaway HOME for one client run (no config, no credentials of the machine)."""
    path = tmp / "home"
    path.mkdir(exist_ok=True)
    keep = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return {**env, "HOME": str(path), "NO_COLOR": "1", "CI": "1"}
