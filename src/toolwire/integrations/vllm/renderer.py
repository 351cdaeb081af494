"""toolwire's renderer for vLLM: chat requests rendered by `render_prompt`, isolation on.

Selected with `--tokenizer-mode toolwire` (registered by the general plugin,
`toolwire.integrations.vllm.register_all`): the tokenizer is vLLM's own Hugging Face
tokenizer (`CachedHfTokenizer`, as for `hf`), and only the chat stage is replaced, as
vLLM's Cohere renderer does. How vLLM 0.32/0.33 drives it::

    startup      renderer_from_config(): ToolwireRenderer(config, tokenizer)
                 -> refused here when vLLM would bypass or outgrow it (gpt-oss,
                    rendered by openai-harmony; no tokenizer; not a fast tokenizer)
    per request  render_messages[_async](messages, ChatParams)
                 -> media_refusal(messages)       400 before any media is fetched
                 -> vLLM's parse_chat_messages     its own message preparation
                 -> vLLM's resolve_chat_template   the same template vLLM would use
                 -> template_call(kwargs)          tools, add_generation_prompt,
                                                   template variables
                 -> render_chat()                  toolwire.render_prompt(isolate=True)
                 -> TokensPrompt(prompt_token_ids, prompt): vLLM does not re-tokenize

Everything after the prompt (truncation, max_model_len, the engine, the parser) is
vLLM's. Completions with text prompts are tokenized as with `hf`: they are the
client's own prompt, not a chat.
"""

from __future__ import annotations

import copy
from typing import Any

from vllm.config import VllmConfig
from vllm.exceptions import VLLMValidationError
from vllm.inputs import TokensPrompt
from vllm.logger import init_logger
from vllm.renderers.chat_utils import parse_chat_messages, parse_chat_messages_async
from vllm.renderers.hf import (  # ChatTemplateResolutionError: in both 0.32's and 0.33's
    ChatTemplateResolutionError,
    HfRenderer,
    resolve_chat_template,
    resolve_chat_template_content_format,
)
from vllm.utils.async_utils import make_async

from toolwire.errors import PromptError, UsageError
from toolwire.integrations.vllm.chat import MODE, media_refusal, render_chat, template_call
from toolwire.integrations.vllm.request import bridge_tokenizer
from toolwire.prompt import Prompt

__all__ = ["MODE", "ToolwireRenderer"]

#: Under vLLM's own logger ("vllm"), whose handler and format vLLM configures; a
#: logger outside it has no handler in vLLM's processes (its INFO lines were lost).
logger = init_logger("vllm.toolwire.renderer")


def _developer_folded(conversation: list[Any], template: str) -> list[Any]:
    """vLLM's own handling of `developer` messages for templates without that role
    (turned into system messages, merged at the front), where this vLLM has it."""
    if not any(m.get("role") == "developer" for m in conversation):
        return conversation
    from vllm.renderers import hf

    detect = getattr(hf, "_detect_developer_role_support", None)
    convert = getattr(hf, "_convert_developer_to_system", None)
    consolidate = getattr(hf, "_consolidate_system_messages", None)
    if detect is None or convert is None or detect(template):
        return conversation
    converted: list[Any] = convert(conversation)
    if consolidate is not None:
        converted = consolidate(converted)
    return converted


class ToolwireRenderer(HfRenderer):  # type: ignore[misc]
    """vLLM's Hugging Face renderer with the chat stage done by `render_prompt`."""

    def __init__(self, config: VllmConfig, tokenizer: Any) -> None:
        model_config = config.model_config
        if getattr(model_config.hf_config, "model_type", None) == "gpt_oss":
            raise ValueError(
                "--tokenizer-mode toolwire: vLLM renders gpt-oss chats with openai-harmony, "
                "not through a renderer, so toolwire's would never run; serve gpt-oss "
                "without it (or behind `toolwire serve --engine vllm`)"
            )
        if tokenizer is None:
            raise ValueError(
                "--tokenizer-mode toolwire needs a tokenizer (no --skip-tokenizer-init)"
            )
        if getattr(model_config, "enable_prompt_embeds", False):
            raise ValueError(
                "--tokenizer-mode toolwire does not take --enable-prompt-embeds: embeddings "
                "spliced into a chat bypass the prompt's isolation"
            )
        super().__init__(config, tokenizer)
        try:
            self.toolwire_tokenizer = bridge_tokenizer(self.get_tokenizer())
        except UsageError as exc:
            raise ValueError(f"--tokenizer-mode toolwire: {exc}") from exc
        self._render_toolwire_async = make_async(self._render, executor=self._executor)

    # -- vLLM's renderer interface ---------------------------------------------------

    def render_messages(self, messages: list[Any], params: Any) -> tuple[list[Any], TokensPrompt]:
        self._refuse_media(messages)
        conversation, mm_data, mm_uuids = parse_chat_messages(
            messages,
            self.model_config,
            content_format=self._content_format(params),
            media_io_kwargs=params.media_io_kwargs,
            mm_processor_kwargs=params.mm_processor_kwargs,
        )
        self._refuse_media_data(mm_data, mm_uuids)
        return conversation, self._render(conversation, params)

    async def render_messages_async(
        self, messages: list[Any], params: Any
    ) -> tuple[list[Any], TokensPrompt]:
        self._refuse_media(messages)
        conversation, mm_data, mm_uuids = await parse_chat_messages_async(
            messages,
            self.model_config,
            content_format=self._content_format(params),
            media_io_kwargs=params.media_io_kwargs,
            mm_processor_kwargs=params.mm_processor_kwargs,
        )
        self._refuse_media_data(mm_data, mm_uuids)
        prompt = await self._render_with_timeout(self._render_toolwire_async(conversation, params))
        return conversation, prompt

    # -- the chat stage ------------------------------------------------------------------

    def _content_format(self, params: Any) -> Any:
        return resolve_chat_template_content_format(
            chat_template=params.chat_template,
            tools=params.chat_template_kwargs.get("tools"),
            given_format=params.chat_template_content_format,
            tokenizer=self.get_tokenizer(),
            model_config=self.model_config,
        )

    def _render(self, conversation: list[Any], params: Any) -> TokensPrompt:
        kwargs = params.get_apply_chat_template_kwargs()
        try:
            call = template_call(kwargs)
        except UsageError as exc:
            raise VLLMValidationError(str(exc), parameter="chat_template_kwargs") from exc
        template = resolve_chat_template(
            self.get_tokenizer(),
            chat_template=kwargs.get("chat_template"),
            tools=call.tools,
            model_config=self.model_config,
        )
        if template is None:
            raise ChatTemplateResolutionError(
                "the tokenizer has no chat template: pass --chat-template to vLLM"
            )
        conversation = _developer_folded(copy.deepcopy(conversation), template)
        try:
            prompt: Prompt = render_chat(self.toolwire_tokenizer, conversation, template, call)
        except (PromptError, UsageError) as exc:
            raise VLLMValidationError(str(exc), parameter="messages") from exc
        return TokensPrompt(prompt_token_ids=prompt.ids, prompt=prompt.text)

    @staticmethod
    def _refuse_media(messages: list[Any]) -> None:
        reason = media_refusal(messages)
        if reason is not None:
            raise VLLMValidationError(reason, parameter="messages")

    @staticmethod
    def _refuse_media_data(mm_data: Any, mm_uuids: Any) -> None:
        if mm_data or mm_uuids:
            raise VLLMValidationError(
                "vLLM's toolwire renderer (--tokenizer-mode toolwire) renders text only",
                parameter="messages",
            )
