"""The `toolwire` command: parse, serve and check.

Edges live here: files are read, JSON is printed, errors become exit codes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from toolwire import formats
from toolwire.check.command import add_check_parser
from toolwire.errors import ToolwireError
from toolwire.events import Event
from toolwire.message import Message
from toolwire.parser import Parser
from toolwire.tokenizer import load_tokenizer

__all__ = ["main"]


def _tool_choice(value: str) -> Any:
    if value in ("auto", "none", "required"):
        return value
    return {"type": "function", "function": {"name": value}}


def _event_json(event: Event) -> str:
    return json.dumps({"type": type(event).__name__, **asdict(event)}, ensure_ascii=False)


def _cmd_parse(args: argparse.Namespace) -> int:
    tokenizer = load_tokenizer(args.tokenizer)
    tools = None
    if args.tools:
        with open(args.tools, encoding="utf-8") as fh:
            try:
                tools = json.load(fh)
            except ValueError as exc:
                raise ToolwireError(f"{args.tools}: not a JSON tools list ({exc})") from exc
    fmt = args.format
    if fmt == "auto":
        detection = formats.detect(tokenizer)
        if detection.format is None:
            raise ToolwireError(f"--format auto: no format detected ({detection.reason})")
        fmt = detection.format.name
        print(f"toolwire: format {fmt!r} detected: {detection.reason}", file=sys.stderr)
    parser = Parser(
        fmt,
        tokenizer,
        tools=tools,
        tool_choice=_tool_choice(args.tool_choice),
        in_reasoning=args.in_reasoning,
        strict=args.strict,
        stream_arguments=args.stream_arguments,
    )
    data = sys.stdin.read()
    if args.ids:
        ids = json.loads(data)
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise ToolwireError("--ids expects a JSON list of integers on stdin")
    else:
        data.encode("utf-8")  # stdin read with surrogateescape (C locale): ValueError, exit 2
        ids = tokenizer.encode(data)
    size = max(1, args.chunk or len(ids) or 1)
    events: list[Event] = []
    for start in range(0, len(ids), size):
        events += parser.feed(ids[start : start + size])
    events += parser.finish(args.finish)
    if args.events:
        for event in events:
            print(_event_json(event))
    else:
        print(json.dumps(Message.from_events(events).to_openai(), ensure_ascii=False, indent=2))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    try:
        from toolwire.server.config import config_from
        from toolwire.server.run import serve
    except ImportError as exc:
        raise ToolwireError(
            f"serve needs the server extra: pip install 'toolwire[server]' ({exc})"
        ) from exc
    serve(config_from(args))
    return 0


def build_parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="toolwire", description=__doc__)
    sub = root.add_subparsers(dest="command", required=True)

    p = sub.add_parser("parse", help="parse model output from stdin into an OpenAI message")
    p.add_argument(
        "--format",
        required=True,
        help="output format: a name or an alias (see toolwire.formats), or 'auto' to "
        "detect it from the tokenizer's chat template and vocabulary",
    )
    p.add_argument("--tokenizer", required=True, help="tokenizer folder, file or hub id")
    p.add_argument("--tools", help="JSON file with the OpenAI tools list")
    p.add_argument("--tool-choice", default="auto", help="auto, none, required or a tool name")
    p.add_argument("--ids", action="store_true", help="stdin is a JSON list of token ids")
    p.add_argument("--chunk", type=int, default=0, help="feed N ids per delta (0: all)")
    p.add_argument("--events", action="store_true", help="print one JSON event per line")
    p.add_argument("--in-reasoning", action="store_true", default=None)
    p.add_argument("--strict", action="store_true", help="fail on malformed calls")
    p.add_argument("--stream-arguments", action="store_true")
    p.add_argument(
        "--finish",
        choices=["stop", "length"],
        help="why the output ended (default: unknown, read as a stop)",
    )
    p.set_defaults(func=_cmd_parse)

    add_check_parser(sub)

    s = sub.add_parser("serve", help="run the OpenAI-compatible server (needs the server extra)")
    s.set_defaults(func=_cmd_serve)
    try:
        from toolwire.server.config import add_arguments
    except ImportError:  # the server extra is not installed; `serve` says so when run
        pass
    else:
        add_arguments(s)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ToolwireError as exc:
        print(f"toolwire: {exc}", file=sys.stderr)
        return 2
    except (OSError, EOFError, ValueError) as exc:  # unreadable input files or stdin
        print(f"toolwire: {exc}", file=sys.stderr)
        return 2
    except RecursionError:  # JSON input (--tools, --ids) nested beyond what json reads
        print("toolwire: the JSON input is nested too deeply", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
