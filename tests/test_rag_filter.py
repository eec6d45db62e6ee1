"""Metadata filters: operators, kinds, mistakes reported up front, algebraic properties; the
SQL the PostgreSQL store compiles them to matches what the predicate matches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _servers import PostgresServer
from tooluse.rag import compile_filter
from tooluse.rag._filter import parse_filter
from tooluse.rag._postgres_store import filter_sql

_values = st.one_of(
    st.booleans(), st.integers(-3, 3), st.sampled_from([1.5, "a", "b", "2020"]), st.none()
)
_metadata = st.dictionaries(st.sampled_from(["k", "n", "x"]), _values, max_size=3)


def matches(filter: Any, metadata: dict[str, Any]) -> bool:
    predicate = compile_filter(filter)
    assert predicate is not None
    return predicate(metadata)


@pytest.mark.parametrize(
    ("filter", "metadata", "expected"),
    [
        ({"k": "a"}, {"k": "a"}, True),
        ({"k": "a"}, {}, False),
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": 1}, {"n": True}, False),  # booleans are not numbers here
        ({"n": {"$gte": 2019}}, {"n": "2020"}, False),  # nor are strings
        ({"n": {"$gt": 1, "$lt": 3}}, {"n": 2}, True),
        ({"k": {"$lte": "b"}}, {"k": "a"}, True),
        ({"k": {"$ne": "a"}}, {}, True),
        ({"k": {"$nin": ["a"]}}, {}, True),
        ({"k": {"$in": ["a", 1]}}, {"k": 1}, True),
        ({"k": {"$exists": True}}, {"k": None}, True),
        ({"k": None}, {"k": None}, True),
        ({"$and": [{"k": "a"}, {"n": 1}]}, {"k": "a", "n": 2}, False),
        ({"$or": [{"k": "a"}, {"n": 1}]}, {"k": "b", "n": 1}, True),
        ({"$not": {"k": "a"}}, {"k": "a"}, False),
        ({"tags": ["x", "y"]}, {"tags": ["x", "y"]}, True),
        ({}, {"anything": 1}, True),
    ],
)
def test_operator_semantics(
    filter: Any, metadata: dict[str, Any], expected: bool, sql: psycopg.Connection[Any]
) -> None:
    assert matches(filter, metadata) is expected
    assert matches_in_sql(sql, filter, metadata) is expected


@pytest.fixture(scope="module")
def sql(postgres_server: PostgresServer) -> Iterator[psycopg.Connection[Any]]:
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as connection:
        yield connection
    postgres_server.drop_database(url)


def matches_in_sql(
    connection: psycopg.Connection[Any], filter: Any, metadata: dict[str, Any]
) -> bool:
    condition, parameters = filter_sql(parse_filter(filter))
    row = connection.execute(
        f"SELECT {condition} FROM (SELECT %s::jsonb AS metadata) AS document",
        [*parameters, json.dumps(metadata)],  # the condition comes first in the text
    ).fetchone()
    assert row is not None
    return bool(row[0])


_operands = st.one_of(_values, st.lists(_values, max_size=3))
_conditions = st.one_of(
    st.tuples(st.sampled_from(["$eq", "$ne"]), _values),
    st.tuples(st.sampled_from(["$in", "$nin"]), st.lists(_values, max_size=3)),
    st.tuples(st.just("$exists"), st.booleans()),
    st.tuples(
        st.sampled_from(["$gt", "$gte", "$lt", "$lte"]),
        st.sampled_from([-1, 0, 1.5, 2, "a", "b", "2020", "é", "Z"]),
    ),
)
_fields = st.builds(
    lambda key, conditions: {key: dict(conditions)},
    st.sampled_from(["k", "n", "x"]),
    st.lists(_conditions, min_size=1, max_size=2, unique_by=lambda c: c[0]),
)
_filters = st.recursive(
    _fields,
    lambda inner: st.one_of(
        st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda part: {"$not": part}, inner),
    ),
    max_leaves=6,
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(filter=_filters, metadata=st.dictionaries(st.sampled_from(["k", "n", "x"]), _operands))
def test_sql_matches_what_the_predicate_matches(
    sql: psycopg.Connection[Any], filter: dict[str, Any], metadata: dict[str, Any]
) -> None:
    assert matches_in_sql(sql, filter, metadata) == matches(filter, metadata)


@pytest.mark.parametrize(
    ("filter", "error", "message"),
    [
        ({"k": {"$like": "a%"}}, ValueError, r"filter\.k: unknown operator '\$like'"),
        ({"$nor": []}, ValueError, r"unknown logical operator '\$nor'"),
        ({"k": {"$in": "ab"}}, TypeError, r"filter\.k\.\$in: expected a list"),
        ({"$or": [{"k": 1}, 5]}, TypeError, r"filter\.\$or\[1\]: expected a mapping"),
        ({"k": {"$exists": 1}}, TypeError, "expected true or false"),
        ({"k": {"$gt": None}}, TypeError, "compare with a number or a string"),
        ({"k": {}}, ValueError, "empty operator mapping"),
        # Empty lists and mappings inside a filter match everything or nothing: a filter
        # built from an empty selection, not what anyone means (MongoDB refuses them too).
        ({"$or": []}, ValueError, r"filter\.\$or: an empty list matches no document"),
        ({"$and": []}, ValueError, r"filter\.\$and: an empty list matches every document"),
        ({"$or": [{}]}, ValueError, r"filter\.\$or\[0\]: an empty filter matches every"),
        ({"$not": {}}, ValueError, r"filter\.\$not: an empty filter matches every"),
        ({1: "a"}, TypeError, "keys must be strings"),
        ("k == 'a'", TypeError, "a mapping or a function"),
    ],
)
def test_mistakes_are_reported_when_compiling(
    filter: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        compile_filter(filter)


def test_no_filter_and_function_filters() -> None:
    assert compile_filter(None) is None

    def recent(metadata: Any) -> bool:
        return bool(metadata.get("n", 0) > 1)

    assert compile_filter(recent) is recent


@settings(max_examples=200, deadline=None)
@given(metadata=_metadata, key=st.sampled_from(["k", "n"]), value=_values, other=_values)
def test_filter_algebra(metadata: dict[str, Any], key: str, value: Any, other: Any) -> None:
    eq = {key: {"$eq": value}}
    assert matches({key: value}, metadata) == matches(eq, metadata)
    assert matches({key: {"$in": [value]}}, metadata) == matches(eq, metadata)
    assert matches({key: {"$ne": value}}, metadata) == (not matches(eq, metadata))
    assert matches({key: {"$nin": [value, other]}}, metadata) == (
        not matches({key: {"$in": [value, other]}}, metadata)
    )
    assert matches({"$not": eq}, metadata) == (not matches(eq, metadata))
    both = [eq, {key: {"$eq": other}}]
    assert matches({"$or": both}, metadata) == matches({key: {"$in": [value, other]}}, metadata)
    assert matches({"$and": both}, metadata) == (
        matches(eq, metadata) and matches({key: other}, metadata)
    )
