"""The tables in docs/ (and the README) that are generated, not copied: written between
markers.

    python -m scripts.doctables          rewrite every generated table
    python -m scripts.doctables --check  exit 1 naming each page whose table differs

Each table has one source, so a change there is a change of the table:

    options       docs/configuration.md  server/config.py's OPTIONS (the CLI and
                                         ServerConfig read the same table)
    formats       docs/formats.md        the format registry: each format's delimiters,
                                         aliases, grammar kind, and its module's docstring
                                         (what the family writes, where the sample is from)
    format-names  README.md              the registry's names, for the supported table
    api-fields    docs/server.md         every API's fields (each package's SURFACE):
                                         acted on, accepted, or refused by name

A page holds a table between `<!-- generated: NAME (python -m scripts.doctables) -->`
and `<!-- end generated: NAME -->`; everything else on the page is written by hand.
`tests/test_docs.py` fails when a committed table differs from what this writes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from toolwire import formats
from toolwire.formats.spec import Format
from toolwire.server.config import OPTIONS, Option

__all__ = [
    "TABLES",
    "api_fields",
    "check",
    "format_names",
    "formats_table",
    "options_table",
    "render_page",
    "write",
]

ROOT = Path(__file__).resolve().parent.parent


def _cell(text: str) -> str:
    """Text for one table cell: a `|` would end the cell, a newline the row."""
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    return _cell(f"`{text}`")


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _default(option: Option) -> str:
    if option.default is None:
        return "—"
    if option.kind is bool:
        return "on" if option.default else "off"
    if isinstance(option.default, float):
        whole = option.default.is_integer()
        return str(int(option.default)) if whole else f"{option.default:g}"
    return str(option.default)


def options_table(options: Sequence[Option] = OPTIONS) -> str:
    """Every server option: its flag, environment variable, default and meaning."""
    lines = [_row(["flag", "environment", "default", "meaning"]), _row(["---"] * 4)]
    for option in options:
        cells = [_code(option.flag), _code(option.env), _cell(_default(option))]
        lines.append(_row([*cells, _cell(option.help)]))
    return "\n".join(lines)


def _module_doc(name: str) -> str:
    """The docstring of the built-in format module `name` ("" for a custom format)."""
    spec = importlib.util.find_spec(f"toolwire.formats.{name}")
    if spec is None or spec.origin is None:
        return ""
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    return ast.get_docstring(tree) or ""


def _source(doc: str) -> str:
    """Where a format module says its sample is from: the parenthesis of `Sample (...)::`."""
    start = doc.find("Sample (")
    end = doc.find(")::", start)
    if start < 0 or end < 0:
        return ""
    parts = doc[start + len("Sample (") : end].split(";")
    # The modules cite this page too, for the facts collected on it: not a source of itself.
    return ";".join(p for p in parts if p.strip() != "docs/formats.md").strip()


def _calls(fmt: Format) -> str:
    opener, closer = fmt.call
    if fmt.header is not None and not opener:
        call = "a message header naming `to=functions.NAME`"
    elif fmt.header is not None:  # blocks whose kind closes the message's header
        call = _code(opener) + (f" … {_code(closer)}" if closer else "")
        call += f" (its header, after {_code(fmt.header.opens[0])}, is metadata)"
    elif fmt.anchor is not None:
        begins = " or ".join(f"`{c}`" for c in fmt.anchor.begins)
        call = f"a line beginning with {begins} (no token: text-gated)"
    else:
        call = _code(opener) + (f" … {_code(closer)}" if closer else " (the body ends itself)")
    if fmt.section is not None:
        call = f"{_code(fmt.section[0])} {call} {_code(fmt.section[1])}"
    return call


def _reasoning(fmt: Format) -> str:
    if fmt.reasoning is None:
        return "the `analysis` channel" if fmt.header is not None else "—"
    opener, closer = fmt.reasoning
    text = f"{_code(opener)} … {_code(closer)}"
    also = [_code(c) for o, c in fmt.more_reasoning if o == opener]
    if also:
        text += f" (or ended by {', '.join(also)})"
    others = [f"{_code(o)} … {_code(c)}" for o, c in fmt.more_reasoning if o != opener]
    return ", ".join([text, *others])


def formats_table() -> str:
    """Every registered format: what the family writes, its delimiters, its other names,
    its structural tag and the source of its module's sample."""
    aliases: dict[str, list[str]] = {}
    for alias, name in formats.aliases().items():
        aliases.setdefault(name, []).append(alias)
    head = ["format", "what it is", "calls", "reasoning", "aliases", "tag", "sample from"]
    lines = [_row(head), _row(["---"] * len(head))]
    for name in formats.names():
        fmt = formats.get(name)
        doc = _module_doc(name)
        summary = doc.split("\n\n", 1)[0] if doc else ""
        tag = type(fmt.grammar).__name__ if fmt.grammar is not None else "none"
        lines.append(
            _row(
                [
                    _code(name),
                    _cell(summary),
                    _calls(fmt),
                    _reasoning(fmt),
                    ", ".join(_code(a) for a in aliases.get(name, [])) or "—",
                    _cell(tag),
                    _cell(_source(doc)),
                ]
            )
        )
    return "\n".join(lines)


