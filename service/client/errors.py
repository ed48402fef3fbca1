"""The client's one family of exceptions: everything the client raises on purpose is a :class:`MarginaliaError`.

* :class:`MarginaliaError`: an error answered by the server (its ``code``, ``message`` and HTTP ``status``), a
  transport failure (``status`` 0), or, through its subclasses, a refusal on this machine (``status`` ``None``);
* :class:`CollectionError`: a participant's device refused to report before anything was randomized or sent (the
  round is closed, she has reported, the server's cap or her own ceiling would be passed);
* :class:`DeviceError`: the campaign's published state or the participant's values cannot be used (also a
  ``ValueError``, which callers of the device functions have always caught).

Standard library only: :mod:`service.client.http`, :mod:`service.client.collections` and the device modules all
import it, so it sits below them (and imports nothing of the server).
"""

from __future__ import annotations

__all__ = ["CollectionError", "DeviceError", "MarginaliaError"]


class MarginaliaError(Exception):
    """An error answered by the server (or a transport failure, with status 0; a refusal on this machine, with status
    ``None``)."""

    def __init__(self, code: str, message: str, status: int | None) -> None:
        super().__init__(f"{code}: {message}" if status is None else f"{code} ({status}): {message}")
        self.code = code
        self.message = message
        self.status = status


class CollectionError(MarginaliaError):
    """Refused on the device before anything was randomized or sent (the round is closed, she has reported, the
    server's cap or her own ceiling would be passed); ``code`` as the server would have said, or the device's own
    (``report_ceiling_exceeded``, ``device_total_exceeded``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message, None)


class DeviceError(MarginaliaError, ValueError):
    """The campaign's published state, the participant's values, her ceilings or her spend file cannot be used; the
    message says which. Nothing was randomized or sent."""

    def __init__(self, message: str, code: str = "device_refused") -> None:
        super().__init__(code, message, None)
