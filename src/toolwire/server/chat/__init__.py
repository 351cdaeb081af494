"""OpenAI Chat Completions: `request` (body -> the neutral request), `writer` (events ->
chunks and the completion), `api` (the `Api` the turn runs, its framer, the route)."""

from toolwire.server.chat.api import add_routes

__all__ = ["add_routes"]
