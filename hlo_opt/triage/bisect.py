"""``hlo-opt bisect``: the first pass occurrence that breaks a module, then the first
single rewrite inside it.

1. The unoptimized module runs on the reference backend: its outputs on seeded inputs are
   the truth.
2. The pipeline runs once, with an observer keeping the module text after every pass
   invocation that changed it (the snapshots a dump would write).  A pass that raises, or
   after which the verifier fails, is the culprit at once.
3. Otherwise snapshots are checked (verifier, compile, run, compare within the error
   bounds) by binary search between the input (good) and the final module: the first
   bad snapshot names the invocation, ``pipeline/name:N``.  No prefix is optimized twice;
   a check only compiles and runs a snapshot.
4. Inside that invocation, for passes that take ``--xla_fuel`` (they count their
   rewrites), the pass is re-run on the snapshot before it with fuel k: a binary search
   over k finds the first rewrite after which the module is bad.  Its structural diff
   (``hlo-opt diff``) and a reproducer (the module before the invocation, and the
   ``--passes``/``--xla_fuel`` line that makes the rewrite) complete the report.

Binary search assumes a module stays bad once broken, as any bisection does.
"""
from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field

from ..errors import HloError, PassError
from ..flags import DebugOptions
from ..fuel import UNLIMITED, FuelPool, fuel_scope
from ..pipeline import PassInvocation, PipelineRunner
from .invocations import InvocationLog

__all__ = ["BisectSettings", "BisectResult", "Check", "RewriteCulprit", "bisect",
           "reproducer_text", "result_document"]


@dataclass(frozen=True)
class BisectSettings:
    backend: str = "interpreter"
    reference_backend: str | None = None  # None: the same backend, unoptimized module
    seed: int = 42
    abs_bound: float = 1e-3
    rel_bound: float = 1e-3


@dataclass(frozen=True)
class Check:
    """The verdict on one module: ``kind`` is ok, verifier, pass (it raised), compile,
    run or wrong_result."""

    kind: str
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


@dataclass
class RewriteCulprit:
    index: int  # 1-based: the k-th rewrite of the invocation
    total: int  # rewrites the invocation makes
    description: str
    failure: Check
    diff_text: str


@dataclass
class BisectResult:
    found: bool
    invocations: int = 0  # pass invocations in the whole pipeline run
    changed: int = 0  # of which changed the module
    checks: int = 0  # modules compiled and run by the search
    culprit: PassInvocation | None = None
    failure: Check | None = None
    before_text: str = field(default="", repr=False)  # the module just before the culprit
    pass_diff: str = field(default="", repr=False)  # the culprit invocation's whole diff
    rewrite: RewriteCulprit | None = None
    rewrite_note: str = ""  # why the rewrite was not narrowed down, if it was not
    reproducer_command: str = ""
    reproduces: bool | None = None  # does the command reproduce the failure?

    @property
    def occurrence(self) -> str:
        return self.culprit.occurrence if self.culprit else ""


# ---- checking a module ---------------------------------------------------------------------

class Checker:
    """Verifies, compiles, runs and compares modules against reference outputs."""

    def __init__(self, settings: BisectSettings, args, reference_outputs, shapes):
        self.settings = settings
        self.args = args
        self.reference = reference_outputs
        self.shapes = shapes
        self.count = 0

    def __call__(self, module) -> Check:
        from ..api import verify
        from ..backends import compile as compile_module
        from ..backends.interpreter.literals import compare_results
        self.count += 1
        s = self.settings
        try:
            verify(module)
        except HloError as e:
            return Check("verifier", str(e))
        try:
            executable = compile_module(module, s.backend)
        except Exception as e:  # noqa: BLE001 - a verdict, not a crash of bisect
            return Check("compile", _message(e))
        try:
            outputs = executable.run(self.args)
        except Exception as e:  # noqa: BLE001
            return Check("run", _message(e))
        try:
            rows = compare_results(outputs, self.reference, self.shapes, s.abs_bound,
                                   s.rel_bound)
        except HloError as e:
            return Check("wrong_result", str(e))
        bad = [r for r in rows if not r.ok]
        if not bad:
            return Check("ok")
        return Check("wrong_result", "; ".join(
            f"out{r.index} {r.shape}: {r.mismatches} element(s) beyond the bounds (max abs "
            f"error {r.max_abs:.3g}, max rel error {r.max_rel:.3g})" for r in bad))


def _message(e: BaseException) -> str:
    if isinstance(e, HloError):
        return str(e)
    notes = "; ".join(getattr(e, "__notes__", ()) or ())
    return f"internal error: {type(e).__name__}: {e}" + (f" ({notes})" if notes else "")


def _parse(text: str, filename: str = "<snapshot>", options: DebugOptions | None = None):
    """Parse a module (a snapshot) with ``options`` in its config, as the run had them."""
    from ..text.parser import parse_hlo
    module = parse_hlo(text, filename)
    if options is not None:
        module.config = module.config.replace(debug_options=options)
    return module


# ---- the search ------------------------------------------------------------------------------

