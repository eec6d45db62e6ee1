"""A pydantic ``Field`` on a tool's top-level parameter: the attributes that belong to the
argument rather than to its type.

``Annotated[str, Field(alias="q")]`` and ``Annotated[int, Field(default=5)]`` mean what they mean
on a pydantic model field: the model sends ``q``; it may leave the argument out and gets 5.
Validation applies them as pydantic does (each parameter is a field of the arguments
``TypedDict``). The schema is generated from the parameter's type alone, where pydantic ignores
them (and warns), so they are read here: the schema shows them as the property's name and
``default``, as a pydantic model's schema does.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from typing import Annotated, Any

from pydantic import AliasChoices, AliasPath
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# (attribute, its value when not given): pydantic applies these to a field only
_ARGUMENT_ATTRIBUTES = (
    ("alias", None),
    ("validation_alias", None),
    ("serialization_alias", None),
    ("default", PydanticUndefined),
    ("default_factory", None),
)


@dataclasses.dataclass(frozen=True, slots=True)
class ArgumentField:
    """What a parameter's pydantic ``Field`` says about its argument: the name the model sends
    it under and, in ``field``, the merged ``Field`` (``field.is_required()`` is false when it
    gives a default or a default factory)."""

    argument_name: str
    field: FieldInfo

    @property
    def has_default(self) -> bool:
        return not self.field.is_required()


def read_argument_field(annotation: Any, *, parameter: str, where: str) -> ArgumentField | None:
    """The argument attributes of ``annotation``'s ``Field`` metadata; ``None`` when it has
    none. Raises ``ValueError`` for an alias the schema cannot name (an ``AliasPath`` picks a
    value out of another argument)."""
    if not any(_has_argument_attributes(item) for item in _metadata(annotation)):
        return None
    field = FieldInfo.from_annotation(annotation)
    return ArgumentField(argument_name=_argument_name(field, parameter, where), field=field)


def without_argument_attributes(annotation: Any) -> Any:
    """``annotation`` with its ``Field`` metadata stripped of the argument attributes, for
    generating the type's schema (the rest of the ``Field``, e.g. ``ge`` or ``description``,
    stays)."""
    metadata = _metadata(annotation)
    if not any(_has_argument_attributes(item) for item in metadata):
        return annotation
    stripped = tuple(_type_part(item) for item in metadata)
    return Annotated[(annotation.__origin__, *stripped)]


def _metadata(annotation: Any) -> tuple[Any, ...]:
    if typing.get_origin(annotation) is Annotated:
        return tuple(annotation.__metadata__)
    return ()


def _has_argument_attributes(item: Any) -> bool:
    return isinstance(item, FieldInfo) and any(
        getattr(item, name) is not unset for name, unset in _ARGUMENT_ATTRIBUTES
    )


def _type_part(item: Any) -> Any:
    if not _has_argument_attributes(item):
        return item
    # a copy: the user's Field stays as it is (outside a field only its attributes are read)
    part = copy.copy(item)
    for name, unset in _ARGUMENT_ATTRIBUTES:
        setattr(part, name, unset)
    return part


def _argument_name(field: FieldInfo, parameter: str, where: str) -> str:
    alias = field.validation_alias if field.validation_alias is not None else field.alias
    if alias is None or isinstance(alias, str):
        return alias or parameter
    # AliasChoices: validation accepts each choice; the schema names the first plain one, as
    # pydantic's own schema does
    choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
    for choice in choices:
        name = _plain_name(choice)
        if name is not None:
            return name
    raise ValueError(
        f"{where}: validation_alias={alias!r} reads the value from inside another argument, "
        "which the tool's schema cannot say; use a plain alias (a str)"
    )


def _plain_name(choice: str | AliasPath) -> str | None:
    if isinstance(choice, str):
        return choice
    path = choice.path
    return path[0] if len(path) == 1 and isinstance(path[0], str) else None
