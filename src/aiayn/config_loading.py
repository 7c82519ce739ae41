"""Reading configurations: YAML files, `--set FIELD=VALUE` strings, config.json and keyword arguments.

One coercion, `coerce(value, hint, name)`, driven by the dataclasses' type hints (int, float, bool, str,
Literal[...], X | None, tuple[str, ...]), checks every value on its way into a config dataclass:

- typed values (YAML, JSON, Python) must already have the field's type; an int is accepted for a float;
- with `text=True` a string is command-line text and is parsed to the type: "3", "1e5" (int), "0.5",
  "true"/"off" (bool), "none"/"null" (a `| None` field), "a,b" (tuple).

Floats must be finite. Errors are `ConfigError`s that name `section.field` and suggest the closest known name.
The dataclasses themselves live in `aiayn.config`, which builds on this module (it imports nothing from aiayn).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

T = TypeVar("T")
_TRUE, _FALSE, _NONE = ("1", "true", "yes", "on"), ("0", "false", "no", "off"), ("none", "null")


class ConfigError(ValueError):
    """A configuration field is unknown or has an invalid value."""


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The resolved type hint of every field of a config dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def type_name(hint: Any) -> str:
    """How an error message names a type: `int or null`, `one of 'a', 'b'`."""
    if _is_union(hint):
        return " or ".join(type_name(option) for option in typing.get_args(hint))
    if typing.get_origin(hint) is Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    if typing.get_origin(hint) is tuple:
        return f"a list of {type_name(typing.get_args(hint)[0])}"
    return "null" if hint is type(None) else str(getattr(hint, "__name__", hint))


def _is_union(hint: Any) -> bool:
    return isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union


def coerce(value: Any, hint: Any, name: str, text: bool = False) -> Any:
    """`value` as a value of type `hint` for field `name` (`section.field`), or a `ConfigError` naming it.

    With `text`, a string is parsed as command-line text; otherwise values must already have the type.
    """
    options = typing.get_args(hint) if _is_union(hint) else (hint,)
    null_text = text and isinstance(value, str) and value.strip().lower() in _NONE
    if type(None) in options and (value is None or null_text):
        return None
    parsing = text and isinstance(value, str)
    for option in options:
        try:
            result = _coerce_one(value, option, parsing)
        except (TypeError, ValueError):
            continue
        if isinstance(result, float) and not math.isfinite(result):
            raise ConfigError(f"{name}: must be a finite number, got {value!r}")
        return result
    if parsing and any(option in (int, float, bool) for option in options):
        raise ConfigError(f"{name}: cannot parse {value!r} as {type_name(hint)}")
    raise ConfigError(f"{name}: expected {type_name(hint)}, got {value!r}")


def _coerce_one(value: Any, kind: Any, parsing: bool) -> Any:
    """One member of a union; raises TypeError/ValueError when `value` is not of (or parseable as) `kind`."""
    origin = typing.get_origin(kind)
    if origin is Literal:
        for choice in typing.get_args(kind):
            if (type(value) is type(choice) and value == choice) or (parsing and value == str(choice)):
                return choice
    elif origin is tuple:
        (item, *rest) = typing.get_args(kind)
        if rest not in ([], [Ellipsis]):
            raise TypeError(f"unsupported type {kind}")
        items = [part.strip() for part in value.split(",") if part.strip()] if parsing else value
        if isinstance(items, (list, tuple)):
            return tuple(_coerce_one(part, item, parsing) for part in items)
    elif kind is bool:
        if isinstance(value, bool):
            return value
        if parsing and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
    elif kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if parsing:
            try:
                return int(value)
            except ValueError:
                number = float(value)  # "1e5" is an int too, "1.5" is not
                if number.is_integer():
                    return int(number)
    elif kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if parsing:
            return float(value)
    elif kind is str:
        if isinstance(value, str):
            return value
        if isinstance(value, os.PathLike) and not parsing:
            return os.fspath(value)
    elif isinstance(kind, type) and isinstance(value, kind):
        return value
    raise TypeError(f"not a {kind}")


def check_choices(config: Any, section: str) -> None:
    """For `__post_init__`: every `Literal[...]` field of a dataclass holds one of its choices."""
    for key, hint in field_types(type(config)).items():
        if typing.get_origin(hint) is Literal and getattr(config, key) not in typing.get_args(hint):
            raise ConfigError(f"{section}.{key}: expected {type_name(hint)}, got {getattr(config, key)!r}")


def check_finite(config: Any, section: str) -> None:
    """For `__post_init__`: every float field of a dataclass holds a finite number (the Python API path; the
    YAML and command-line paths are already checked by `coerce`)."""
    for key, hint in field_types(type(config)).items():
        value = getattr(config, key)
        options = typing.get_args(hint) if _is_union(hint) else (hint,)
        if float in options and value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{section}.{key}: must be a finite number, got {value!r}")


def suggest(name: str, known: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def check_known(names: Iterable[str], known: Iterable[str], section: str) -> None:
    """Raise `ConfigError` for the first of `names` that is not a known field of `section`."""
    known = list(known)
    for key in names:
        if key not in known:
            raise ConfigError(f"unknown field {section}.{key}{suggest(key, known)}; known fields: {', '.join(known)}")


def coerce_fields(cls: type, values: Mapping[str, Any], section: str, text: bool = False) -> dict[str, Any]:
    """Each value coerced to its field's type; unknown fields raise `ConfigError`."""
    hints = field_types(cls)
    check_known(values, hints, section)
    return {key: coerce(value, hints[key], f"{section}.{key}", text) for key, value in values.items()}


