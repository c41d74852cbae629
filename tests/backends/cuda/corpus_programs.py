"""Every sample, JAX benchmark and corpus module, raw and after the gpu pipeline, as CUDA
programs built once per test session with one shared set of kernel names (so they
compile as a few big translation units: NVRTC once per arch, g++ twice in parallel)."""
from __future__ import annotations

import functools
from pathlib import Path

from tests.conftest import CORPUS, ROOT, corpus_files, sample_files

JAX_DIR = ROOT / "benchmarks" / "jax_modules"
# Above this many elements in one value, cuda-sim (and the interpreter) take seconds per
# module: such modules are compiled (NVRTC, ptxas) but not run in CI.
MAX_ELEMENTS = 1 << 21


def module_files() -> list[Path]:
    return list(sample_files()) + sorted(JAX_DIR.glob("*.hlo")) + list(corpus_files())


@functools.cache
def modules():
    """[(id, module)] for every module the parser reads (raw)."""
    from hlo_opt.api import load_all
    out = []
    for path in module_files():
        try:
            mods = load_all(str(path))
        except Exception:  # noqa: BLE001 - parse failures are the parser tests' business
            continue
        for i, m in enumerate(mods):
            out.append((f"{path.name}#{i}", m))
    return out


@functools.cache
def programs():
    """{(id, pipeline): (raw module, Program | exception)} for raw and gpu-pipelined
    modules (the raw module is the interpreter's: the oracle runs what the user wrote)."""
    from hlo_opt import passes_api
    from hlo_opt.analysis.device import H100
    from hlo_opt.backends.cuda.program import build_program
    from hlo_opt.flags import DebugOptions
    names: set = set()
    out = {}
    opts = DebugOptions.from_sources([])
    for mid, m in modules():
        for pipe in ("raw", "gpu"):
            try:
                mm = m if pipe == "raw" else passes_api.optimize(m.clone(), opts,
                                                                 pipeline="gpu")
            except Exception as e:  # noqa: BLE001 - the pipeline's own tests cover it
                out[(mid, pipe)] = (m, e)
                continue
            try:
                out[(mid, pipe)] = (m, build_program(mm, H100, names=names))
            except Exception as e:  # noqa: BLE001 - reported by the tests
                out[(mid, pipe)] = (m, e)
    return out


def largest_value(module) -> int:
    n = 0
    for comp in module.computations:
        for inst in comp.instructions:
            for s in (inst.shape.leaves() if inst.shape.is_tuple() else [inst.shape]):
                if s.is_array():
                    n = max(n, s.num_elements())
    return n


@functools.cache
def sim_executables():
    """{(id, pipeline): SimExecutable} for the programs small enough to run in CI."""
    from hlo_opt.backends.cuda.program import Program
    from hlo_opt.backends.cuda_sim import compile_batch
    todo = [(k, p) for k, (m, p) in programs().items()
            if isinstance(p, Program) and largest_value(m) <= MAX_ELEMENTS]
    exes = compile_batch([p for _, p in todo], parts=2)
    return {k: e for (k, _), e in zip(todo, exes)}


def corpus_present() -> bool:
    return CORPUS.is_dir()