def bisect(module_text: str, filename: str, factory, options: DebugOptions | None = None,
           settings: BisectSettings | None = None) -> BisectResult:
    """Find the first pass invocation (then rewrite) that breaks the module.  Raises
    HloError when the input itself is broken or fails on the reference backend."""
    from ..api import verify
    from ..backends import compile as compile_module
    from ..backends.interpreter.literals import random_arguments, result_shapes
    options = options if options is not None else DebugOptions()
    settings = settings or BisectSettings()
    module = _parse(module_text, filename, options)
    verify(module)
    args = random_arguments(module, settings.seed)
    ref_backend = settings.reference_backend or settings.backend
    try:
        reference = compile_module(module, ref_backend).run(args)
    except HloError as e:
        raise HloError(f"{filename}: the unoptimized module fails on {ref_backend}, "
                       f"nothing to compare with: {e}") from None
    checker = Checker(settings, args, reference, result_shapes(module))

    log = InvocationLog(snapshots=True)
    work = _parse(module_text, filename, options)
    crashed: BaseException | None = None
    try:
        PipelineRunner(options, observer=log).run(factory(options), work)
    except Exception as e:  # noqa: BLE001 - a failing pass is what we look for
        if log.current is None:
            raise
        crashed = e
    result = BisectResult(found=False, invocations=len(log.invocations) + (crashed is not None),
                          changed=sum(log.changed))
    snapshots = sorted(log.snapshots.items())  # (invocation index, text after it)
    by_index = {inv.index: inv for inv in log.invocations}

    if crashed is not None:
        culprit = log.current
        before = snapshots[-1][1] if snapshots else module_text
        kind = "verifier" if isinstance(crashed, PassError) and "Failed after" in str(crashed) \
            else "pass"
        failure = Check(kind, _message(crashed))
    else:
        if not snapshots:
            return result  # nothing changed the module
        final = checker(_parse(snapshots[-1][1], options=options))
        if final.ok:
            result.checks = checker.count
            return result
        lo, hi = -1, len(snapshots) - 1  # lo: good (-1 = the input), hi: bad
        verdicts = {hi: final}
        while hi - lo > 1:
            mid = (lo + hi) // 2
            verdict = checker(_parse(snapshots[mid][1], options=options))
            if verdict.ok:
                lo = mid
            else:
                hi, verdicts[mid] = mid, verdict
        culprit = by_index[snapshots[hi][0]]
        before = snapshots[lo][1] if lo >= 0 else module_text
        failure = verdicts[hi]
        result.pass_diff = _diff(_parse(before), _parse(snapshots[hi][1]))
    result.found = True
    result.culprit = culprit
    result.failure = failure
    result.before_text = before
    _narrow(result, culprit, before, checker, options)
    _reproduce(result, factory, options, settings, checker)
    result.checks = checker.count
    return result


def _apply(pass_obj, name: str, before: str, fuel: int, options: DebugOptions):
    """Run the pass on a fresh copy of ``before`` with ``fuel`` for it; returns
    (module, exception or None, pool)."""
    from ..api import verify
    module = _parse(before, options=options)
    pool = FuelPool({name: fuel}, describe=True)
    try:
        with fuel_scope(pool):
            pass_obj.run(module)
        verify(module)
    except Exception as e:  # noqa: BLE001
        return module, e, pool
    return module, None, pool


def _verdict(checker: Checker, module, error) -> Check:
    if error is not None:
        checker.count += 1
        kind = "verifier" if isinstance(error, HloError) else "pass"
        return Check(kind, _message(error))
    return checker(module)


def _narrow(result: BisectResult, culprit: PassInvocation, before: str, checker: Checker,
            options: DebugOptions) -> None:
    """Binary search over the culprit's fuel for its first bad rewrite."""
    name = culprit.pass_name
    pass_obj = culprit.pass_obj
    if pass_obj is None:
        result.rewrite_note = "the pass object is not available"
        return
    full, error, pool = _apply(pass_obj, name, before, UNLIMITED, options)
    total = pool.consumed[name]
    if not result.pass_diff and error is None:
        result.pass_diff = _diff(_parse(before), full)
    if total == 0:
        result.rewrite_note = (f"{name} does not count its rewrites (no --xla_fuel support), "
                               "so the search stops at the pass")
        return
    if _verdict(checker, full, error).ok:
        result.rewrite_note = (f"{name} alone on the module before it does not fail (the "
                               "failure needs the pipeline's state), so the search stops "
                               "at the pass")
        return
    lo, hi = 0, total  # fuel lo: good (0 = no rewrite), fuel hi: bad
    verdicts = {}
    while hi - lo > 1:
        mid = (lo + hi) // 2
        module, error, _ = _apply(pass_obj, name, before, mid, options)
        verdict = _verdict(checker, module, error)
        if verdict.ok:
            lo = mid
        else:
            hi, verdicts[mid] = mid, verdict
    prev, _, _ = _apply(pass_obj, name, before, hi - 1, options)
    bad, error, pool = _apply(pass_obj, name, before, hi, options)
    failure = verdicts.get(hi) or _verdict(checker, bad, error)
    descriptions = pool.descriptions.get(name, [])
    description = descriptions[hi - 1] if len(descriptions) >= hi else f"rewrite {hi}"
    result.rewrite = RewriteCulprit(hi, total, description, failure, _diff(prev, bad))