def from_dict(cls: type[T], data: Mapping[str, Any], section: str, text: bool = False) -> T:
    """Build a config dataclass from a mapping of typed values (YAML, JSON), naming any bad field."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{section}: expected a mapping, got {type(data).__name__}")
    try:
        return cls(**coerce_fields(cls, data, section, text))
    except TypeError as error:
        raise ConfigError(f"{section}: {error}") from None


def with_overrides(config: T, overrides: Mapping[str, Any], section: str, text: bool = True) -> T:
    """A copy of a config dataclass with fields replaced; strings are parsed as command-line text unless
    `text=False`. Unknown fields and bad values raise `ConfigError`."""
    return dataclasses.replace(config, **coerce_fields(type(config), overrides, section, text))  # type: ignore[type-var]


def parse_assignments(items: Iterable[str], what: str = "--set") -> dict[str, str]:
    """["FIELD=VALUE", ...] -> {"FIELD": "VALUE"}; the values stay text for `with_overrides` to parse."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} expects FIELD=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def parse_sets(items: Iterable[str], sections: Iterable[str]) -> dict[str, dict[str, str]]:
    """["train.max_updates=3", ...] -> {"train": {"max_updates": "3"}}; malformed items raise ConfigError."""
    sections = list(sections)
    by_section: dict[str, dict[str, str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise ConfigError(f"--set expects section.field=value, got {item!r}")
        if section not in sections:
            raise ConfigError(f"--set {item}: unknown section {section!r}; sections: {', '.join(sections)}")
        by_section.setdefault(section, {})[name] = value
    return by_section


def split_sections(
    document: Any, sections: Iterable[str], source: str, extra: Mapping[str, Iterable[str]] | None = None
) -> dict[str, dict[str, Any]]:
    """A parsed YAML document -> {section: {field: value}}; unknown sections raise `ConfigError` naming
    `source`. `extra` lists keys a section may hold besides its fields (checked by the caller)."""
    sections = list(sections)
    if document is None:
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(f"{source}: expected a mapping with sections {', '.join(sections)}")
    unknown = sorted(set(document) - set(sections))
    if unknown:
        hint = suggest(unknown[0], sections)
        raise ConfigError(f"{source}: unknown section(s) {', '.join(unknown)}{hint}; sections: {', '.join(sections)}")
    out = {}
    for name in sections:
        raw = document.get(name)
        if not isinstance(raw, (Mapping, type(None))):
            raise ConfigError(f"{source}: section {name} must be a mapping of fields, got {type(raw).__name__}")
        out[name] = dict(raw or {})
    return out


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML document of a file; a missing or malformed file is a `ConfigError` naming it."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None


def dump_yaml(document: Mapping[str, Any]) -> str:
    """YAML text in the document's own key order (what `read_yaml` reads back equal)."""
    import yaml

    return yaml.safe_dump(dict(document), sort_keys=False)


__all__ = [
    "ConfigError",
    "check_choices",
    "check_finite",
    "check_known",
    "coerce",
    "coerce_fields",
    "dump_yaml",
    "field_types",
    "from_dict",
    "parse_assignments",
    "parse_sets",
    "read_yaml",
    "split_sections",
    "suggest",
    "type_name",
    "with_overrides",
]
