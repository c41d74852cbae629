"""Pass pipelines: ``Pipeline``, ``Fixpoint`` and the one runner that owns everything around
the passes (XLA's ``HloPassPipeline`` + ``HloPassFix``).

A pass is any object with ``name`` (XLA's spelling) and ``run(module) -> bool``.  Passes
never print, verify, dump or time themselves; :class:`PipelineRunner` does, in one place:

- ``--xla_disable_all_hlo_passes``, ``--xla_disable_hlo_passes`` and
  ``--xla_enable_hlo_passes_only`` (XLA's newest filter grammar; with enable-only,
  sub-pipelines are still entered),
- the invariant checker (the verifier) at pipeline start and after every pass that changed
  the module; a failure is a :class:`PassError` ending in ``Failed after <pass>``,
- ``--verify-no-change``: a pass that reported no change must leave the module fingerprint
  unchanged,
- timing, per-pass statistics, the between-passes dump hook and a progress callback,
- an observer told before and after every leaf pass invocation (:class:`PassInvocation`:
  pipeline path, pass id, global and per-pipeline occurrence numbers as the filters count
  them, fixpoint iteration): ``hlo-opt ablate`` and ``bisect`` are built on it,
- compiler fuel (``--xla_fuel=PASS=N``, :mod:`hlo_opt.fuel`) for the whole run.

This module imports neither click nor rich.
"""
from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from .errors import HloError, PassError
from .flags import DebugOptions, matches_any, parse_pass_filter
from .fuel import FuelPool, fuel_scope
from .relaxed_gc import relaxed_gc

__all__ = [
    "DEFAULT_FIX_ITERATIONS", "PIPELINE_END", "PIPELINE_START", "Fixpoint", "PassInvocation",
    "Pipeline", "PipelineRunner", "ProgressEvent", "module_fingerprint", "run_pipeline",
]

PIPELINE_START = "pipeline-start"
PIPELINE_END = "pipeline-end"
DEFAULT_FIX_ITERATIONS = 25  # HloPassFix's kDefaultIterationLimit

log = logging.getLogger("hlo_opt.pipeline")


# ---- pipelines as data ------------------------------------------------------------------

def _as_item(item):
    """A pass object, a Pipeline or a Fixpoint.  Pass *names* are the app layer's business
    (``passes.registry.create_pass``): the core never imports ``passes/``."""
    if isinstance(item, (Pipeline, Fixpoint)):
        return item
    if isinstance(getattr(item, "name", None), str) and callable(getattr(item, "run", None)):
        return item
    raise TypeError(f"not a pass, Pipeline or Fixpoint: {item!r}")


