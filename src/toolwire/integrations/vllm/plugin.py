"""The vLLM side of the plugin: `toolwire_<format>` tool parsers and the parser that owns both.

How vLLM 0.32/0.33's chat serving drives a parser, and what toolwire does at each call::

    startup      ParserManager.get_parser(tool_parser_name="toolwire_qwen3", ...)
                 -> ToolwireParser (a vLLM `Parser`: reasoning, content and tool calls
                    from one object), built once with the tokenizer as a check
    per request  renderer: parser(tokenizer, tools).adjust_request(request)
                 -> toolwire's constraint (the same one and policy as `toolwire
                    serve`): a structural tag in `structured_outputs.structural_tag`
                    for vLLM's XGrammar, or under its guidance backend a Lark
                    grammar in `structured_outputs.grammar` (`request.BACKEND`);
                    nothing for tool_choice "none"
                 serving: one parser per choice
    streaming    parse_delta(delta_text, delta_token_ids, request, prompt_token_ids,
                 finished) -> RequestParse.feed(delta_token_ids) (+ finish()) ->
                 DeltaMessage(content, reasoning, tool_calls); the text is not read
    whole output set_prompt_token_ids(ids); parse(text, request, ...,
                 model_output_token_ids=ids) -> feed(ids) + finish() ->
                 (reasoning, content, [FunctionCall])

The one hook into vLLM's code: `ParserManager.get_parser` returns `ToolwireParser` for
a `toolwire_*` tool parser with no `--reasoning-parser`. vLLM composes other tool
parsers into a `DelegatingParser`, which hands a tool parser the decoded text only on
the non-streaming path (never `model_output_token_ids`), so a spelled `<tool_call>`
could not be told from the genuine id there. Composed with a reasoning parser, the
registered `ToolwireToolParser` still works through vLLM's legacy interface: streamed
deltas by id; whole outputs re-encoded from text, where delimiters are matched as text.

Call ids: vLLM's own `make_tool_call_id()` (`chatcmpl-tool-...`), one per call, minted
once; formats that carry the model's id (Kimi's `functions.NAME:IDX`) keep it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from vllm.entrypoints.generate.base.protocol import (
    DeltaFunctionCall,
    DeltaMessage,
    DeltaToolCall,
    ExtractedToolCallInformation,
    FunctionCall,
    ToolCall,
)
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.exceptions import VLLMValidationError
from vllm.logger import init_logger
from vllm.parser.abstract_parser import Parser as VllmParser
from vllm.parser.parser_manager import ParserManager
from vllm.renderers.chat_utils import make_tool_call_id
from vllm.sampling_params import StructuredOutputsParams, check_json_nesting
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

from toolwire import formats
from toolwire.backends.grammar_backend import lark_of
from toolwire.events import Content, Event, Reasoning, ToolCallArguments, ToolCallBegin
from toolwire.integrations.vllm.chat import MODE
from toolwire.integrations.vllm.request import (
    BACKEND,
    POLICY,
    RequestParse,
    bridge_tokenizer,
    constraint_for,
    openai_tool_choice,
    openai_tools,
    prompt_in_reasoning,
    relaxed_tag_for,
)
from toolwire.message import Message
from toolwire.parser import Parser

__all__ = [
    "PREFIX",
    "ToolwireParser",
    "ToolwireToolParser",
    "parser_names",
    "register",
    "register_all",
    "register_renderer",
]

#: Under vLLM's own logger ("vllm"), whose handler and format vLLM configures; a
#: logger outside it has no handler in vLLM's processes (its INFO lines were lost).
logger = init_logger("vllm.toolwire.plugin")

#: Registered names are PREFIX + a toolwire format name.
PREFIX = "toolwire_"


def _new_call_id(index: int) -> str:
    return str(make_tool_call_id())


def delta_message(events: Sequence[Event]) -> DeltaMessage | None:
    """One vLLM delta from a feed's events (None when there is nothing to send)."""
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, DeltaToolCall] = {}
    for event in events:
        if isinstance(event, Content):
            content.append(event.text)
        elif isinstance(event, Reasoning):
            reasoning.append(event.text)
        elif isinstance(event, ToolCallBegin):
            calls[event.index] = DeltaToolCall(
                index=event.index,
                id=event.id,
                type="function",
                function=DeltaFunctionCall(name=event.name, arguments=""),
            )
        elif isinstance(event, ToolCallArguments):
            call = calls.setdefault(
                event.index,
                DeltaToolCall(index=event.index, function=DeltaFunctionCall(arguments="")),
            )
            assert call.function is not None
            call.function.arguments = (call.function.arguments or "") + event.text
    if not content and not reasoning and not calls:
        return None
    return DeltaMessage(
        content="".join(content) or None,
        reasoning="".join(reasoning) or None,
        tool_calls=[calls[i] for i in sorted(calls)],
    )


