"""Metadata filters: which documents a search or a delete may touch.

A filter is a mapping in the style of MongoDB and Chroma, or a function of the metadata:

- ``{"lang": "zh"}``: equality; several keys must all match;
- ``{"year": {"$gte": 2020, "$lt": 2025}}``: ``$eq $ne $gt $gte $lt $lte $in $nin $exists``;
- ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}``, ``{"$not": f}``.

Comparisons only match values of the same kind (numbers with numbers, strings with strings,
booleans with booleans): a string ``"2020"`` is not ``>= 2019``. A missing key matches only
``$ne``, ``$nin`` and ``$exists: false``. Mistakes (an unknown operator, ``$in`` without a
list, an empty ``$and``/``$or`` list or an empty filter inside one, which match everything or
nothing) are reported when the filter is compiled, before any document is looked at. The
whole filter ``{}`` means no condition, except for a delete (:func:`compile_deletion_filter`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

__all__ = [
    "AllOf",
    "AnyOf",
    "Condition",
    "FieldTest",
    "Filter",
    "FilterNode",
    "MetadataPredicate",
    "Negation",
    "check_deletion_filter",
    "compile_deletion_filter",
    "compile_filter",
    "kind",
    "parse_filter",
]

MetadataPredicate: TypeAlias = Callable[[Mapping[str, Any]], bool]
Filter: TypeAlias = Mapping[str, Any] | MetadataPredicate

_MISSING = object()


# The checked form of a mapping filter, which each store compiles to what it runs: a predicate
# over the metadata (:func:`compile_filter`) or SQL (the PostgreSQL store).
@dataclasses.dataclass(frozen=True, slots=True)
class Condition:
    """One operator on one key: ``operator`` is ``$eq $ne $gt $gte $lt $lte $in $nin
    $exists``; for ``$in``/``$nin`` the operand is a tuple."""

    operator: str
    operand: Any


@dataclasses.dataclass(frozen=True, slots=True)
class FieldTest:
    """The metadata value under ``key`` passes every condition."""

    key: str
    conditions: tuple[Condition, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class AllOf:
    parts: tuple[FilterNode, ...]  # empty: the whole filter {}, no condition


@dataclasses.dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[FilterNode, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Negation:
    part: FilterNode


FilterNode: TypeAlias = FieldTest | AllOf | AnyOf | Negation


def parse_filter(filter: Mapping[str, Any]) -> FilterNode:
    """A mapping filter checked and parsed (mistakes raise, naming where they are)."""
    return _parse(filter, "filter", nested=False)


def compile_filter(filter: Filter | None) -> MetadataPredicate | None:
    """The predicate a filter stands for (``None`` for no filter)."""
    if filter is None:
        return None
    if isinstance(filter, Mapping):
        return _predicate(parse_filter(filter))
    if callable(filter):
        return filter
    raise TypeError(f"A filter is a mapping or a function of the metadata, got {filter!r}")


def compile_deletion_filter(filter: Filter | None) -> MetadataPredicate | None:
    """:func:`compile_filter` for a delete, which refuses ``{}``: it matches every document,
    so a filter built from an empty selection would empty the collection."""
    check_deletion_filter(filter)
    return compile_filter(filter)


def check_deletion_filter(filter: Filter | None) -> None:
    if isinstance(filter, Mapping) and not filter:
        raise ValueError(
            "delete(filter={}) would delete every document of the collection: name what to "
            "delete, or pass filter=lambda metadata: True to delete them all"
        )


def _parse(spec: Mapping[str, Any], where: str, *, nested: bool = True) -> FilterNode:
    if not isinstance(spec, Mapping):
        raise TypeError(f"{where}: expected a mapping, got {spec!r}")
    if nested and not spec:
        raise ValueError(f"{where}: an empty filter matches every document; leave it out")
    parts: list[FilterNode] = []
    for key, value in spec.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: keys must be strings, got {key!r}")
        if key in ("$and", "$or"):
            listed = _list(value, f"{where}.{key}")
            if not listed:
                matched = "every" if key == "$and" else "no"
                raise ValueError(f"{where}.{key}: an empty list matches {matched} document")
            branches = tuple(_parse(b, f"{where}.{key}[{i}]") for i, b in enumerate(listed))
            parts.append(AllOf(branches) if key == "$and" else AnyOf(branches))
        elif key == "$not":
            parts.append(Negation(_parse(value, f"{where}.$not")))
        elif key.startswith("$"):
            raise ValueError(f"{where}: unknown logical operator {key!r} (use $and, $or, $not)")
        elif isinstance(value, Mapping):
            parts.append(_field(key, value, f"{where}.{key}"))
        else:
            parts.append(_field(key, {"$eq": value}, f"{where}.{key}"))
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def _field(key: str, operators: Mapping[str, Any], where: str) -> FieldTest:
    if not operators:
        raise ValueError(f"{where}: an empty operator mapping matches nothing useful")
    return FieldTest(
        key, tuple(_condition(operator, operand, where) for operator, operand in operators.items())
    )


def _condition(operator: str, operand: Any, where: str) -> Condition:
    if operator in ("$eq", "$ne"):
        return Condition(operator, operand)
    if operator in ("$in", "$nin"):
        return Condition(operator, tuple(_list(operand, f"{where}.{operator}")))
    if operator == "$exists":
        if not isinstance(operand, bool):
            raise TypeError(f"{where}.$exists: expected true or false, got {operand!r}")
        return Condition(operator, operand)
    if operator in _ORDERINGS:
        if kind(operand) not in ("number", "str"):
            raise TypeError(
                f"{where}.{operator}: compare with a number or a string, got {operand!r}"
            )
        return Condition(operator, operand)
    raise ValueError(
        f"{where}: unknown operator {operator!r} "
        "(use $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists)"
    )


def _predicate(node: FilterNode) -> MetadataPredicate:
    if isinstance(node, FieldTest):
        return _field_predicate(node)
    if isinstance(node, Negation):
        inner = _predicate(node.part)
        return lambda metadata: not inner(metadata)
    parts = [_predicate(part) for part in node.parts]
    if isinstance(node, AnyOf):
        return lambda metadata: any(part(metadata) for part in parts)
    if len(parts) == 1:
        return parts[0]
    return lambda metadata: all(part(metadata) for part in parts)


def _field_predicate(node: FieldTest) -> MetadataPredicate:
    key = node.key
    tests = [_test(condition) for condition in node.conditions]

    def matches(metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(key, _MISSING)
        return all(test(value) for test in tests)

    return matches


def _test(condition: Condition) -> Callable[[Any], bool]:
    operator, operand = condition.operator, condition.operand
    if operator == "$eq":
        return lambda value: value is not _MISSING and _equal(value, operand)
    if operator == "$ne":
        return lambda value: value is _MISSING or not _equal(value, operand)
    if operator == "$in":
        return lambda value: value is not _MISSING and any(_equal(value, o) for o in operand)
    if operator == "$nin":
        return lambda value: value is _MISSING or not any(_equal(value, o) for o in operand)
    if operator == "$exists":
        return lambda value: (value is not _MISSING) == operand
    compare = _ORDERINGS[operator]
    return lambda value: kind(value) == kind(operand) and compare(value, operand)


_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def kind(value: Any) -> str:
    """What kind of value a comparison sees: ``"number"``, ``"str"``, ``"bool"``, ...; only
    values of one kind compare."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "str"
    return type(value).__name__


def _equal(value: Any, operand: Any) -> bool:
    return kind(value) == kind(operand) and bool(value == operand)


def _list(value: Any, where: str) -> Sequence[Any]:
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise TypeError(f"{where}: expected a list, got {value!r}")
    return value
