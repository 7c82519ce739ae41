"""Swapping modules inside a model: the one tree walk every fast path that replaces modules uses."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn


def replace_modules(
    module: nn.Module, match: Callable[[nn.Module], bool], make: Callable[[nn.Module], nn.Module]
) -> int:
    """Replace every child (at any depth) of `module` for which `match` holds by `make(child)`, in place, without
    looking inside replaced children; returns how many were replaced."""
    replaced = 0
    for name, child in module.named_children():
        if match(child):
            setattr(module, name, make(child))
            replaced += 1
        else:
            replaced += replace_modules(child, match, make)
    return replaced


def is_plain_linear(module: nn.Module) -> bool:
    """An `nn.Linear` itself, not a subclass (not one already swapped)."""
    return type(module) is nn.Linear


__all__ = ["is_plain_linear", "replace_modules"]
