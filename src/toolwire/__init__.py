"""toolwire: the layer between chat messages and token ids for tool-calling LLMs.

tok = toolwire.load_tokenizer("path/to/model_dir")
p = toolwire.Parser("qwen3", tok, tools=tools)
events = p.feed(ids) + p.finish()
msg = toolwire.Message.from_events(events)
"""

from __future__ import annotations

from importlib import metadata as _metadata

from toolwire import detect as _detect  # noqa: F401 (installs `formats.detect`)
from toolwire import events, formats
from toolwire.errors import MalformedOutput, PromptError, ToolwireError, UsageError
from toolwire.events import Content, Event, Reasoning, ToolCallArguments, ToolCallBegin, ToolCallEnd
from toolwire.grammar import GrammarPolicy, TagResult, structural_tag, structural_tag_with_reason
from toolwire.message import Message, ToolCall
from toolwire.parser import Parser, parse
from toolwire.prompt import Prompt, render_prompt
from toolwire.tokenizer import Tokenizer, load_tokenizer

__all__ = [
    "Content",
    "Event",
    "GrammarPolicy",
    "MalformedOutput",
    "Message",
    "Parser",
    "Prompt",
    "PromptError",
    "Reasoning",
    "TagResult",
    "Tokenizer",
    "ToolCall",
    "ToolCallArguments",
    "ToolCallBegin",
    "ToolCallEnd",
    "ToolwireError",
    "UsageError",
    "events",
    "formats",
    "load_tokenizer",
    "parse",
    "render_prompt",
    "structural_tag",
    "structural_tag_with_reason",
]

try:  # the one place the version is written is pyproject.toml, read from the install
    __version__ = _metadata.version("toolwire")
except _metadata.PackageNotFoundError:  # a source tree on the path, never installed
    __version__ = "0+unknown"
