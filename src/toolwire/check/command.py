"""The `toolwire check` subcommand: options in, report out, exit code from toolwire.

Exit status: 0 when toolwire passes every case it ran, 1 when it fails any (peers'
failures are findings, not errors), 2 on usage errors (from the main CLI), among them
a run in which nothing ran (every format skipped, each one's reason said).

`--tokenizer PATH` checks a user's own model: its tokenizer folder (or file) and its
chat template, for the formats named with `--format`, or the one detected from it.

Implementations beyond toolwire's own, and format setups beyond the default, come
from modules named by `--impls-from MODULE`: each is imported (the working directory
first on the path, so a checkout's own modules are found) and registers what it brings
(`toolwire.check.impls.register`, `toolwire.check.setup.register_setups`).
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib import import_module
from pathlib import Path
from typing import Any

from toolwire import formats
from toolwire.check.cases import GROUPS
from toolwire.check.impls import IMPLS
from toolwire.check.report import markdown, write_report
from toolwire.check.run import CheckOptions, run_check
from toolwire.errors import UsageError
from toolwire.tokenizer import load_tokenizer

__all__ = ["add_check_parser", "default_data"]


def default_data() -> Path:
    """$TOOLWIRE_TEST_DATA, else ../shared next to the working directory."""
    return Path(os.environ.get("TOOLWIRE_TEST_DATA") or Path.cwd().parent / "shared")


def _groups(value: str) -> list[str]:
    groups = [g.strip() for g in value.split(",") if g.strip()]
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown case groups {unknown}; known: {GROUPS}")
    return groups


def import_impls(modules: list[str]) -> None:
    """Import each module (which registers its implementations and setups)."""
    here = str(Path.cwd())
    if modules and here not in sys.path:
        sys.path.insert(0, here)
    for name in modules:
        try:
            import_module(name)
        except ImportError as exc:
            raise UsageError(f"--impls-from {name}: {exc}") from None


def _command(args: argparse.Namespace) -> list[str]:
    """The command line that reproduces this run."""
    words = ["toolwire", "check"]
    for module in args.impls_from or []:
        words += ["--impls-from", module]
    for impl in args.impl or ["toolwire"]:
        words += ["--impl", impl]
    if args.format:
        words += ["--format", *args.format]
    words += ["--cases", ",".join(args.cases), "--limit", str(args.limit)]
    if args.seed:
        words += ["--seed", str(args.seed)]
    for case in args.case or []:
        words += ["--case", case]
    if args.tokenizer:
        words += ["--tokenizer", args.tokenizer]
    if args.report:
        words += ["--report", args.report]
    return words


def cmd_check(args: argparse.Namespace) -> int:
    data = Path(args.data) if args.data else default_data()
    if args.tokenizer is None and not (data / "tokenizers").is_dir():
        raise UsageError(
            f"{data}: no tokenizers/ folder; pass --data DIR or set TOOLWIRE_TEST_DATA"
        )
    import_impls(args.impls_from or [])
    unknown = [i for i in args.impl or [] if i not in IMPLS]
    if unknown:
        raise UsageError(
            f"unknown implementations {unknown}; known: {', '.join(IMPLS)} (others are "
            "registered by a module named with --impls-from, e.g. `--impls-from peers` "
            "in the repository)"
        )
    tokenizer = _user_tokenizer(args.tokenizer)
    chosen = args.format or []
    if tokenizer is not None and not chosen:
        chosen = [_detected(tokenizer)]
    options = CheckOptions(
        data=data,
        impls=args.impl or ["toolwire"],
        formats=chosen,
        tokenizer_path=tokenizer,
        groups=args.cases,
        bfcl=Path(args.bfcl) if args.bfcl else None,
        limit=args.limit,
        seed=args.seed,
        cases=args.case or [],
        jobs=args.jobs,
    )
    results = run_check(options, progress=lambda line: print(line, file=sys.stderr))
    if not results.results:
        skipped = results.skipped.items()
        why = "; ".join(f"{impl} {fmt}: {reason}" for (impl, fmt), reason in skipped)
        raise UsageError(
            f"nothing was run ({why or 'no cases'}); point the check at a tokenizer folder "
            "with --tokenizer PATH (a model's tokenizer.json and tokenizer_config.json), "
            "or register format setups with --impls-from (`--impls-from peers` in the "
            "repository)"
        )
    command = _command(args)
    if args.report:
        for path in write_report(results, Path(args.report), command):
            print(f"wrote {path}", file=sys.stderr)
    print(markdown(results, command))
    return 1 if results.failures("toolwire") else 0


def _user_tokenizer(value: str | None) -> Path | None:
    if value is None:
        return None
    path = Path(value).expanduser().resolve()
    if not path.exists():
        raise UsageError(f"--tokenizer {value}: no such folder or file")
    return path


def _detected(path: Path) -> str:
    """The format `path`'s chat template and vocabulary point to (`--format` unset)."""
    found = formats.detect(load_tokenizer(path))
    if found.format is None:
        raise UsageError(f"--tokenizer {path}: {found.reason}; name the format with --format")
    return found.format.name


def add_check_parser(sub: Any) -> None:
    """Register `check` on the main CLI's subparsers."""
    p = sub.add_parser("check", help="conformance run: toolwire and the peers on real cases")
    p.add_argument(
        "--impl",
        action="append",
        help=f"implementation (repeatable): {', '.join(IMPLS)} or one --impls-from registers",
    )
    p.add_argument(
        "--impls-from",
        action="append",
        metavar="MODULE",
        help="import MODULE first, for the implementations and format setups it registers "
        "(repeatable; the repository's `peers`: vllm, sglang, vllm+toolwire)",
    )
    p.add_argument("--format", nargs="+", action="extend", help="formats (default: all)")
    p.add_argument(
        "--cases", type=_groups, default=list(GROUPS), help="comma list: " + ",".join(GROUPS)
    )
    p.add_argument("--report", help="folder for conformance.md/.json/.png")
    p.add_argument("--data", help="shared data folder (tokenizers/, corpora/)")
    p.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="your model's tokenizer folder (or file), with its own chat template, for "
        "every format checked; the format is detected from it when --format is not given",
    )
    p.add_argument("--bfcl", help="folder of BFCL-format files (default: bfcl-eval or data)")
    p.add_argument("--limit", type=int, default=40, help="BFCL entries per category")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="formats run at once (default 1)")
    p.add_argument(
        "--case", action="append", help="only this case id, e.g. bfcl/simple_python_3 (repeatable)"
    )
    p.set_defaults(func=cmd_check)
