"""A chat template cannot build more than the render's budget: it is refused first.

Each construction below asks for far more than the bound (`max_render_chars`, small
here so each case ends fast) through a different operation: string and list
repetition, `**`, a loop doubling a string with `~` and with `+`, output from nested
loops, `join` (filter and method), `range`, `replace` (method and filter), nested
macros, padding methods and filters, format widths, block `set`, list growth,
`tojson` indents. Each raises `PromptError` that says so, with the Python memory the
render allocated (tracemalloc's peak) a small multiple of the bound, and a template
within the bound renders as before.
"""

from __future__ import annotations

import tracemalloc

import pytest

from tests.data import tokenizer_for
from toolwire import PromptError, UsageError, render_prompt

LIMIT = 200_000
USER = [{"role": "user", "content": "hi"}]

CONSTRUCTIONS = {
    "repeat": "{{ 'a' * 10**9 }}",
    "repeat_list": "{{ ([1] * 10**9) | length }}",
    "power": "{{ 2 ** (10**9) }}",
    "double_concat": "{% set ns = namespace(s='a') %}{% for i in range(60) %}"
    "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    "double_plus": "{% set ns = namespace(s='a') %}{% for i in range(60) %}"
    "{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
    "loop_output": "{% for i in range(100000) %}{% for j in range(100000) %}"
    "{{ 'xxxxxxxxxxxxxxxx' }}{% endfor %}{% endfor %}",
    "append_loop": "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
    "{% for j in range(100000) %}{% set _ = ns.l.append('abc') %}{% endfor %}{% endfor %}",
    "extend_doubling": "{% set ns = namespace(l=['a' * 100]) %}{% for i in range(40) %}"
    "{% set _ = ns.l.extend(ns.l) %}{% endfor %}{{ ns.l | join(',') }}",
    "join_filter": "{{ (['a' * 1000] * 1000) | join(',') }}",
    "join_method": "{{ ','.join(['a' * 1000] * 1000) }}",
    "range": "{% for i in range(10**9) %}x{% endfor %}",
    "nested_ranges": "{% for i in range(100000) %}{% for j in range(100000) %}"
    "{% endfor %}{% endfor %}",
    "replace_method": "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}"
    "{% set ns.s = ns.s.replace('a', 'aa') %}{% endfor %}{{ ns.s }}",
    "replace_filter": "{% set ns = namespace(s='aaaa') %}{% for i in range(40) %}"
    "{% set ns.s = ns.s | replace('a', 'aa') %}{% endfor %}{{ ns.s }}",
    # 1k characters a leaf: the bound is reached after some 400 macro calls, not 100k
    "nested_macros": "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% else %}"
    + "a" * 1024
    + "{% endif %}{% endmacro %}{{ f(40) }}",
    "ljust": "{{ 'a'.ljust(10**9) }}",
    "center": "{{ 'a' | center(10**9) }}",
    "indent": "{{ ('a\\n' * 1000) | indent(10**7) }}",
    "str_format": "{{ '{:>999999999}'.format(1) }}",
    "percent_format": "{{ '%999999999d' % 1 }}",
    "format_filter": "{{ '%999999999s' | format('a') }}",
    "block_set": "{% set ns = namespace(s='ab') %}{% for i in range(60) %}{% set x %}"
    "{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = x %}{% endfor %}",
    "tojson_indent": "{{ [1, 2] | tojson(indent=10**9) }}",
    "expandtabs": "{{ ('\\t' * 1000).expandtabs(10**7) }}",
    "list_of_characters": "{{ ('a' * 150000) | list | length }}",
    "copying_loop": "{% set ns = namespace(s='a' * 100000) %}{% for i in range(100000) %}"
    "{% set ns.s = ns.s[1:] + 'b' %}{% endfor %}x",
}


@pytest.mark.parametrize("template", CONSTRUCTIONS.values(), ids=CONSTRUCTIONS.keys())
def test_a_template_that_builds_too_much_is_refused_before_it_builds_it(template: str) -> None:
    tok = tokenizer_for("qwen3")
    tracemalloc.start()
    try:
        with pytest.raises(PromptError) as raised:
            render_prompt(USER, tok, template=template, max_render_chars=LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    message = str(raised.value)
    assert "refused before it is built" in message or "Range too big" in message, message
    assert peak < 40 * LIMIT, f"the render allocated {peak:,} bytes"


def test_the_default_bound_refuses_a_gigabyte_string() -> None:
    with pytest.raises(PromptError, match=r"1,000,000,000 characters, more than the 16,777,216"):
        render_prompt(USER, tokenizer_for("qwen3"), template="{{ 'a' * 10**9 }}")


def test_a_template_within_the_bound_renders_and_the_bound_is_checked() -> None:
    tok = tokenizer_for("qwen3")
    template = "{% for m in messages %}{{ m.content * 3 }}{{ '-' ~ m.role }}{% endfor %}"
    messages = [{"role": "user", "content": "x" * 1000}]
    assert render_prompt(messages, tok, template=template, max_render_chars=3010).text == (
        "x" * 3000 + "-user"
    )
    with pytest.raises(PromptError, match="3,000 characters, more than the 2,999"):
        render_prompt(messages, tok, template=template, max_render_chars=2999)
    with pytest.raises(UsageError):
        render_prompt(messages, tok, template=template, max_render_chars=0)
