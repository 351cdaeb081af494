"""Chat templates: a sandboxed Jinja environment with Hugging Face's semantics.

Data flow::

    template source --compile()--> jinja2.Template (cached per source)
    Template + messages, tools, add_generation_prompt, variables --render()--> text

What a template sees matches `transformers.apply_chat_template`: `trim_blocks` and
`lstrip_blocks` on, the `loopcontrols` extension, a `{% generation %}` block that just
renders its body, a `tojson` filter that is `json.dumps` (no HTML escaping,
`ensure_ascii=False` by default), `raise_exception(message)`, `strftime_now(format)`,
and `namespace`/`dict` limited as transformers limits them.

One difference, on purpose: the sandbox lets a template mutate lists and dicts
(`ns.ids.append(x)`, `queue.pop(0)`). Kimi K2's templates do so, and transformers'
immutable sandbox refuses to render them. Attribute access is still sandboxed (no
dunders, no unsafe callables), and the template only ever sees a private copy of the
request, so a mutation cannot reach the caller's objects.

The sandbox is also bounded (`sandbox.BoundedSandbox`): a template cannot build a
string, a list or an output longer than the render's budget (`max_chars`), checked
before each operation that could grow one, so `{{ 'a' * 10**9 }}` is refused without
allocating it.

A template that fails (`raise_exception`, a syntax error, a sandbox violation, a
bound) raises `PromptError` with the template's own message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.parser
import jinja2.utils

from toolwire.errors import PromptError
from toolwire.prompt.isolate import json_forms
from toolwire.prompt.sandbox import MAX_RENDER_CHARS, BoundedSandbox, TooLarge, budget

__all__ = [
    "compile_template",
    "control_strings",
    "is_markup",
    "iterates_content",
    "render",
    "variables_read",
]


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    dumped = json.dumps(
        value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )
    return json_forms(dumped, ensure_ascii)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _TemplateDict:
    """`dict(...)` for templates, without exposing the `dict` type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """Jinja's namespace, refusing underscore-prefixed attribute names."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # Jinja's signature: `self` may be a key
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes ({name!r})"
            )


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (assistant masks): renders its body."""

    tags = {"generation"}  # noqa: RUF012 (Jinja reads a class attribute)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _environment() -> BoundedSandbox:
    env = BoundedSandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_Generation, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _Namespace
    env.bound_filters()
    return env


_ENV = _environment()


