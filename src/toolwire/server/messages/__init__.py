"""The Anthropic Messages API: `request` (body -> the neutral request), `writer` (events
-> content blocks and stream events), `api` (the `Api` the turn runs, its framer and
error shape, the routes)."""

from toolwire.server.messages.api import add_routes

__all__ = ["add_routes"]