def _vllm_takes(tag: dict[str, Any]) -> bool:
    """Whether vLLM's own request validation accepts this tag (its JSON nesting limit)."""
    try:
        check_json_nesting(json.dumps(tag), structural_tag=True)
    except VLLMValidationError:
        return False
    return True


class ToolwireToolParser(ToolParser):  # type: ignore[misc]
    """toolwire's parser for one format behind vLLM's `ToolParser` interface.

    One instance per request (vLLM builds one per choice); it also owns the request's
    reasoning, which `ToolwireParser` returns. Subclasses set `format`.
    """

    format: ClassVar[str] = ""
    # Required and named calls come in the model's native format (toolwire's tag forces
    # them), so vLLM must hand them to this parser rather than parse bare JSON itself.
    supports_required_and_named = False
    # Fed each delta's own ids and text, not everything so far.
    engine_based_streaming = True

    def __init__(self, tokenizer: Any, tools: list[Any] | None = None, *args: Any, **kwargs: Any):
        super().__init__(tokenizer, tools)
        self.toolwire_tokenizer = bridge_tokenizer(tokenizer)
        # Fail at vLLM's startup check, not on the first request, when the format
        # cannot run on this vocabulary.
        probe = Parser(self.format, self.toolwire_tokenizer)
        self.gated = probe.gated
        self.request_tools = tools
        self.prompt_ids: list[int] | None = None
        self._run: RequestParse | None = None

    # -- the request ---------------------------------------------------------------

    def adjust_request(self, request: Any) -> Any:
        """Attach toolwire's structural tag (what `toolwire serve` would send)."""
        tools = openai_tools(getattr(request, "tools", None))
        choice = openai_tool_choice(getattr(request, "tool_choice", None))
        if not tools or choice == "none":
            return request
        response_format = getattr(request, "response_format", None)
        if getattr(response_format, "type", None) == "text":
            response_format = None
        own = getattr(request, "structured_outputs", None) or response_format
        if choice == "auto" and own is not None:
            return request  # the client's own constraint wins where calls are optional
        parallel = getattr(request, "parallel_tool_calls", True) is not False
        result = constraint_for(self.format, self.toolwire_tokenizer, tools, choice, parallel)
        if result.fallback is not None and result.fallback not in ("no_tools", "scope", "disabled"):
            logger.warning(
                "toolwire_%s: structural tag fallback %r: %s",
                self.format,
                result.fallback,
                "; ".join(result.reasons),
            )
        tag = result.tag
        if tag is not None and not _vllm_takes(tag):
            # vLLM would refuse the request (its nesting limit): weaken the tag as
            # `toolwire serve` does when vLLM answers 400.
            logger.warning("toolwire_%s: vLLM refuses the structural tag; relaxed", self.format)
            tag = relaxed_tag_for(self.format, self.toolwire_tokenizer, tools, choice, parallel)
            if tag is not None and not _vllm_takes(tag):
                tag = None
        if tag is None:
            return request
        lark = lark_of(tag)
        request.structured_outputs = (
            StructuredOutputsParams(structural_tag=json.dumps(tag))
            if lark is None
            else StructuredOutputsParams(grammar=lark)
        )
        if isinstance(request, ChatCompletionRequest):
            request.response_format = None
        return request

    def run(self, request: Any) -> RequestParse:
        """This request's parse, started on first use."""
        if self._run is None:
            tools = openai_tools(getattr(request, "tools", None) or self.request_tools)
            self._run = RequestParse(
                self.format,
                self.toolwire_tokenizer,
                tools=tools,
                tool_choice=openai_tool_choice(getattr(request, "tool_choice", None)),
                parallel_tool_calls=getattr(request, "parallel_tool_calls", True) is not False,
                in_reasoning=prompt_in_reasoning(
                    self.format, self.toolwire_tokenizer, self.prompt_ids
                ),
                call_id=_new_call_id,
            )
        return self._run

    def message(self, ids: Sequence[int], request: Any) -> Message:
        """A whole output's message (the non-streaming path)."""
        run = self.run(request)
        return Message.from_events(run.feed(list(ids)) + run.finish())

    # -- vLLM's legacy tool-parser interface ------------------------------------------

    def extract_tool_calls(self, model_output: str, request: Any) -> ExtractedToolCallInformation:
        # Only the text reaches this method (composed with a reasoning parser): encode it
        # with delimiters matched, as the model would have emitted them.
        msg = self.message(self.toolwire_tokenizer.encode(model_output), request)
        calls = [
            ToolCall(id=c.id, function=FunctionCall(id=c.id, name=c.name, arguments=c.arguments))
            for c in msg.tool_calls
        ]
        return ExtractedToolCallInformation(
            tools_called=bool(calls), tool_calls=calls, content=msg.content
        )

    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> DeltaMessage | None:
        return delta_message(self.run(request).feed(list(delta_token_ids)))

    def finish_streaming(self) -> DeltaMessage | None:
        if self._run is None:
            return None
        return delta_message(self._run.finish())


