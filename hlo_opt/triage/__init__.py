"""Which pass matters, and which pass broke it: ``hlo-opt ablate`` and ``hlo-opt bisect``.

The library under the two commands; it imports neither ``passes/`` nor click nor rich.
Pipelines come from a *factory* the caller supplies: a picklable callable
``factory(options) -> Pipeline`` (``hlo_opt.passes_api.PipelineFactory`` in the CLI; any
top-level function or object in tests), so that worker processes and Ray tasks can
build the same pipeline.

- :mod:`.invocations`: the observer that records every pass invocation (and snapshots).
- :mod:`.measure`: compile and run a module on a backend, time it, count kernels/bytes.
- :mod:`.ablate`: the sweep (baseline + one row per pass or occurrence disabled).
- :mod:`.executors`: serial, local processes (``--jobs``) and Ray (``--ray``).
- :mod:`.report`: the JSON document (its shape is a public interface) and resuming.
- :mod:`.plot`: the bar chart (matplotlib, an optional extra).
- :mod:`.bisect`: first failing pass occurrence, then the first failing rewrite (fuel).
"""
