"""Settings objects bound from a policy: dataclass fields to dotted keys.

A step says what it reads as a frozen dataclass registered with :func:`section`: each field
reads the key of its own name in that section (``budget.max_result_chars``), or the key
:func:`setting` names; a field declared with :func:`group` is itself such a dataclass, bound
from a sub-section. :func:`bind` builds the object once per policy snapshot.

No default lives in code: a loaded policy carries every key (the schema's defaults are its
lowest layer), and a key missing from a hand-made :class:`Policy` reads the schema default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import field, fields, is_dataclass
from typing import Any, TypeVar

from middleware.policy.document import Policy
from middleware.policy.schema import default_of

T = TypeVar("T")

#: Every settings class and the section it reads (what the schema test checks).
SECTIONS: dict[type, str] = {}

_MISSING = object()


def section(name: str) -> Callable[[type[T]], type[T]]:
    """Register a settings dataclass as the reader of policy section ``name`` (``tools.*``
    for the entries of the ``tools`` mapping)."""

    def register(cls: type[T]) -> type[T]:
        if not is_dataclass(cls):
            raise TypeError(f"{cls.__name__} must be a dataclass to be a settings section")
        SECTIONS[cls] = name
        return cls

    return register


def setting(key: str, *, convert: Callable[[Any], Any] | None = None) -> Any:
    """A field that reads the absolute dotted ``key`` rather than ``<section>.<field>``,
    optionally passing the value through ``convert``."""
    return field(metadata={"key": key, "convert": convert})


def converted(convert: Callable[[Any], Any]) -> Any:
    """A field that reads ``<section>.<field>`` and passes the value through ``convert``."""
    return field(metadata={"convert": convert})


def group(cls: type, key: str) -> Any:
    """A field holding the settings dataclass ``cls``, bound from the sub-section ``key``."""
    return field(metadata={"group": cls, "key": key})


def bind(policy: Policy, cls: type[T]) -> T:
    """The settings object ``cls`` for ``policy`` (built once per snapshot)."""
    cached = policy._bound.get(cls)
    if cached is None:
        cached = policy._bound[cls] = build(cls, SECTIONS[cls], lambda key: _read(policy, key))
    bound: T = cached
    return bound


def bind_entry(cls: type[T], entry: Mapping[str, Any], prefix: str) -> T:
    """``cls`` bound from one mapping of the policy (a ``tools`` entry), keys missing from
    it reading the schema's defaults under ``prefix`` (``tools.*``)."""

    def read(dotted: str) -> Any:
        name = dotted.removeprefix(f"{prefix}.")
        value = entry.get(name, _MISSING)
        return default_of(dotted) if value is _MISSING else value

    return build(cls, prefix, read)


def build(cls: type[T], where: str, read: Callable[[str], Any]) -> T:
    """``cls`` with every field read through ``read(dotted_key)``."""
    values: dict[str, Any] = {}
    for item in fields(cls):  # type: ignore[arg-type]
        meta = item.metadata
        key = meta.get("key") or f"{where}.{item.name}"
        if "group" in meta:
            values[item.name] = build(meta["group"], key, read)
            continue
        value = read(key)
        convert = meta.get("convert")
        values[item.name] = convert(value) if convert is not None else value
    return cls(**values)


def bound_keys(cls: type, where: str) -> Iterator[str]:
    """The dotted keys ``cls`` reads when bound from ``where``, groups walked."""
    for item in fields(cls):
        key = item.metadata.get("key") or f"{where}.{item.name}"
        if "group" in item.metadata:
            yield from bound_keys(item.metadata["group"], key)
        else:
            yield key


def _read(policy: Policy, dotted: str) -> Any:
    value = policy.get(dotted, _MISSING)
    return default_of(dotted) if value is _MISSING else value