def _diff(left, right) -> str:
    from ..diff import DiffOptions, diff_modules
    from ..diff.render_text import render_text
    try:
        return render_text(diff_modules(left, right, DiffOptions(), "before", "after"))
    except Exception as e:  # noqa: BLE001 - a report without its diff beats none
        return f"(no diff: {_message(e)})"


# ---- the reproducer ------------------------------------------------------------------------

def _reproduce(result: BisectResult, factory, options: DebugOptions,
               settings: BisectSettings, checker: Checker) -> None:
    """The command line that makes the bad rewrite from the module before the culprit,
    and whether it really does (run here, as the command would)."""
    name = result.culprit.pass_name
    fuel = f" --xla_fuel={name}={result.rewrite.index}" if result.rewrite else ""
    extra = " ".join(shlex.quote(f) for f in _flag_words(options))
    kind = (result.rewrite.failure if result.rewrite else result.failure).kind
    if kind in ("ok", "wrong_result", "compile", "run"):
        result.reproducer_command = (
            f"hlo-opt run REPRO --backend {settings.backend} --passes {shlex.quote(name)}"
            f"{fuel} --compare {settings.reference_backend or 'unoptimized'} "
            f"--seed {settings.seed} --abs_error_bound {settings.abs_bound} "
            f"--rel_error_bound {settings.rel_bound}" + (f" {extra}" if extra else ""))
    else:
        result.reproducer_command = f"hlo-opt REPRO --passes {shlex.quote(name)}{fuel}" + \
            (f" {extra}" if extra else "")
    single = getattr(factory, "single", None)
    if single is None:
        return
    run_options = dataclasses.replace(
        options, xla_fuel={name: result.rewrite.index} if result.rewrite else {},
        xla_disable_hlo_passes=[], xla_enable_hlo_passes_only=[])
    module = _parse(result.before_text)
    try:
        PipelineRunner(run_options).run(single(name, run_options), module)
    except Exception:  # noqa: BLE001 - the optimizer fails: reproduced
        result.reproduces = True
        return
    result.reproduces = not checker(module).ok


def _flag_words(options: DebugOptions) -> list[str]:
    """The user's --xla_* flags that shape the pass (filters and fuel left out)."""
    words = []
    default = DebugOptions()
    for f in dataclasses.fields(DebugOptions):
        if f.name in ("xla_fuel", "xla_disable_hlo_passes", "xla_enable_hlo_passes_only"):
            continue
        value = getattr(options, f.name)
        if value == getattr(default, f.name) or isinstance(value, (dict, list)):
            continue
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        words.append(f"--{f.name}={text}")
    return words


def reproducer_text(result: BisectResult, filename: str, pipeline: str, path: str) -> str:
    """The reproducer file: the module before the culprit, with how to trigger it."""
    inv = result.culprit
    lines = ["// hlo-opt bisect reproducer",
             f"// input: {filename}; pipeline: {pipeline}",
             f"// culprit: {inv.occurrence} (pass invocation {inv.index + 1} of "
             f"{result.invocations}, fixpoint iteration {inv.iteration})",
             f"// failure: {_one_line(result.failure)}"]
    if result.rewrite:
        lines.append(f"// rewrite {result.rewrite.index} of {result.rewrite.total}: "
                     f"{result.rewrite.description}")
    lines.append("// reproduce (module below = the module just before the culprit):")
    lines.append("//   " + result.reproducer_command.replace("REPRO", shlex.quote(path)))
    return "\n".join(lines) + "\n" + result.before_text


def result_document(result: BisectResult, reproducer_path: str | None = None) -> dict:
    """``hlo-opt bisect --json``: the verdict for scripts."""
    doc = {"found": result.found, "invocations": result.invocations,
           "changed": result.changed, "checks": result.checks}
    if not result.found:
        return doc
    inv = result.culprit
    doc.update(occurrence=inv.occurrence, pass_name=inv.pass_name,
               pipeline_path=list(inv.pipeline_path), invocation=inv.index + 1,
               iteration=inv.iteration,
               failure={"kind": result.failure.kind, "message": result.failure.message})
    if result.rewrite:
        r = result.rewrite
        doc["rewrite"] = {"index": r.index, "total": r.total, "description": r.description,
                          "failure": {"kind": r.failure.kind, "message": r.failure.message},
                          "diff": r.diff_text}
    else:
        doc["rewrite"] = None
        doc["rewrite_note"] = result.rewrite_note
    if reproducer_path:
        doc["reproducer"] = reproducer_path
        doc["command"] = result.reproducer_command.replace("REPRO",
                                                           shlex.quote(reproducer_path))
    doc["reproduces"] = result.reproduces
    return doc


def _one_line(check: Check) -> str:
    first = check.message.strip().splitlines()[0] if check.message.strip() else ""
    return f"{check.kind}: {first}" if first else check.kind
