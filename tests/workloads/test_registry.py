"""The generic registry (workloads/registry.py): order, refusal of a second entry under a name, lookups naming the
choices in the caller's own error."""

import pytest

from workloads.registry import Registry


class Unknown(Exception):
    pass


def test_entries_keep_their_order_and_a_name_is_taken_once() -> None:
    registry: Registry[int] = Registry("widget")
    assert registry.register("b", 2) == 2
    registry.register("a", 1)
    assert registry.names() == ["b", "a"] and registry.entries() == [2, 1] and len(registry) == 2
    assert "a" in registry and "c" not in registry and 3 not in registry
    with pytest.raises(ValueError, match="widget 'a' is registered already"):
        registry.register("a", 5)
    assert registry.get("a") == 1  # the refused entry did not replace the first
    with pytest.raises(ValueError, match="non-empty name"):
        registry.register("", 0)


def test_a_lookup_names_the_choices_in_the_callers_error() -> None:
    registry: Registry[int] = Registry("widget", lambda name, choices: Unknown(f"{name!r} not in {choices}"))
    registry.register("a", 1)
    with pytest.raises(Unknown, match=r"'z' not in \['a'\]"):
        registry.get("z")
    assert registry.find("z") is None and registry.find(["a"]) is None
    with pytest.raises(KeyError, match="widget must be one of"):
        Registry("widget").get("a")
    registry.unregister("a")
    registry.unregister("a")  # removing what is not there is harmless
    assert registry.names() == []
