"""The operator's guidance policy: `GrammarPolicy` as switches, one table for every host.

Guidance is the structural tag a request is constrained by. The library's
`GrammarPolicy` says when a tag is built and how; an operator sets it once, for every
request, with these switches (a `toolwire serve` flag and its `TOOLWIRE_*` variable;
inside vLLM, where a plugin cannot add flags, the same variables)::

    --guidance                      TOOLWIRE_GUIDANCE                      on | off
    --guidance-scope                TOOLWIRE_GUIDANCE_SCOPE                always | auto
    --guidance-schema               TOOLWIRE_GUIDANCE_SCHEMA               auto | strict
    --guidance-max-whitespace       TOOLWIRE_GUIDANCE_MAX_WHITESPACE       N (0: unbounded)
    --guidance-exclude-delimiters   TOOLWIRE_GUIDANCE_EXCLUDE_DELIMITERS   on | off
    --guidance-shared-rules         TOOLWIRE_GUIDANCE_SHARED_RULES         on | off

Data flow::

    flag or variable text --policy_from()--> GrammarPolicy (ValueError naming the switch)
    GrammarPolicy --describe()--> the dict /health/ready reports and the startup log says

Defaults are `GrammarPolicy()`'s. With guidance off no request carries a tag (and a
`response_format` the server cannot enforce is a 400); with scope `auto` a
`tool_choice="auto"` request carries one only when a tool is `strict: true` or
`parallel_tool_calls` is false. Nothing here reads the environment by itself:
callers pass the mapping (`policy_from_env(os.environ)`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolwire.grammar.policy import GrammarPolicy

__all__ = ["SWITCHES", "Switch", "describe", "policy_from", "policy_from_env"]

_ON = ("on", "true", "1", "yes")
_OFF = ("off", "false", "0", "no")


def _switch(text: str) -> bool:
    value = text.strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError("expected on or off")


def _choice(*allowed: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.strip().lower()
        if value not in allowed:
            raise ValueError("expected " + " or ".join(allowed))
        return value

    return parse


def _whitespace(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        raise ValueError("expected a whole number (0: unbounded)") from None
    if value < 0:
        raise ValueError("expected a whole number (0: unbounded)")
    return value or None


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "0" if value is None else str(value)


@dataclass(frozen=True)
class Switch:
    """One field of `GrammarPolicy` as an operator sets it."""

    flag: str
    #: The `GrammarPolicy` field it sets.
    field: str
    parse: Callable[[str], Any]
    help: str

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def env(self) -> str:
        return "TOOLWIRE_" + self.dest.upper()

    @property
    def default(self) -> str:
        """The default as the switch spells it (from `GrammarPolicy()`)."""
        return _shown(getattr(GrammarPolicy(), self.field))


SWITCHES: tuple[Switch, ...] = (
    Switch(
        "--guidance",
        "enabled",
        _switch,
        "structural tags at all, on or off (off: no request is constrained, and a "
        "response_format is a 400)",
    ),
    Switch(
        "--guidance-scope",
        "scope",
        _choice("always", "auto"),
        "always: constrain every tool request; auto: a tool_choice=auto request only when "
        "a tool is strict or parallel_tool_calls is false",
    ),
    Switch(
        "--guidance-schema",
        "schema",
        _choice("auto", "strict"),
        "auto: honour a tool's strict: false (any JSON object); strict: always the declared schema",
    ),
    Switch(
        "--guidance-max-whitespace",
        "max_whitespace",
        _whitespace,
        "most consecutive whitespace characters between JSON tokens of arguments (0: unbounded)",
    ),
    Switch(
        "--guidance-exclude-delimiters",
        "exclude_delimiters",
        _switch,
        "forbid the call's delimiters inside argument strings, on or off",
    ),
    Switch(
        "--guidance-shared-rules",
        "shared_rules",
        _switch,
        "send a tag's repeated rules once (one EBNF grammar), on or off",
    ),
)


def policy_from(values: Mapping[str, str | None], *, spelled: str = "flag") -> GrammarPolicy:
    """The policy the switches set: `values` maps a switch's `dest` (`guidance_scope`)
    to its text; a missing or None value keeps the default. `spelled` ("flag" or "env")
    says how an error names the switch."""
    fields: dict[str, Any] = {}
    for switch in SWITCHES:
        text = values.get(switch.dest)
        if text is None or text == "":
            continue
        try:
            fields[switch.field] = switch.parse(str(text))
        except ValueError as exc:
            name = switch.flag if spelled == "flag" else switch.env
            raise ValueError(f"{name} {text!r}: {exc}") from None
    return GrammarPolicy(**fields)


def policy_from_env(environ: Mapping[str, str]) -> GrammarPolicy:
    """The policy the `TOOLWIRE_GUIDANCE*` variables of `environ` set."""
    values = {switch.dest: environ.get(switch.env) for switch in SWITCHES}
    return policy_from(values, spelled="env")


def describe(policy: GrammarPolicy) -> dict[str, str]:
    """The policy as its switches spell it (`{"guidance": "on", "guidance_scope": ...}`)."""
    return {switch.dest: _shown(getattr(policy, switch.field)) for switch in SWITCHES}
