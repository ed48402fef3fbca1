"""The regression methods' catalog is the project's one generic registry (issue 28 point 5): a second method of a
taken name is refused naming it, and nothing of the first is replaced."""

from __future__ import annotations

import dataclasses

import pytest

from service.regression import methods
from workloads.registry import Registry


def test_the_methods_catalog_is_the_generic_registry() -> None:
    assert isinstance(methods._METHODS, Registry)
    assert methods.names() == methods._METHODS.names() and methods.specs() == methods._METHODS.entries()


def test_a_second_method_of_a_taken_name_is_refused() -> None:
    first = methods.find("dd-ssp")
    assert first is not None
    with pytest.raises(ValueError, match="regression method 'dd-ssp' is registered already"):
        methods.register(dataclasses.replace(first, description="a twin"))
    assert methods.find("dd-ssp") is first and methods.names().count("dd-ssp") == 1
    assert methods.find(3) is None and methods.find("no-such-method") is None
