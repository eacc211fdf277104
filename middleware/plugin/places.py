"""What a hook specification declares besides pluggy's markers: where a step hook runs, and
whether a third-party implementation of a hook decides what old turns become.

The specifications carry both (:mod:`.hookspecs`) and the host reads them off
(:data:`.step_calls.STEPS`, :meth:`.host.PluginHost.decides_old_turns`), so the pipeline runs
the steps in their places without knowing them by name or position.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from types import ModuleType
from typing import TypeVar

from middleware.report import Step

F = TypeVar("F", bound=Callable[..., object])

#: The attributes the declarations set on a specification function.
_STEP = "chatcli_middleware_step"
_DECIDES = "chatcli_middleware_decides_old_turns"


class Place(IntEnum):
    """Where a step hook runs. The host calls the request's steps in this order."""

    #: First, on the history as parsed, in full on every request: a step that repairs the
    #: history (a request it changed is never continued from the previous one's).
    FIRST = 1
    #: After repair, on a repaired history; on a request that continues the previous one
    #: of its conversation, on its new turns only.
    AFTER_REPAIR = 2
    #: Last, after every step placed before it, as :attr:`AFTER_REPAIR`.
    LAST = 3
    #: Not in a request: when a host admits tool outputs before they enter the history
    #: (``Pipeline.admit``).
    DISPATCH = 4


@dataclass(frozen=True)
class StepSpec:
    """One step hook as its specification declares it."""

    #: The hook's name (``enforce_budget``).
    hook: str
    #: The step's name in reports (``budget``).
    name: Step
    place: Place


def step(name: Step, place: Place) -> Callable[[F], F]:
    """Declare a specification a step hook the host calls at ``place``, whose actions the
    report lists under ``name``."""

    def declare(spec: F) -> F:
        setattr(spec, _STEP, (name, place))
        return spec

    return declare


def decides_old_turns(spec: F) -> F:
    """Declare that a third-party implementation of this hook decides what old turns
    become: with one registered, every request is processed in full, never continued from
    the previous request of its conversation (whose old turns that implementation may
    now decide otherwise)."""
    setattr(spec, _DECIDES, True)
    return spec


def steps_of(specs: ModuleType) -> tuple[StepSpec, ...]:
    """The step hooks ``specs`` declares, in the order of their places.

    :raises ValueError: two steps declare one place (their order would be pluggy's)."""
    found = []
    for hook, value in vars(specs).items():
        declared = getattr(value, _STEP, None)
        if declared is not None:
            found.append(StepSpec(hook, *declared))
    places = [spec.place for spec in found]
    if len(set(places)) != len(places):
        raise ValueError(f"two step hooks declare one place: {sorted(found, key=_place)}")
    return tuple(sorted(found, key=_place))


def deciding_hooks(specs: ModuleType) -> tuple[str, ...]:
    """The hooks of ``specs`` declared with :func:`decides_old_turns`."""
    return tuple(hook for hook, value in vars(specs).items() if getattr(value, _DECIDES, False))


def _place(spec: StepSpec) -> Place:
    return spec.place
