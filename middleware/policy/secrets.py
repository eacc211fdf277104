"""Credentials a policy holds, hidden wherever its values are shown: the proxy's tokens,
a spill store's options, and the password of any URL (an upstream
``https://user:PASSWORD@gateway``, a database ``postgresql://user:PASSWORD@host/db``).
``chatcli-mw config``, the console's proxy page and every log line or error that names such
a URL show it through here, so what is hidden is decided once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

#: What a credential key's value is shown as.
HIDDEN = "(set, not shown)"
#: What a URL's password (or its user name when that is all it has) is shown as.
MASK = "***"
#: Keys whose whole value is a credential (any part of a dotted key).
SECRET_KEYS = frozenset({"recall_token", "status_token", "storage_options"})

#: A URL's scheme, and its user information up to the last ``@`` of its authority (which
#: ends at the first ``/``, ``?``, ``#`` or white space: RFC 3986, as httpx reads it).
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#\s]*)@")


def redact_urls(text: str) -> str:
    """``text`` with the credentials of every URL in it hidden: ``user:password@`` becomes
    ``user:***@``, and user information without a password ``***@`` (it is often a token
    itself: ``https://TOKEN@host``). A URL alone, or a log line or error naming one."""
    return _USERINFO.sub(_hide, text)


def _hide(match: re.Match[str]) -> str:
    user, colon, _ = match["userinfo"].partition(":")
    return f"{match['scheme']}{f'{user}:{MASK}' if colon else MASK}@"


def is_secret(key: str) -> bool:
    """Whether the dotted ``key`` is a credential as a whole."""
    return any(part in SECRET_KEYS for part in key.split("."))


def shown(key: str, value: Any) -> Any:
    """The policy value of the dotted ``key`` (``""``: the whole policy) as it may be
    shown: :data:`HIDDEN` for a credential that is set, and every URL's password hidden in
    anything else."""
    if is_secret(key) and value is not None and value != {}:
        return HIDDEN
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Mapping):
        return {name: shown(f"{key}.{name}" if key else name, item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [shown(key, item) for item in value]
    return value
