"""Running passes the way ``hlo-opt`` does: the library entry points behind the CLI.

``optimize(module, options, passes="dce,cse")`` runs the passes once each, in order, as
XLA's ``HloPassPipeline "transforms_pipeline"``; ``pipeline="optimization"`` runs a named
pipeline from ``passes/pipelines.py``.  The options become the module's
``config.debug_options`` (what its passes read).

This is the app layer's entry point (with the CLI and ``commands/``): it connects pass
and pipeline names to ``passes/``; the core below it never imports ``passes/``.

Dumps (``--xla_dump_to`` and friends), per-pass
statistics, verification and ``--verify-no-change`` are all wired here; nothing prints
except the optional plain-text summary.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Iterable

from passes.pipelines import build_pipeline as _build_named
from passes.pipelines import pipeline_names as _pipeline_names
from passes.registry import create_pass
from passes.registry import pass_names as _pass_names

from .errors import PassError
from .fileutil import write_output
from .flags import DebugOptions
from .ir.config import HloModuleConfig
from .pipeline import Pipeline, PipelineRunner, ProgressEvent

__all__ = ["TRANSFORMS_PIPELINE", "PipelineFactory", "build_pipeline", "optimize",
           "pass_names", "pipeline_names", "write_stats_json"]

TRANSFORMS_PIPELINE = "transforms_pipeline"


def pass_names() -> list[str]:
    """Registered pass names, sorted (``hlo-opt --list-passes`` joins them with commas)."""
    return _pass_names()


def pipeline_names() -> list[str]:
    return _pipeline_names()


def build_pipeline(passes: "str | Iterable[str] | None" = None, pipeline: str | None = None,
                   config: HloModuleConfig | None = None):
    """``--passes a,b``: ``Pipeline("transforms_pipeline", [a, b])`` (each once, in order);
    ``--pipeline NAME``: the named pipeline, built for ``config``.  Unknown names raise
    :class:`PassError`."""
    if passes is not None and pipeline is not None:
        raise PassError("--passes and --pipeline cannot be used together")
    if passes is not None:
        names = passes.split(",") if isinstance(passes, str) else list(passes)
        return Pipeline(TRANSFORMS_PIPELINE, [create_pass(n) for n in names])
    if pipeline is not None:
        return _build_named(pipeline, config)
    raise PassError("nothing to run: give --passes or --pipeline")


class PipelineFactory:
    """Builds fresh pipelines from ``--passes`` / ``--pipeline`` for the libraries that run
    a pipeline many times (:mod:`hlo_opt.triage`: ablate, bisect), in this process or in
    worker processes (it pickles as its two strings).  Unknown names fail at once."""

    def __init__(self, passes: "str | None" = None, pipeline: str | None = None):
        if isinstance(passes, (list, tuple)):
            passes = ",".join(passes)
        self.passes = passes
        self.pipeline = pipeline
        build_pipeline(passes, pipeline)  # raises PassError for unknown names

    @property
    def label(self) -> str:
        """The pipeline's name (``transforms_pipeline`` for ``--passes``)."""
        return self.pipeline if self.pipeline is not None else TRANSFORMS_PIPELINE

    def __call__(self, options: DebugOptions | None = None):
        """A new pipeline built for ``options`` (the runner installs the same options in
        the module's config, which is what the passes read)."""
        return build_pipeline(self.passes, self.pipeline, config_for(options))

    def single(self, name: str, options: DebugOptions | None = None):
        """``--passes NAME``: the one registered pass (for reproducers)."""
        return build_pipeline(name, None, config_for(options))

    def __repr__(self):
        return f"PipelineFactory(passes={self.passes!r}, pipeline={self.pipeline!r})"


def config_for(options: DebugOptions | None) -> HloModuleConfig:
    """The module config a pipeline is built for: ``options`` on the default device."""
    return HloModuleConfig(debug_options=options if options is not None else DebugOptions())


