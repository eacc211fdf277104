"""Errors the proxy answers itself, in the shape of the provider the client talks to, so
an SDK raises its usual exception with a message a person can act on."""

from __future__ import annotations

import json
from typing import Literal

Provider = Literal["anthropic", "openai"]

#: Our situation -> (Anthropic error type, OpenAI error type, OpenAI code).
_KINDS: dict[str, tuple[str, str, str | None]] = {
    "too_large": ("request_too_large", "invalid_request_error", "request_too_large"),
    "not_processed": ("api_error", "server_error", "chatcli_middleware_error"),
    "upstream_unreachable": ("api_error", "server_error", "upstream_unreachable"),
    "not_found": ("not_found_error", "invalid_request_error", "not_found"),
    "forbidden": ("permission_error", "invalid_request_error", "forbidden"),
    "request_timeout": ("timeout_error", "invalid_request_error", "request_timeout"),
    "overloaded": ("overloaded_error", "server_error", "overloaded"),
}


def error_body(provider: Provider, kind: str, message: str) -> bytes:
    """The JSON error body ``provider``'s SDKs parse."""
    anthropic_type, openai_type, code = _KINDS[kind]
    if provider == "anthropic":
        document: dict[str, object] = {
            "type": "error",
            "error": {"type": anthropic_type, "message": message},
        }
    else:
        document = {"error": {"message": message, "type": openai_type, "param": None, "code": code}}
    return json.dumps(document, ensure_ascii=False).encode("utf-8")
