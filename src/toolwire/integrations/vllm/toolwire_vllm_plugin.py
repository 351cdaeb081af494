"""vLLM loads this file (`--tool-parser-plugin`); it registers the `toolwire_*` parsers.

vLLM imports a plugin file under its file name, so this file is named to collide
with nothing; the parsers live in `toolwire.integrations.vllm.plugin`.
"""

from toolwire.integrations.vllm.plugin import register

register()