def optimize(module, options: DebugOptions | None = None, passes=None, pipeline=None,
             verify_no_change: bool = False, stats_path: str | None = None,
             summary: bool = False, *, module_id: int = 0,
             progress: Callable[[ProgressEvent], None] | None = None,
             on_stats: Callable | None = None, dump_directory=None,
             verifier="default", autotune=None, observer=None):
    """Run ``passes`` (comma list or names) or the named ``pipeline`` on ``module`` in place;
    returns the module.

    Dumps follow the ``xla_dump_*`` options (``module_id`` numbers the files; share one
    ``dump_directory`` across modules of a run).  Statistics are collected when asked for
    (``stats_path``, ``summary``, ``on_stats``) or when dumping: then
    ``module_%04d.<name>.pass_stats.json`` is written next to the dumps.  ``on_stats``
    receives the :class:`~hlo_opt.dump.stats.PassStats`; without it, ``summary`` prints a
    plain-text table on stderr.  ``stats_path`` writes this module's JSON (``-``: stderr).
    ``autotune``: an :class:`~hlo_opt.autotune.AutotuneSession` the algorithm pickers use
    (none: they change nothing); its counters go into the stats, and its results file
    (``--xla_gpu_dump_autotune_results_to``) is rewritten after the run.
    ``observer`` is told about every pass invocation (see :class:`PipelineRunner`).
    """
    from .dump.naming import (AFTER_OPTIMIZATION, AFTER_OPTIMIZATIONS, BEFORE_OPTIMIZATION,
                              BEFORE_OPTIMIZATIONS)
    from .dump.stats import PassStats, format_summary_text
    from .dump.writer import DumpConfig, DumpDirectory, ModuleDumper

    options = options if options is not None else DebugOptions()
    module.config = module.config.replace(debug_options=options,  # what the passes read
                                          autotune=autotune)
    if getattr(options, "xla_gpu_target_config_filename", ""):  # XLA's deviceless target
        from .backends.cuda.target import read_specs
        module.config = module.config.replace(
            device=read_specs(options.xla_gpu_target_config_filename))
    pipe = build_pipeline(passes, pipeline, module.config)
    if dump_directory is None:
        dump_directory = DumpDirectory(DumpConfig.from_options(options))
    dumper = ModuleDumper(dump_directory, module_id, options)
    dumping = dumper.enabled(module)
    want_stats = bool(stats_path or summary or on_stats or dumping)
    stats = PassStats(module.name, module_id, pipe.name) if want_stats else None
    singular = passes is not None
    dumper.dump_module(module, BEFORE_OPTIMIZATION if singular else BEFORE_OPTIMIZATIONS)
    runner = PipelineRunner(options, verifier=verifier, verify_no_change=verify_no_change,
                            dumper=dumper if dumping else None, stats=stats,
                            progress=progress, observer=observer)
    t0 = time.perf_counter()
    tuned_before = autotune.stats.to_json() if autotune is not None else None
    runner.run(pipe, module)
    if autotune is not None:
        autotune.finish()
    if stats is not None:
        stats.total_ms = (time.perf_counter() - t0) * 1000.0
        if autotune is not None:
            stats.autotune = _stats_delta(tuned_before, autotune.stats.to_json())
        stats.module_name = module.name
    dumper.dump_module(module, AFTER_OPTIMIZATION if singular else AFTER_OPTIMIZATIONS)
    if stats is not None:
        if dumping:
            dumper.write_stats(module, stats.to_json_text())
        if stats_path:
            write_stats_json(stats_path, [stats])
        if on_stats is not None:
            on_stats(stats)
        elif summary:
            sys.stderr.write(format_summary_text(stats))
    return module


def _stats_delta(before: dict, after: dict) -> dict:
    """This module's share of a session's counters (a session may span modules)."""
    out = dict(after)
    for k in ("instructions", "tuned", "cache_hits", "measurements"):
        out[k] = after[k] - before[k]
    out["tuning_ms"] = round(after["tuning_ms"] - before["tuning_ms"], 3)
    out["failed_candidates"] = {k: v - before["failed_candidates"].get(k, 0)
                                for k, v in after["failed_candidates"].items()
                                if v - before["failed_candidates"].get(k, 0)}
    out["warnings"] = after["warnings"][len(before["warnings"]):]
    return out


def write_stats_json(path: str, stats_list: list) -> None:
    """One module: its JSON object; several: a JSON list of them.  ``-`` writes to stderr."""
    import json
    docs = [s.to_json() for s in stats_list]
    text = json.dumps(docs[0] if len(docs) == 1 else docs, indent=1) + "\n"
    if path == "-":
        sys.stderr.write(text)
    else:
        write_output(path, text)