class ToolwireParser(VllmParser):  # type: ignore[misc]
    """A vLLM `Parser` that reads reasoning, content and calls by id with one toolwire
    `Parser` per request. Subclasses set `tool_parser_cls` to a `ToolwireToolParser`."""

    tool_parser_cls: ClassVar[type[ToolwireToolParser]]
    reasoning_parser_cls = None

    @property
    def toolwire(self) -> ToolwireToolParser:
        parser = self.tool_parser
        assert isinstance(parser, ToolwireToolParser)
        return parser

    def adjust_request(self, request: Any) -> Any:
        return self.toolwire.adjust_request(request)

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self.toolwire.prompt_ids = list(prompt_token_ids)

    def is_reasoning_end(self, input_ids: list[int]) -> bool:
        tp = self.toolwire
        return not prompt_in_reasoning(tp.format, tp.toolwire_tokenizer, input_ids)

    def parse(
        self,
        model_output: str,
        request: Any,
        enable_auto_tools: bool = False,
        model_output_token_ids: Sequence[int] = (),
    ) -> tuple[str | None, str | None, list[Any] | None]:
        tp = self.toolwire
        ids = list(model_output_token_ids)
        if not ids and model_output:
            ids = tp.toolwire_tokenizer.encode(model_output)
        msg = tp.message(ids, request)
        calls = [FunctionCall(id=c.id, name=c.name, arguments=c.arguments) for c in msg.tool_calls]
        return msg.reasoning, msg.content, calls

    def parse_delta(
        self,
        delta_text: str,
        delta_token_ids: list[int],
        request: Any,
        prompt_token_ids: list[int] | None = None,
        *,
        finished: bool,
    ) -> DeltaMessage | None:
        tp = self.toolwire
        if tp.prompt_ids is None and prompt_token_ids is not None:
            tp.prompt_ids = list(prompt_token_ids)
        run = tp.run(request)
        events = run.feed(list(delta_token_ids))
        if finished:
            events += run.finish()
        delta = delta_message(events)
        if delta is not None and not getattr(request, "include_reasoning", True):
            delta.reasoning = None
            if not delta.content and not delta.tool_calls:
                return None
        return delta


#: Registered name -> the parser class that owns both sides, for `get_parser`.
_UNIFIED: dict[str, type[ToolwireParser]] = {}