@lru_cache(maxsize=32)
def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template once per source text; `PromptError` on a syntax error."""
    try:
        return _ENV.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise PromptError(f"the chat template does not compile: {exc} (line {exc.lineno})") from exc
    except (RecursionError, MemoryError) as exc:  # nested beyond what Jinja's compiler takes
        raise PromptError(f"the chat template does not compile ({type(exc).__name__})") from exc


@lru_cache(maxsize=32)
def iterates_content(source: str) -> bool:
    """True when the template loops over a message's content (it takes text-part lists).

    Templates that do not (most) get list content flattened to one string, as vLLM
    does. Detected from the template's syntax tree: a `for` loop over an expression
    that reads `content` (`message['content']`, `message.content`, or a variable set
    from one, such as Kimi's `{% set c = msg.get('content') %}`).
    """
    compile_template(source)  # a syntax error is a PromptError
    tree = _ENV.parse(source)
    content_names: set[str] = set()
    for node in tree.find_all(jinja2.nodes.Assign):
        if isinstance(node.target, jinja2.nodes.Name) and _reads_content(node.node):
            content_names.add(node.target.name)
    for loop in tree.find_all(jinja2.nodes.For):
        if _reads_content(loop.iter):
            return True
        names = {n.name for n in loop.iter.find_all(jinja2.nodes.Name)}
        if isinstance(loop.iter, jinja2.nodes.Name):
            names.add(loop.iter.name)
        if names & content_names:
            return True
    return False


def _reads_content(node: jinja2.nodes.Node) -> bool:
    for sub in (node, *node.find_all((jinja2.nodes.Getattr, jinja2.nodes.Const))):
        if isinstance(sub, jinja2.nodes.Getattr) and sub.attr == "content":
            return True
        if isinstance(sub, jinja2.nodes.Const) and sub.value == "content":
            return True
    return False


def render(
    source: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[Any] | None,
    add_generation_prompt: bool,
    variables: Mapping[str, Any],
    max_chars: int = MAX_RENDER_CHARS,
) -> str:
    """Render one conversation; template failures become `PromptError`, and so does a
    template that would build more than `max_chars` characters (`sandbox`)."""
    template = compile_template(source)
    context = {
        **variables,
        "messages": messages,
        "tools": tools,
        "documents": None,
        "add_generation_prompt": add_generation_prompt,
    }
    try:
        with budget(max_chars):
            return template.render(**context)
    except TooLarge as exc:
        raise PromptError(f"{exc}; the prompt is refused before it is built") from exc
    except jinja2.exceptions.TemplateError as exc:
        raise PromptError(f"the chat template refused this request: {exc}") from exc
    except Exception as exc:
        # The template is foreign code run on request data: whatever it raises
        # (OverflowError from `'x' * n`, RecursionError from a recursive macro,
        # TypeError from data of an unexpected shape) is this request failing to render.
        raise PromptError(
            f"the chat template failed on this request ({type(exc).__name__}: {exc})"
        ) from exc


#: Names `render` sets itself: a caller's variable cannot replace them.
_RESERVED = frozenset({"messages", "tools", "documents", "add_generation_prompt", *_ENV.globals})


@lru_cache(maxsize=32)
def variables_read(source: str) -> frozenset[str]:
    """The variables a template reads that a caller may set: the names it uses without
    setting them itself, less what `render` provides (messages, tools, functions)."""
    compile_template(source)  # a syntax error is a PromptError
    return frozenset(jinja2.meta.find_undeclared_variables(_ENV.parse(source))) - _RESERVED


#: String methods whose argument is text the template looks for in a value.
_SEARCHES = frozenset(
    {
        "split", "rsplit", "startswith", "endswith", "replace", "find", "rfind", "index",
        "rindex", "count", "partition", "rpartition", "strip", "lstrip", "rstrip",
        "removeprefix", "removesuffix",
    }
)  # fmt: skip
_MARKUP = frozenset("<>[]|")


def is_markup(text: str) -> bool:
    """True for text shaped like a control string (`</think>`, `[TOOL_CALLS]`): three
    characters or more, with a bracket or bar and a letter. Plain words and bare
    punctuation (`json`, `/nothink`, `{`) are not."""
    return len(text) >= 3 and not _MARKUP.isdisjoint(text) and any(c.isalpha() for c in text)


@lru_cache(maxsize=32)
def control_strings(source: str) -> frozenset[str]:
    """The markup the template searches values for: the markup-shaped constants given
    to a string search (`content.split('</think>')`, `.startswith('<tool_response>')`,
    `|replace('<think>', '')`) or tested with `in` (`'</think>' in content`)."""
    compile_template(source)  # a syntax error is a PromptError
    tree = _ENV.parse(source)
    found: set[str] = set()
    for call in tree.find_all(jinja2.nodes.Call):
        if isinstance(call.node, jinja2.nodes.Getattr) and call.node.attr in _SEARCHES:
            found.update(_constants(call.args))
    for filt in tree.find_all(jinja2.nodes.Filter):
        if filt.name == "replace":
            found.update(_constants(filt.args))
    for compare in tree.find_all(jinja2.nodes.Compare):
        if any(op.op in ("in", "notin") for op in compare.ops):
            found.update(_constants([compare.expr]))
    return frozenset(t for t in found if is_markup(t))


def _constants(nodes: list[jinja2.nodes.Expr]) -> list[str]:
    return [
        n.value for n in nodes if isinstance(n, jinja2.nodes.Const) and isinstance(n.value, str)
    ]
