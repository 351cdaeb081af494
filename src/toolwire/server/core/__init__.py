"""What every API shares: one turn from a request body to the engine and back.

Modules, in request order: `fields` (validators every API's adapter uses) -> `request`
(the neutral `ChatRequest`) -> `pipeline` (prompt, structural tag, `ChoiceRun`: engine,
parser, stop strings) with `grammars` (tags compiled off the request path, cached) ->
`turn` (the `Api` protocol and the one `Turn` every route runs) -> `transport` (bodies,
disconnects, SSE). Beside them: `errors` (one `ApiError`, its OpenAI shape), `segments`
(events as the agent APIs' items and blocks), `stops`, `watch`, `metrics`.
"""
