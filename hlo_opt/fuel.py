"""Compiler fuel: XLA's ``--xla_fuel=PASS=N`` (``ConsumeFuel`` in debug_options_flags).

Each time a pass that supports fuel is about to make one rewrite it asks for a unit of
its fuel; once the fuel is spent it makes no more rewrites.  ``--xla_fuel=algsimp=3``
therefore lets ``algsimp`` make exactly its first three rewrites, which is how a bad
rewrite is narrowed down (``hlo-opt bisect`` does it automatically).  Passes without a
limit always get fuel, at the price of one dictionary lookup per ask.

A pool is active for a ``with fuel_scope(pool):`` block (the pipeline runner opens one
for ``DebugOptions.xla_fuel``); passes call :func:`consume_fuel` (or :func:`has_fuel`
before an in-place edit that cannot be undone, then :func:`consume_fuel` once it
happened).  The pool also counts what it granted, so a pass's rewrites can be counted by
giving it unlimited-but-tracked fuel (:func:`counting_pool`).
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
from collections import Counter
from typing import Callable, Iterator, Mapping

__all__ = ["FuelPool", "consume_fuel", "counting_pool", "current_pool", "fuel_scope",
           "has_fuel", "limited"]

log = logging.getLogger("hlo_opt.fuel")

# Enough for any module: "unlimited, but count what is granted".
UNLIMITED = 1 << 62


class FuelPool:
    """Fuel per pass name (XLA's fuel pool).  ``consumed[name]`` counts granted units,
    ``descriptions[name]`` what each granted unit did (when the pass says), in order."""

    def __init__(self, fuel: Mapping[str, int], describe: bool = False):
        self.initial = {str(k): int(v) for k, v in fuel.items()}
        self.remaining = dict(self.initial)
        self.consumed: Counter = Counter()
        self.asked: set[str] = set()  # XLA's fuel_ever_consumed
        self.describe = describe
        self.descriptions: dict[str, list[str]] = {}
        self.ran_out: dict[str, str] = {}  # name -> what the first refused unit would do

    def limited(self, name: str) -> bool:
        return name in self.remaining

    def has_fuel(self, name: str) -> bool:
        r = self.remaining.get(name)
        if r is None:
            return True
        self.asked.add(name)
        return r > 0

    def consume(self, name: str, what: "str | Callable[[], str] | None" = None) -> bool:
        r = self.remaining.get(name)
        if r is None:
            return True
        self.asked.add(name)
        self.remaining[name] = r - 1
        if r > 0:
            self.consumed[name] += 1
            if self.describe and what is not None:
                self.descriptions.setdefault(name, []).append(
                    what() if callable(what) else what)
            return True
        if r == 0:  # just ran out: say what would have happened (XLA logs it)
            text = (what() if callable(what) else what) if what is not None else ""
            self.ran_out[name] = text
            log.info('Out of fuel for "%s"%s', name, f": {text}" if text else "")
        return False

    def unused(self) -> list[str]:
        """Passes given fuel that never asked for any (XLA warns about them)."""
        return sorted(n for n in self.initial if n not in self.asked)


_POOL: contextvars.ContextVar = contextvars.ContextVar("hlo_opt_fuel_pool", default=None)


def current_pool() -> FuelPool | None:
    return _POOL.get()


@contextlib.contextmanager
def fuel_scope(pool: "FuelPool | Mapping[str, int] | None") -> Iterator[FuelPool | None]:
    """Make ``pool`` (or a new pool for a mapping) the active one for the block; None
    leaves whatever is active."""
    if pool is None:
        yield _POOL.get()
        return
    if not isinstance(pool, FuelPool):
        pool = FuelPool(pool)
    token = _POOL.set(pool)
    try:
        yield pool
    finally:
        _POOL.reset(token)


def counting_pool(name: str, fuel: int = UNLIMITED, describe: bool = True) -> FuelPool:
    """A pool that lets ``name`` make ``fuel`` rewrites (all, by default) and records them."""
    return FuelPool({name: fuel}, describe=describe)


def limited(name: str) -> bool:
    """Whether ``name`` runs with a fuel limit now (hot loops ask once, then skip the
    per-rewrite calls when it does not)."""
    pool = _POOL.get()
    return pool is not None and name in pool.remaining


def has_fuel(name: str) -> bool:
    """Whether ``name`` may make one more rewrite (asks without consuming)."""
    pool = _POOL.get()
    return pool is None or pool.has_fuel(name)


def consume_fuel(name: str, what: "str | Callable[[], str] | None" = None) -> bool:
    """XLA's ``ConsumeFuel``: True when ``name`` may make this rewrite (and counts it).
    ``what`` (text or a function returning it) describes the rewrite, for reports."""
    pool = _POOL.get()
    return True if pool is None else pool.consume(name, what)
