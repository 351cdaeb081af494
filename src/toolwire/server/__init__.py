"""The HTTP server (FastAPI + uvicorn, SSE streaming): Chat Completions, Responses, Messages.

Layout: `core/` is the one turn every API runs (validators, the neutral request,
pipeline, grammar service, transport, errors, metrics); `chat/`, `responses/` and
`messages/` are one package per API, each a `request` (its body to the neutral
request), a `writer` (events to its objects) and an `api` (its `Api`: adapter, framer,
error shape, field names; its routes). `app` mounts them, one line each; `config` and
`engines` build the server from flags; `run` starts it.

Data flow of a turn (`core/turn.py`)::

    body --Api.adapt()--> ChatRequest --plan()--> Plan --GrammarService--> compiled tag
         --ChoiceRun--> Parser events --Api.framer()--> the API's JSON or SSE
"""
