"""The OpenAI Responses API: `request` (body and stored history -> the neutral request),
`writer` (events -> output items and stream events), `store` (stored responses, for
`previous_response_id`), `api` (the `Api` the turn runs, its framer, the routes)."""

from toolwire.server.responses.api import add_routes

__all__ = ["add_routes"]
