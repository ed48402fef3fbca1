"""Finite attribute domains in the private-pgm sense, with the kind of every attribute.

An attribute takes the integer codes ``0 .. size-1``. Its *kind* says how encodings treat it later:
``categorical`` values have no order (one-hot encodings), ``ordinal`` values do (scalar encodings,
Ferrando & Sheldon, Sec. 3.1). The kind is public metadata, stored with the dataset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

KINDS = ("categorical", "ordinal")


class DomainError(ValueError):
    """A domain description that cannot be used; the message names the attribute."""


@dataclass(frozen=True)
class Attribute:
    name: str
    size: int
    kind: str = "ordinal"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise DomainError(f"attribute name must be a non-empty string, got {self.name!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, int) or self.size < 1:
            raise DomainError(f"attribute {self.name!r}: size must be a positive integer, got {self.size!r}")
        if self.kind not in KINDS:
            raise DomainError(f"attribute {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class Domain:
    """An ordered collection of attributes; the order is the column order of the table."""

    attributes: tuple[Attribute, ...]
    _index: dict[str, Attribute] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Attribute] = {}
        for attribute in self.attributes:
            if attribute.name in index:
                raise DomainError(f"attribute {attribute.name!r} appears twice in the domain")
            index[attribute.name] = attribute
        if not index:
            raise DomainError("a domain needs at least one attribute")
        object.__setattr__(self, "_index", index)

    # construction -----------------------------------------------------------------------------
    @classmethod
    def from_sizes(
        cls, sizes: Mapping[str, int], categorical: Iterable[str] = ()
    ) -> Domain:
        """Build from a private-pgm domain mapping ``{column: size}``; ``categorical`` names the
        unordered columns, all others are ordinal."""
        categorical = list(categorical)
        unknown = [c for c in categorical if c not in sizes]
        if unknown:
            raise DomainError(f"categorical column(s) {unknown} are not in the domain")
        cat = set(categorical)
        return cls(
            tuple(
                Attribute(str(name), _as_size(name, size), "categorical" if name in cat else "ordinal")
                for name, size in sizes.items()
            )
        )

    @classmethod
    def from_json(cls, text: str, categorical: Iterable[str] = ()) -> Domain:
        """Parse a domain file. Two forms are accepted:

        * private-pgm's ``{"age": 32, "sex": 2}`` (kinds from ``categorical``), or
        * ``{"age": {"size": 32, "kind": "ordinal"}, "sex": {"size": 2, "kind": "categorical"}}``, where an
          attribute may also give ``"labels"``, what each code means (:func:`labels_from_json` reads them).
        """
        raw = _parsed(text)
        categorical = set(categorical)
        attributes = []
        for name, value in raw.items():
            if isinstance(value, dict):
                if set(value) - {"size", "kind", "labels"} or "size" not in value:
                    raise DomainError(f"attribute {name!r}: expected {{'size': int, 'kind': ..., 'labels': [...]}}, "
                                      f"got keys {sorted(value)}")
                kind = value.get("kind", "categorical" if name in categorical else "ordinal")
                attributes.append(Attribute(name, _as_size(name, value["size"]), kind))
                if "labels" in value:
                    _check_labels(name, value["labels"], attributes[-1].size)
            else:
                kind = "categorical" if name in categorical else "ordinal"
                attributes.append(Attribute(name, _as_size(name, value), kind))
        unknown = categorical - set(raw)
        if unknown:
            raise DomainError(f"categorical column(s) {sorted(unknown)} are not in the domain")
        return cls(tuple(attributes))

    def to_dict(self) -> dict[str, dict[str, object]]:
        return {a.name: {"size": a.size, "kind": a.kind} for a in self.attributes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, object]]) -> Domain:
        return cls(tuple(Attribute(n, int(v["size"]), str(v["kind"])) for n, v in data.items()))

    # queries ----------------------------------------------------------------------------------
    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Attribute:
        try:
            return self._index[name]
        except KeyError:
            raise DomainError(f"unknown attribute {name!r}; the domain has {list(self.names)}") from None

    def __len__(self) -> int:
        return len(self.attributes)

    def size(self, name: str) -> int:
        return self[name].size

    def shape(self, names: Iterable[str]) -> tuple[int, ...]:
        return tuple(self[n].size for n in names)

    def cells(self, names: Iterable[str]) -> int:
        total = 1
        for size in self.shape(names):
            total *= size
        return total

    def project(self, names: Iterable[str]) -> Domain:
        return Domain(tuple(self[n] for n in names))

    def sizes(self) -> dict[str, int]:
        return {a.name: a.size for a in self.attributes}

    def categorical(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes if a.kind == "categorical")


def labels_from_json(text: str) -> dict[str, list[str]]:
    """The labels a domain file gives (``{"sex": {"size": 2, "labels": ["female", "male"]}}``): ``{column: [the
    label of each code]}`` for the attributes that have them. Public, like the sizes: answers show them."""
    return {name: list(value["labels"]) for name, value in _parsed(text).items()
            if isinstance(value, dict) and "labels" in value}


def _parsed(text: str) -> dict[str, object]:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DomainError(f"domain is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(raw, dict) or not raw:
        raise DomainError("domain JSON must be a non-empty object mapping column names to sizes")
    return raw


def _check_labels(name: str, labels: object, size: int) -> None:
    if (not isinstance(labels, list) or len(labels) != size or not all(isinstance(v, str) and v for v in labels)
            or len(set(labels)) != size):
        raise DomainError(f"attribute {name!r}: labels must be a list of {size} distinct non-empty strings, one per "
                          "code in code order")


def _as_size(name: object, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DomainError(f"attribute {name!r}: size must be a positive integer, got {value!r}")
    return value
