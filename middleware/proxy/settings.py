"""The ``proxy`` section: where the proxy listens, where it forwards, and how it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from middleware.policy.settings import section


@section("proxy")
@dataclass(frozen=True)
class ProxySettings:
    host: str
    port: int
    anthropic_upstream: str
    openai_upstream: str
    other_requests: Literal["openai", "anthropic"]
    fail_open: bool
    max_body_bytes: int
    policies_dir: str | None
    recall_token: str | None
    status_token: str | None
    connect_timeout_seconds: float
    read_timeout_seconds: float
    upstream_idle_seconds: float
    max_connections: int
    client_connections: int
    header_timeout_seconds: float
    body_timeout_seconds: float
    cleaning_bytes: int
    cleaning_wait_seconds: float
    waiting_bytes: int
    access_log: bool
