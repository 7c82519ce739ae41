"""One error shape for every client: `{"error": "message"}` (LibreTranslate's), plus `"limit"` naming the limit
that refused a request, or `"field"` naming the field that failed validation. No traceback or path is ever sent:
unexpected exceptions are logged here and answered `{"error": "internal error"}` with 500."""

from __future__ import annotations

import logging

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("aiayn.serving")
LIBRETRANSLATE_PATHS = ("/translate", "/languages")


class ApiError(Exception):
    def __init__(
        self, status: int, message: str, limit: str | None = None, field: str | None = None, headers=None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.limit, self.field, self.headers = status, message, limit, field, headers

    def response(self) -> JSONResponse:
        body: dict[str, object] = {"error": self.message}
        if self.limit:
            body["limit"] = self.limit
        if self.field:
            body["field"] = self.field
        return JSONResponse(body, status_code=self.status, headers=self.headers)


def field_name(loc) -> str:
    """("body", "texts", 0) -> "texts[0]"."""
    name = ""
    for part in loc:
        if part in ("body", "query", "form"):
            continue
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    return name or "body"


def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
    first = error.errors()[0]
    field = field_name(first.get("loc", ()))
    if first.get("type") == "json_invalid":
        message, field = "the body is not valid JSON", "body"
    else:
        message = f"{field}: {first.get('msg', 'invalid value')}"
    if request.url.path in LIBRETRANSLATE_PATHS:  # LibreTranslate answers a bad request with 400
        return ApiError(400, f"Invalid request: {message}", field=field).response()
    return ApiError(422, message, field=field).response()


def install(app) -> None:
    @app.exception_handler(ApiError)
    async def _api(_request: Request, error: ApiError) -> JSONResponse:
        return error.response()

    app.add_exception_handler(RequestValidationError, validation_error)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(error.detail)}, status_code=error.status_code, headers=error.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, error: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return JSONResponse({"error": "internal error"}, status_code=500)


class BodyLimit:
    """ASGI middleware: a body over `max_bytes` gets 413 naming the limit, judged by Content-Length before it
    is read, or while it streams in (a chunked body without Content-Length)."""

    def __init__(self, app, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    def _refuse(self) -> ApiError:
        return ApiError(413, f"the request body exceeds the limit of {self.max_bytes} bytes", limit="max_body_bytes")

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length", b"")
        if length.isdigit() and int(length) > self.max_bytes:
            return await self._refuse().response()(scope, receive, send)
        seen, refused, started = 0, False, False

        async def sending(message):
            nonlocal started
            if not refused:  # after a 413 of ours, whatever the app still sends is dropped
                started = started or message["type"] == "http.response.start"
                await send(message)

        async def limited():
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                seen += len(message.get("body", b""))
                if seen > self.max_bytes and not started:
                    refused = True
                    await self._refuse().response()(scope, receive, send)
                    return {"type": "http.disconnect"}  # the app stops reading and its answer is dropped
            return message

        await self.app(scope, limited, sending)


__all__ = ["ApiError", "BodyLimit", "field_name", "install", "validation_error"]