def format_names() -> str:
    """One line naming every registered format, for the README."""
    names = formats.names()
    listed = ", ".join(_code(n) for n in names)
    return f"The {len(names)} formats: {listed}."


def api_fields() -> str:
    """Every top-level field of each API, and what the server does with it."""
    from toolwire.server.chat.request import SURFACE as CHAT  # the server extra
    from toolwire.server.core.surface import markdown
    from toolwire.server.messages.request import SURFACE as MESSAGES
    from toolwire.server.responses.request import SURFACE as RESPONSES

    apis = [("Chat Completions", CHAT), ("Responses", RESPONSES), ("Messages", MESSAGES)]
    return markdown(apis).rstrip("\n")


#: Table name -> (the page holding it, from the repository root; what writes it).
TABLES: dict[str, tuple[str, Callable[[], str]]] = {
    "options": ("docs/configuration.md", options_table),
    "formats": ("docs/formats.md", formats_table),
    "format-names": ("README.md", format_names),
    "api-fields": ("docs/server.md", api_fields),
}


def _markers(name: str) -> tuple[str, str]:
    return (
        f"<!-- generated: {name} (python -m scripts.doctables) -->",
        f"<!-- end generated: {name} -->",
    )


def render_page(text: str, name: str, table: str) -> str:
    """`text` with the table called `name` between its markers replaced by `table`."""
    begin, end = _markers(name)
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), re.DOTALL)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"the page must hold the markers of the {name!r} table exactly once")
    return pattern.sub(lambda _: f"{begin}\n{table}\n{end}", text)


def _pages(root: Path) -> dict[Path, str]:
    """Each page holding a generated table -> its text with every table regenerated."""
    pages: dict[Path, str] = {}
    for name, (page, build) in TABLES.items():
        path = root / page
        text = pages.get(path, path.read_text(encoding="utf-8"))
        pages[path] = render_page(text, name, build())
    return pages


def check(root: Path = ROOT) -> list[Path]:
    """The pages whose committed tables differ from what their sources give."""
    return [p for p, text in _pages(root).items() if p.read_text(encoding="utf-8") != text]


def write(root: Path = ROOT) -> list[Path]:
    """Rewrite the generated tables; returns the pages that changed."""
    changed = check(root)
    for path, text in _pages(root).items():
        if path in changed:
            path.write_text(text, encoding="utf-8")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scripts.doctables", description=__doc__)
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = ap.parse_args(argv)
    if args.check:
        stale = check()
        for path in stale:
            print(f"{path.relative_to(ROOT)}: generated table is stale", file=sys.stderr)
        return 1 if stale else 0
    for path in write():
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
