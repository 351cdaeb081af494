"""The HTTP server (FastAPI + uvicorn, SSE streaming): Chat Completions, Responses, Messages.

Modules, in request order: `request` (validation) -> `pipeline` (prompt, tag, engine,
parser, stop strings) -> `chunks` (events to OpenAI objects) -> `app` (routes, SSE).
The agent APIs share the pipeline through `turn`: `responses_request` /
`messages_request` (each API's body to the neutral request) -> `turn` -> `segments`
(events as items/blocks) -> `responses` / `messages` (each API's objects) ->
`routes_responses` / `routes_messages` (routes, errors, SSE; `responses_store`).
`config` and `engines` build the server from flags; `run` starts it.
"""
