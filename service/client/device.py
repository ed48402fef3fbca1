"""The client's face of the participant's device: :mod:`workloads.local.device`'s functions, refusing with the
client's :class:`~service.client.errors.DeviceError` (a :class:`~service.client.errors.MarginaliaError`, also a
``ValueError``) where the device refuses.

The device's code lives beside the randomizers, in ``workloads`` (numpy only), so that the server's simulator runs
it without importing the client and the client ships without the server; this module only gives the client's
callers (:mod:`service.client.spend`, :mod:`service.client.collections`, scripts and tests calling
:func:`make_report`) the client's one family of exceptions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from service.client.errors import DeviceError
from workloads.local import device
from workloads.local.device import PUBLIC_MAGNITUDE, clipping_warning

__all__ = ["PUBLIC_MAGNITUDE", "DeviceError", "clipped", "clipping_warning", "make_report", "open_round",
           "participant_data", "randomize", "round_cost"]

P = ParamSpec("P")
R = TypeVar("R")


def _refusing_as_client(function: Callable[P, R]) -> Callable[P, R]:
    """``function``, with the device's :class:`~workloads.local.device.DeviceRefusal` raised as a
    :class:`DeviceError` of the same message and code."""

    @functools.wraps(function)
    def wrapped(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return function(*args, **kwargs)
        except device.DeviceRefusal as refusal:
            raise DeviceError(refusal.message, code=refusal.code) from None

    return wrapped


participant_data = _refusing_as_client(device.participant_data)
open_round = _refusing_as_client(device.open_round)
round_cost = _refusing_as_client(device.round_cost)
make_report = _refusing_as_client(device.make_report)
clipped = _refusing_as_client(device.clipped)
randomize = _refusing_as_client(device.randomize)
