"""One small registry of named things, shared by every catalog of the project (release kinds, mechanisms, regression
methods, data engines, campaign protocols, the devices' protocol specs).

A catalog holds its entries in registration order; a second entry under a name is refused (two modules claiming
one name is a bug, caught at import); a lookup of an unknown name raises the catalog's own error naming the
choices, so the caller's message reads in its layer's words (an ``InvalidInput`` of the service, a
``ProtocolError`` of a device). It lives in ``workloads`` (numpy only, the lowest layer) so that a device's catalog
uses it too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

#: builds the exception of a failed lookup from the name asked for and the registered names
Missing = Callable[[object, list[str]], Exception]


def _key_error(what: str) -> Missing:
    def missing(name: object, choices: list[str]) -> Exception:
        return KeyError(f"{what} must be one of {choices}, got {name!r}")

    return missing


class Registry(Generic[T]):
    """Entries of one kind by name.

    ``what`` names an entry in messages (``"mechanism"``, ``"release kind"``); ``missing(name, choices)`` builds
    the error :meth:`get` raises for a name that is not registered (a :class:`KeyError` naming the choices unless
    given)."""

    def __init__(self, what: str, missing: Missing | None = None) -> None:
        self.what = what
        self._missing = missing or _key_error(what)
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add ``entry`` under ``name``; a :class:`ValueError` if the name is taken. Returns ``entry`` (so that
        ``register`` can end a definition)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.what} needs a non-empty name, got {name!r}")
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered already")
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` if registered (tests that register an entry of their own remove it afterwards)."""
        self._entries.pop(name, None)

    def get(self, name: object) -> T:
        """The entry called ``name``; the registry's ``missing`` error, naming the choices, otherwise."""
        entry = self.find(name)
        if entry is None:
            raise self._missing(name, self.names())
        return entry

    def find(self, name: object) -> T | None:
        """The entry called ``name``, or None (a stored record may name one that is no longer registered)."""
        return self._entries.get(name) if isinstance(name, str) else None

    def names(self) -> list[str]:
        """The registered names, in registration order."""
        return list(self._entries)

    def entries(self) -> list[T]:
        """The registered entries, in registration order."""
        return list(self._entries.values())

    def items(self) -> list[tuple[str, T]]:
        return list(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)
