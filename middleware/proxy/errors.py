"""Errors the proxy answers itself, in the shape of the provider the client talks to, so
an SDK raises its usual exception with a message a person can act on (each provider's
shape is its format module's: :meth:`.Provider.error_document`)."""

from __future__ import annotations

import json

from middleware.formats.declarations import ErrorKind, Provider


def error_body(provider: Provider, kind: ErrorKind, message: str) -> bytes:
    """The JSON error body ``provider``'s SDKs parse."""
    document = provider.error_document(kind, message)
    return json.dumps(document, ensure_ascii=False).encode("utf-8")