def _registered() -> dict[str, str]:
    """Each name registered without the prefix -> its canonical format: every format's
    name and every alias (`toolwire_glm5` serves `glm47`)."""
    return {**{name: name for name in formats.names()}, **formats.aliases()}


def parser_names() -> list[str]:
    """Every name this plugin registers (`toolwire_<format or alias>`)."""
    return [PREFIX + name for name in _registered()]


def _hook_parser_manager() -> None:
    """Make `ParserManager.get_parser` return `ToolwireParser` for our tool parsers
    when no reasoning parser is named (see the module docstring)."""
    if getattr(ParserManager, "_toolwire_hooked", False):
        return
    original = ParserManager.get_parser

    def get_parser(cls: Any, *args: Any, **kwargs: Any) -> Any:
        composed = original(*args, **kwargs)
        name = kwargs.get("tool_parser_name", args[0] if args else None)
        reasoning = kwargs.get("reasoning_parser_name", args[1] if len(args) > 1 else None)
        unified = _UNIFIED.get(name) if isinstance(name, str) else None
        if composed is None or unified is None or reasoning:
            return composed
        tokenizer = kwargs.get("tokenizer")
        if tokenizer is not None:
            ParserManager.validate_parser_tokenizer(
                unified, tokenizer, tool_parser_name=name, model_name=kwargs.get("model_name")
            )
        return unified

    ParserManager.get_parser = classmethod(get_parser)
    ParserManager._toolwire_hooked = True


def register() -> None:
    """Register `toolwire_<format>` for every toolwire format, and `toolwire_<alias>`
    for every alias of one (idempotent)."""
    for registered, fmt in _registered().items():
        name = PREFIX + registered
        title = registered.title().replace("_", "").replace("-", "").replace(".", "")
        tool_cls = type(
            f"Toolwire{title}ToolParser",
            (ToolwireToolParser,),
            {"format": fmt, "__module__": __name__},
        )
        ToolParserManager.register_module(name, force=True, module=tool_cls)
        _UNIFIED[name] = type(
            f"Toolwire{title}Parser",
            (ToolwireParser,),
            {"tool_parser_cls": tool_cls, "__module__": __name__},
        )
    _hook_parser_manager()


def register_renderer() -> None:
    """Register `--tokenizer-mode toolwire`: vLLM's Hugging Face tokenizer under it, and
    `ToolwireRenderer` as its renderer (both by module and class name, imported when
    vLLM builds the renderer; idempotent)."""
    from vllm.renderers.registry import RENDERER_REGISTRY
    from vllm.tokenizers.registry import TokenizerRegistry

    if TokenizerRegistry.tokenizers.get(MODE) != _HF_TOKENIZER:
        TokenizerRegistry.register(MODE, *_HF_TOKENIZER)
    if RENDERER_REGISTRY.renderers.get(MODE) != _RENDERER:
        RENDERER_REGISTRY.register(MODE, *_RENDERER)


def _policy_line() -> str:
    from toolwire.server.guidance import describe

    return ", ".join(f"{name}={value}" for name, value in describe(POLICY).items())


#: (module, class) of what `--tokenizer-mode toolwire` loads.
_HF_TOKENIZER = ("vllm.tokenizers.hf", "CachedHfTokenizer")
_RENDERER = ("toolwire.integrations.vllm.renderer", "ToolwireRenderer")


def register_all() -> None:
    """vLLM's `vllm.general_plugins` entry point (`toolwire`), run in every vLLM process:
    the `toolwire_<format>` tool parsers (output side) and `--tokenizer-mode toolwire`
    (input side).

    vLLM does not guard a general plugin's call, so a failure here is logged, never
    raised: a vLLM that does not use toolwire must still start. One that names
    `toolwire_*` or `--tokenizer-mode toolwire` then fails on the unknown name, after
    this warning.
    """
    try:
        register()
        register_renderer()
        logger.info("toolwire guidance policy: %s; constraints for %s", _policy_line(), BACKEND)
    except Exception:
        logger.exception("toolwire's vLLM plugin could not register its parsers and renderer")