class Pipeline:
    """A named sequence of passes, sub-pipelines and fixpoints (XLA's HloPassPipeline)."""

    is_pipeline = True

    def __init__(self, name: str, items: Iterable = ()):
        self.name = name
        self.items: list = []
        for item in items:
            self.add(item)

    def add(self, item):
        """Append a pass object, a Pipeline or a Fixpoint; returns it."""
        item = _as_item(item)
        self.items.append(item)
        return item

    def leaves(self, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
        """(pipeline path, pass) for every leaf pass, fixpoint bodies once."""
        path = path + (self.name,)
        for item in self.items:
            if isinstance(item, (Pipeline, Fixpoint)):
                yield from item.leaves(path)
            else:
                yield path, item

    def __repr__(self):
        return f"Pipeline({self.name!r}, {[getattr(i, 'name', i) for i in self.items]})"


class Fixpoint:
    """Run ``body`` until it reports no change, at most ``max_iterations`` times (HloPassFix).

    ``body`` is a Pipeline, a pass object, another Fixpoint, or a list of passes
    (wrapped in ``Pipeline(name or "fixpoint", ...)``).  Hitting the limit logs a warning and
    reports *no change*, as XLA does (unless a no-change check is active, where that would be
    a lie).  The fixpoint's name is its body's name, as for ``HloPassFix<Pass>``.
    """

    def __init__(self, body, max_iterations: int = DEFAULT_FIX_ITERATIONS,
                 name: str | None = None):
        if isinstance(body, (list, tuple)):
            body = Pipeline(name or "fixpoint", body)
        else:
            body = _as_item(body)
        if max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")
        self.body = body
        self.max_iterations = max_iterations

    @property
    def name(self) -> str:
        return self.body.name

    @property
    def is_pipeline(self) -> bool:
        return isinstance(self.body, Pipeline) or (isinstance(self.body, Fixpoint)
                                                   and self.body.is_pipeline)

    def leaves(self, path: tuple[str, ...] = ()):
        if isinstance(self.body, (Pipeline, Fixpoint)):
            yield from self.body.leaves(path)
        else:
            yield path, self.body

    def __repr__(self):
        return f"Fixpoint({self.body!r}, max_iterations={self.max_iterations})"


# ---- fingerprint ------------------------------------------------------------------------

def module_fingerprint(module) -> int:
    """A structural hash of everything printing would show except names: opcodes, shapes
    with layouts, operand wiring, attributes, payloads, called computations, control edges,
    roots, the module header.  Linear in the module size; stable within one process."""
    comp_index = {c: i for i, c in enumerate(module.computations)}
    parts: list = [tuple(module.header_attrs.items()),
                   comp_index.get(module.entry, -1)]
    for comp in module.computations:
        order = comp.post_order()
        index = {inst: i for i, inst in enumerate(order)}
        rows = []
        for inst in order:
            rows.append((inst.opcode, inst.shape, tuple(index[o] for o in inst.operands),
                         tuple(inst.attrs.items()), inst.payload,
                         tuple(comp_index.get(c, -1) for c in inst.called),
                         tuple(index.get(p, -1) for p in inst.control_predecessors)))
        parts.append((comp.is_entry, comp.execution_thread, index.get(comp.root, -1),
                      tuple(index.get(p, -1) for p in comp.parameters), hash(tuple(rows))))
    return hash(tuple(parts)) & 0xFFFFFFFFFFFFFFFF


# ---- the runner -------------------------------------------------------------------------

@dataclass(frozen=True)
class ProgressEvent:
    """Sent before each leaf pass runs.  ``total`` counts fixpoint bodies once, so
    ``index`` may exceed it when fixpoints iterate."""

    index: int
    total: int
    pipeline_path: tuple[str, ...]
    pass_name: str
    iteration: int


@dataclass(frozen=True)
class PassInvocation:
    """One run of a leaf pass, as the observer sees it.  ``global_occurrence`` and
    ``pipeline_occurrence`` are the numbers the ``name:N`` / ``pipeline/name:N`` filters
    match (a fixpoint's iterations share its item's numbers); ``index`` counts the leaf
    invocations of the runner from 0."""

    index: int
    pipeline_path: tuple[str, ...]
    pass_name: str
    pass_id: int
    global_occurrence: int
    pipeline_occurrence: int
    iteration: int
    pass_obj: object = field(default=None, compare=False, repr=False)

    @property
    def occurrence(self) -> str:
        """The filter entry that selects this invocation: ``pipeline/name:N``."""
        parent = self.pipeline_path[-1] if self.pipeline_path else ""
        return f"{parent}/{self.pass_name}:{self.pipeline_occurrence}"


def _default_verifier(module) -> None:
    from .api import verify
    verify(module)


class PipelineRunner:
    """Runs a :class:`Pipeline` on a module with XLA's pass-control flags and hooks.

    ``verifier``: a callable raising :class:`HloError` on a malformed module ("default" is
    :func:`hlo_opt.api.verify`, ``None`` disables checking).  ``dumper``: an object with
    ``between_passes(module, pipeline, after, before, changed) -> (step, files) | None``
    (see :class:`hlo_opt.dump.ModuleDumper`).  ``stats``: a
    :class:`hlo_opt.dump.stats.PassStats` or None.  ``progress``: called with a
    :class:`ProgressEvent` before each leaf pass.  ``observer``: an object with
    ``before_pass(invocation, module)`` and ``after_pass(invocation, module, changed)``
    (both optional), called around each leaf pass with a :class:`PassInvocation`.
    ``DebugOptions.xla_fuel`` gives passes their fuel (one pool for all ``run`` calls).

    Like XLA's per-module pass metadata, a runner numbers pass ids and counts global pass
    occurrences (for ``name:N`` and ``@ID`` filters) across all its ``run`` calls: use one
    runner per module.
    """

    def __init__(self, options: DebugOptions | None = None, *, verifier="default",
                 verify_no_change: bool = False, dumper=None, stats=None,
                 progress: Callable[[ProgressEvent], None] | None = None, observer=None):
        self.observer = observer
        self._before = getattr(observer, "before_pass", None)
        self._after = getattr(observer, "after_pass", None)
        self._item = (0, 0, 0)  # (global occurrence, pipeline occurrence, pass id) running
        self.fuel_pool: FuelPool | None = None
        self.verifier = _default_verifier if verifier == "default" else verifier
        self.dumper = dumper
        self.stats = stats
        self.progress = progress
        self._verify_no_change = verify_no_change
        self._global_occurrence: Counter = Counter()
        self._next_pass_id = 1
        self._leaf_index = 0
        self._total = 0
        self._last_record = None
        self._last_changed_record = None
        self._iteration = 0  # iteration of the innermost running fixpoint
        self._install = options is not None
        self.options: DebugOptions | None = None
        if options is not None:
            self._configure(options)

    def _configure(self, opts: DebugOptions) -> None:
        self.options = opts
        self._check_silent = self._verify_no_change or \
            opts.xla_unsupported_crash_on_hlo_pass_silent_hlo_change
        self._check_noop = opts.xla_unsupported_crash_on_hlo_pass_noop_change
        self._disable = parse_pass_filter(opts.xla_disable_hlo_passes,
                                          "xla_disable_hlo_passes")
        self._enable = parse_pass_filter(opts.xla_enable_hlo_passes_only,
                                         "xla_enable_hlo_passes_only")
        if self._disable and self._enable:
            raise PassError("Cannot set both --xla_disable_hlo_passes and "
                            "--xla_enable_hlo_passes_only.")
        self.fuel_pool = FuelPool(opts.xla_fuel) if opts.xla_fuel else None

    # -- entry point --
    def run(self, pipeline, module) -> bool:
        """Run ``pipeline`` (a Pipeline, Fixpoint or single pass) on ``module``.

        The options travel with the module (``module.config``, as XLA's
        ``HloModuleConfig``): a runner given ``options`` installs them in the module's
        config, which is what its passes read; a runner given none runs with the
        module's own."""
        if self._install:
            if module.config.debug_options is not self.options:
                module.config = module.config.replace(debug_options=self.options)
        elif self.options is None:
            self._configure(module.config.debug_options)
        if not isinstance(pipeline, Pipeline):
            pipeline = Pipeline(getattr(pipeline, "name", "pipeline"), [pipeline])
        self._total = sum(1 for _ in pipeline.leaves())
        with relaxed_gc(), fuel_scope(self.fuel_pool):
            changed = self._run_pipeline(pipeline, module, (), top=True)
        if self.fuel_pool is not None and self.fuel_pool.unused():
            log.warning("--xla_fuel names pass(es) that never asked for fuel (not run, or "
                        "they do not support fuel): %s", ", ".join(self.fuel_pool.unused()))
        return changed

    # -- pipelines --
    def _run_pipeline(self, pipeline: Pipeline, module, parent: tuple[str, ...],
                      top: bool = False) -> bool:
        if self.options.xla_disable_all_hlo_passes:
            return False
        path = parent + (pipeline.name,)
        if top:
            self._verify(module, PIPELINE_START)
        self._next_pass_id += 1  # the pipeline-start pseudo-pass has an id, as in XLA
        items = pipeline.items
        self._dump(module, pipeline.name, PIPELINE_START,
                   items[0].name if items else PIPELINE_END, None, None)
        filtering = bool(self._disable or self._enable)
        pipeline_occurrence: Counter = Counter()
        changed = False
        for i, item in enumerate(items):
            pass_id = self._next_pass_id
            self._next_pass_id += 1
            g = self._global_occurrence[item.name]
            self._global_occurrence[item.name] += 1
            p = pipeline_occurrence[item.name]
            pipeline_occurrence[item.name] += 1
            if filtering:
                skip = None
                if self._disable and matches_any(self._disable, list(path), item.name, g, p,
                                                 pass_id):
                    skip = "disabled by --xla_disable_hlo_passes"
                elif self._enable and not item_is_pipeline(item) and not matches_any(
                        self._enable, list(path), item.name, g, p, pass_id):
                    skip = "not enabled by --xla_enable_hlo_passes_only"
                if skip:
                    log.debug("skipping HLO pass %s: %s", item.name, skip)
                    if self.stats is not None:
                        self.stats.skip(path, item.name, skip)
                    continue
            self._last_record = self._last_changed_record = None
            self._item = (g, p, pass_id)
            item_changed = self._run_item(item, module, path)
            # a fixpoint's dump belongs to the iteration that changed the module, not to
            # the last (no-op) one
            record = (self._last_changed_record or self._last_record) \
                if not item_is_pipeline(item) else None
            nxt = items[i + 1].name if i + 1 < len(items) else PIPELINE_END
            self._dump(module, pipeline.name, item.name, nxt, item_changed, record)
            changed |= item_changed
        return changed

    def _run_item(self, item, module, path: tuple[str, ...]) -> bool:
        if isinstance(item, Pipeline):
            return self._run_pipeline(item, module, path)
        if isinstance(item, Fixpoint):
            return self._run_fixpoint(item, module, path)
        return self._run_leaf(item, module, path)

    def _run_fixpoint(self, fix: Fixpoint, module, path: tuple[str, ...]) -> bool:
        opts = self.options
        seen: set[int] | None = set() if opts.xla_hlo_pass_fix_detect_cycles else None
        changed_any = False
        iteration = 0
        outer_iteration = self._iteration
        while True:
            if seen is not None:
                fp = module_fingerprint(module)
                if fp in seen:
                    log.warning("Cycle detected when running %s on iteration %d; "
                                "fingerprint: %016x", fix.name, iteration, fp)
                else:
                    seen.add(fp)
            self._iteration = iteration
            try:
                changed = self._run_item(fix.body, module, path)
            finally:
                self._iteration = outer_iteration
            changed_any |= changed
            iteration += 1
            if not changed:
                break
            if iteration == fix.max_iterations:
                if opts.xla_unsupported_crash_on_hlo_pass_fix_max_iterations:
                    raise PassError(f"Unexpectedly high number of iterations "
                                    f"{fix.max_iterations} in HLO pass '{fix.name}' for "
                                    f"module '{module.name}'")
                log.warning("Unexpectedly high number of iterations (%d) in HLO pass '%s' "
                            "for module '%s'. Exiting fixed point loop.",
                            fix.max_iterations, fix.name, module.name)
                if not self._check_silent:
                    changed_any = False  # XLA clears `changed`: the fixpoint reports none
                break
        return changed_any

    # -- leaf passes --
    def _run_leaf(self, p, module, path: tuple[str, ...]) -> bool:
        iteration = self._iteration
        self._leaf_index += 1
        if self.progress is not None:
            self.progress(ProgressEvent(self._leaf_index, self._total, path, p.name, iteration))
        invocation = None
        if self.observer is not None:
            g, po, pass_id = self._item
            invocation = PassInvocation(self._leaf_index - 1, path, p.name, pass_id, g, po,
                                        iteration, p)
            if self._before is not None:
                self._before(invocation, module)
        fingerprint = self._check_silent or self._check_noop
        before = module_fingerprint(module) if fingerprint else 0
        snapshot = self.stats.begin(module) if self.stats is not None else None
        t0 = time.perf_counter()
        try:
            changed = bool(p.run(module))
        except HloError:
            raise
        except Exception as e:  # an internal bug: keep the traceback, name the pass
            e.add_note(f"while running HLO pass '{p.name}' in pipeline '{'/'.join(path)}' "
                       f"on module '{module.name}'")
            raise
        wall_ms = (time.perf_counter() - t0) * 1000.0
        if fingerprint:
            after = module_fingerprint(module)
            if not changed and after != before and self._check_silent:
                raise PassError(
                    f"Pass '{p.name}' in pipeline '{path[-1]}' reported that it did not "
                    f"change the HLO but the module fingerprint changed from {before:016x} "
                    f"to {after:016x} (--verify-no-change)")
            if changed and after == before and self._check_noop:
                raise PassError(
                    f"Pass '{p.name}' in pipeline '{path[-1]}' reported that it changed the "
                    f"HLO but the module fingerprint did not change")
        if self.stats is not None:
            self._last_record = self.stats.end(snapshot, module, path, p.name, iteration,
                                               changed, wall_ms)
            if changed:
                self._last_changed_record = self._last_record
        if changed:
            self._verify(module, p.name)
        if self._after is not None:
            self._after(invocation, module, changed)
        return changed

    # -- hooks --
    def _verify(self, module, after: str) -> None:
        if self.verifier is None:
            return
        try:
            self.verifier(module)
        except HloError as e:
            raise PassError(f"{e}\n\nFailed after {after}") from e

    def _dump(self, module, pipeline_name: str, after: str, before: str, changed,
              record) -> None:
        if self.dumper is None:
            return
        result = self.dumper.between_passes(module, pipeline_name, after, before, changed)
        if result is not None and self.stats is not None:
            step, files = result
            self.stats.note_dump(step, pipeline_name, after, before, files, record)


def item_is_pipeline(item) -> bool:
    return bool(getattr(item, "is_pipeline", False))


def run_pipeline(pipeline, module, options: DebugOptions | None = None, **kwargs) -> bool:
    """Convenience: ``PipelineRunner(options, **kwargs).run(pipeline, module)``."""
    return PipelineRunner(options, **kwargs).run(pipeline, module)
