"""The OpenAI-compatible HTTP server (FastAPI + uvicorn, SSE streaming).

Modules, in request order: `request` (validation) -> `pipeline` (prompt, tag, engine,
parser, stop strings) -> `chunks` (events to OpenAI objects) -> `app` (routes, SSE).
`config` and `engines` build the server from flags; `run` starts it.
"""
