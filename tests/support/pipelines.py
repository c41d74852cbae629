"""Pipelines of pass names for tests: the core's Pipeline takes pass objects only; names
are resolved here through the registry (the app layer's job in the product)."""
from __future__ import annotations

from hlo_opt.pipeline import Fixpoint, Pipeline
from passes.registry import create_pass


def as_pass(item):
    """A pass object for a registered name, ``(name, kwargs)`` or ``[name, kwargs]``;
    pass objects, Pipelines and Fixpoints as they are."""
    if isinstance(item, str):
        return create_pass(item)
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
        return create_pass(item[0], **item[1])
    return item


def pipeline(name: str, items) -> Pipeline:
    """``Pipeline(name, items)`` with pass names (a comma list or a list) resolved."""
    if isinstance(items, (Pipeline, Fixpoint)):
        return items if isinstance(items, Pipeline) else Pipeline(name, [items])
    if isinstance(items, str):
        items = items.split(",")
    return Pipeline(name, [as_pass(i) for i in items])
