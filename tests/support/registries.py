"""Registering a test's own entry in a catalog (:class:`workloads.registry.Registry`) for the length of a test."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TypeVar

from workloads.registry import Registry

T = TypeVar("T")


@contextmanager
def registered(registry: Registry[T], name: str, entry: T) -> Iterator[T]:
    """``entry`` under ``name`` while the block runs (in place of a registered one); afterwards the catalog holds
    exactly what it held before, in the same order."""
    before = registry.items()
    registry.unregister(name)
    registry.register(name, entry)
    try:
        yield entry
    finally:
        for key, _ in registry.items():
            registry.unregister(key)
        for key, value in before:
            registry.register(key, value)
