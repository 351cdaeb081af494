"""What a request that cannot be answered becomes: one `ApiError`, in any API's shape.

Data flow::

    a validator's FieldError(path, problem) ---------+
    the pipeline's ApiError(status, message, param) -+--> failure() --> ApiError
    EngineError, or any other exception (a bug) -----+        |
                                   renamed(error, the API's field table)
                                                             |
                       Api.error_body(error) --> the API's JSON (OpenAI's shape here,
                                                 `openai_error`; Anthropic's in messages/)

A field is named by its path in the body as data (`("tools", 0, "type")`); each API
spells it its own way (OpenAI `tools[0].type`, Anthropic `tools.0.type`). The pipeline
speaks the neutral request's names (`response_format`, `messages`): an API's field
table says what those are called in its body (`text.format`, `input`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, TypeAlias

from toolwire.backends.base import EngineError

__all__ = [
    "ApiError",
    "FieldError",
    "Path",
    "error_body",
    "failure",
    "openai_error",
    "openai_path",
    "renamed",
]

log = logging.getLogger("toolwire.server")

#: Where a field is in a request body: keys and list indexes, outermost first.
Path: TypeAlias = tuple[str | int, ...]


def openai_path(path: Path) -> str:
    """OpenAI's spelling of a field's path: `messages[2].content`, `body` for the root."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "body"


def error_body(
    message: str,
    *,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """The JSON body OpenAI's clients parse into an `APIError`."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


class ApiError(Exception):
    """A request the server answers with an error status (400, 404, 502, 504...)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        type: str = "invalid_request_error",
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.type = type
        self.code = code

    def body(self) -> dict[str, Any]:
        """This error in OpenAI's shape."""
        return error_body(self.message, type=self.type, param=self.param, code=self.code)


class FieldError(ApiError):
    """A 400 for one field of the body: where it is, and what is wrong with it.

    `problem` reads after the field's name ("must be a boolean", "is declared twice"):
    OpenAI's message is `'tools[0].name' is declared twice`, Anthropic's
    `tools.0.name: is declared twice`.
    """

    def __init__(self, path: Path, problem: str) -> None:
        param = openai_path(path)
        super().__init__(400, f"'{param}' {problem}", param=param)
        self.path = path
        self.problem = problem


def openai_error(error: ApiError) -> dict[str, Any]:
    """The error shape of the OpenAI APIs (Chat Completions, Responses)."""
    return error.body()


def failure(exc: BaseException) -> ApiError:
    """Any exception as the `ApiError` a client is told (a bug is a 500, logged)."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, EngineError):
        return ApiError(exc.status, str(exc), type="engine_error")
    log.error("request failed", exc_info=exc)
    return ApiError(500, f"internal error: {type(exc).__name__}", type="server_error")


def renamed(error: ApiError, fields: Mapping[str, str]) -> ApiError:
    """`error` with the neutral request's field named as the API names it (`fields`,
    e.g. `{"response_format": "text.format"}`). A `FieldError` comes from the API's own
    validation and already uses the API's names."""
    name = fields.get(error.param or "")
    if isinstance(error, FieldError) or name is None:
        return error
    return ApiError(
        error.status,
        error.message,
        param=name,
        type=error.type,
        code=error.code,
    )
