"""The provider stand-in on loopback, for the integrations' tests."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from collections.abc import Iterator

import pytest
from servers import serving
from stand_in import Provider

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM stays offline


@pytest.fixture(autouse=True)
def collect_library_leftovers() -> Iterator[None]:
    """LiteLLM caches the HTTP clients it makes and never closes them; the async ones
    belong to event loops already closed. Collect them here, where their ResourceWarning is
    expected, so it never lands in another test."""
    yield
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        litellm.in_memory_llm_clients_cache.flush_cache()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    # What survived is set aside from later collections (here and the interpreter's own):
    # a collection of the libraries' 600,000 objects took half a second at each teardown.
    gc.freeze()


@pytest.fixture
def provider() -> Iterator[tuple[Provider, str]]:
    stand_in = Provider()
    with serving(stand_in.app()) as url:
        yield stand_in, url
