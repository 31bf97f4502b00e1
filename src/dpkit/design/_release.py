"""The release shared by every designed noise: (epsilon, delta)-DP per entry.

A design adds independent noise to each entry of an array. When neighbouring datasets
may change every entry, an array of ``n`` entries is ``n`` compositions (basic
composition, ``(n eps, n delta)``, refused before drawing when ``n delta >= 1``); when
one neighbour changes at most one entry (``parallel=True``: a histogram over disjoint
groups) the release costs one event.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dpkit.accounting.events import ApproxEvent, Event, RepeatedEvent
from dpkit.accounting.guarantees import ApproxDP
from dpkit.design import _core
from dpkit.mechanisms._base import Mechanism, Release
from dpkit.random import RandomLike


class EntrywiseDesign(Mechanism):
    """A designed noise that is ``(epsilon, delta)``-DP for one entry (see the module)."""

    epsilon: float
    delta: float

    @property
    def event(self) -> Event:
        return ApproxEvent(self.epsilon, self.delta)

    @property
    def guarantee(self) -> ApproxDP:
        return ApproxDP(self.epsilon, self.delta)

    def release(
        self,
        value: Any,
        *,
        confidence: float = 0.95,
        parallel: bool = False,
        rng: RandomLike | None = None,
    ) -> Release[Any]:
        """Release ``value`` (a scalar or an array) with independent design noise per entry.

        Parameters
        ----------
        value:
            The exact answer(s). Each entry must have sensitivity ``sensitivity``.
        confidence:
            Confidence level of the reported error bound (per entry), when there is one.
        parallel:
            False (default): neighbouring datasets may change every entry, so an
            array of ``n`` entries is ``n`` compositions (event
            ``RepeatedEvent(ApproxEvent(eps, delta), n)``, guarantee
            ``(n eps, n delta)``). True: one neighbour changes at most one entry (a
            histogram over disjoint groups), so the release costs one event.
        rng:
            Random source.
        """
        size = int(np.size(np.asarray(value, dtype=object)))
        owner = f"{type(self).__name__}.release"
        composed = (
            None
            if parallel or size <= 1
            else _core.composed_guarantee(self.epsilon, self.delta, size, owner)
        )
        released = super().release(value, confidence=confidence, rng=rng)
        if composed is None:
            return released
        return dataclasses.replace(
            released, event=RepeatedEvent(self.event, size), guarantee=composed
        )
