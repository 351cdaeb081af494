"""The documentation stays true to the code: links resolve, generated tables are current,
the version is written once.

* Every internal link of README.md and docs/*.md resolves: its file exists inside the
  repository and its `#anchor` is a heading of the page it names (GitHub's anchors).
* The tables `scripts/doctables.py` generates (configuration from `OPTIONS`, formats
  from the registry) are what the committed pages hold: `make docs` rewrites them.
* `toolwire.__version__` is pyproject.toml's version, and no source file writes it.
* The agent clients' versions the README and docs/agents.md name are the pinned ones
  (the Makefile's npm pins, the `agents` extra).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest

import toolwire
from scripts import doctables
from toolwire import formats
from toolwire.server.config import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
_LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    """The page without its code blocks and code spans (links there are not links)."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text stays
    text = text.replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The internal links of `page` that do not resolve, each with the reason."""
    text = page.read_text(encoding="utf-8")
    problems = []
    for target in _LINK.findall(_prose(text)):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...: not ours
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / path_part).resolve() if path_part else page
        if not path.is_relative_to(root.resolve()):
            problems.append(f"{target}: outside the repository")
            continue
        if not path.exists():
            problems.append(f"{target}: no such file")
            continue
        if anchor:
            if path.suffix != ".md":
                problems.append(f"{target}: an anchor into a file that is not a page")
            elif anchor not in anchors(path.read_text(encoding="utf-8")):
                problems.append(f"{target}: no heading with this anchor in {path.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_internal_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_link_check_finds_each_kind_of_broken_link(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` part (b)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md) [ok](other.md#a-code-part-b) [ok](#page) [web](https://x.y)\n"
        "[gone](missing.md) [bad anchor](other.md#nothing) [here](#nowhere)\n"
        "`[in code](missing.md)`\n\n```\n[in a block](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page, tmp_path) == [
        "missing.md: no such file",
        "other.md#nothing: no heading with this anchor in other.md",
        "#nowhere: no heading with this anchor in page.md",
    ]


def test_anchors_follow_github() -> None:
    text = "# Delimiter isolation (`isolate=True`, the default)\n## Limits\n## Limits\n"
    assert anchors(text) == {"delimiter-isolation-isolatetrue-the-default", "limits", "limits-1"}


def test_the_readme_stays_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 250, f"README.md has {lines} lines: move the detail to its docs/ page"


def test_generated_tables_are_current() -> None:
    stale = [str(p.relative_to(ROOT)) for p in doctables.check()]
    assert stale == [], f"regenerate with `make docs` (python -m scripts.doctables): {stale}"


def _table_rows(page: str, name: str) -> list[list[str]]:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    _, _, rest = text.partition(f"<!-- generated: {name} ")
    assert rest, f"docs/{page} has no generated {name} table"
    body = rest.split("\n", 1)[1].split(f"<!-- end generated: {name} -->")[0]
    rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in body.strip().splitlines()]
    return [[cell.strip() for cell in row] for row in rows[2:]]


def test_configuration_table_has_every_option() -> None:
    rows = _table_rows("configuration.md", "options")
    assert [(r[0], r[1]) for r in rows] == [(f"`{o.flag}`", f"`{o.env}`") for o in OPTIONS]


def test_formats_table_has_every_format_and_alias() -> None:
    rows = _table_rows("formats.md", "formats")
    assert [r[0] for r in rows] == [f"`{n}`" for n in formats.names()]
    listed = {
        alias.strip("` "): row[0].strip("`")
        for row in rows
        for alias in row[4].split(",")
        if alias.strip() != "—"
    }
    assert listed == formats.aliases()


def test_a_stale_table_is_reported_and_rewritten(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    page = tmp_path / "docs" / "configuration.md"
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("`--port`", "`--porthole`", 1), encoding="utf-8")
    assert doctables.check(tmp_path) == [page]
    assert doctables.write(tmp_path) == [page]
    assert doctables.check(tmp_path) == []
    assert page.read_text(encoding="utf-8") == text


def test_render_page_needs_its_markers_once() -> None:
    begin = "<!-- generated: t (python -m scripts.doctables) -->"
    end = "<!-- end generated: t -->"
    page = f"before\n{begin}\nold\n{end}\nafter\n"
    assert doctables.render_page(page, "t", "new") == f"before\n{begin}\nnew\n{end}\nafter\n"
    with pytest.raises(ValueError, match="exactly once"):
        doctables.render_page("no markers", "t", "new")
    with pytest.raises(ValueError, match="exactly once"):
        doctables.render_page(page + page, "t", "new")


def test_version_is_written_once() -> None:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        declared = tomllib.load(fh)["project"]["version"]
    written = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "src").rglob("*.py")
        if re.search(rf"[\"']{re.escape(declared)}[\"']", path.read_text(encoding="utf-8"))
    ]
    assert written == [], "the version belongs in pyproject.toml only"
    if toolwire.__version__ == "0+unknown":
        pytest.skip("toolwire is not installed (run from a source tree): no metadata to read")
    assert toolwire.__version__ == declared


def test_the_tested_agent_versions_are_the_pinned_ones() -> None:
    """The client versions the README and the agents page name are the ones
    `make test-agents` installs (the Makefile's npm pins, the `agents` extra's)."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^(CODEX|CLAUDE)_VERSION\s*:=\s*(\S+)", makefile, re.MULTILINE))
    assert set(pins) == {"CODEX", "CLAUDE"}
    with (ROOT / "pyproject.toml").open("rb") as fh:
        extra = tomllib.load(fh)["project"]["optional-dependencies"]["agents"]
    sdks = [pin.replace("==", " ") for pin in extra]
    agents, readme = (
        " ".join(_prose((ROOT / page).read_text(encoding="utf-8")).split())
        for page in ("docs/agents.md", "README.md")
    )
    for page, text in (("README.md", readme), ("docs/agents.md", agents)):
        assert f"Codex CLI {pins['CODEX']}" in text, page
        assert f"Claude Code {pins['CLAUDE']}" in text, page
    missing = [sdk for sdk in sdks if sdk not in agents]
    assert missing == [], missing
