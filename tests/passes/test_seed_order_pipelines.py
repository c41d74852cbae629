"""The pass library run together in the seed's order (the ``simplification`` fixpoint and
the ``optimization`` pipeline as XLA's GPU compiler orders them, built here from pass
names) on every sample and corpus module: the verifier runs after every changing pass,
``--verify-no-change`` holds, and the interpreter results match before/after
(differential.RTOL/ATOL: the pipeline reassociates floats)."""
from __future__ import annotations

from hlo_opt.flags import DebugOptions
from hlo_opt.pipeline import Fixpoint, Pipeline, PipelineRunner
from tests.support.pass_suite import real_modules_test
from tests.support.pipelines import pipeline

SIMPLIFICATION = ["batchnorm_expander", "algsimp", "simplify-sorts", "tuple-simplifier",
                  "while-loop-constant-sinking", "simplify-while-loops", "slice-sinker", "dce",
                  "reshape-mover", "constant_folding", "simplify-conditional"]


def simplification():
    return Fixpoint(pipeline("simplification", SIMPLIFICATION))


def optimization():
    # XLA's gpu_hlo_support_checker, element_type_converter and
    # hlo-get-dimension-size-rewriter are not part of this library (yet).
    return pipeline("optimization", [
        "zero_sized_hlo_elimination", "dynamic-index-splitter", "call-inliner",
        "dot_decomposer", "convolution-group-converter", "stable-sort-expander",
        simplification(), simplification(), simplification(),
        "zero_sized_hlo_elimination", "transpose-folding", "cse", "dce",
        "while-loop-trip-count-annotator"])


class _Run:
    def __init__(self, make):
        self.name = "seed-order"
        self.make = make

    def run(self, module) -> bool:
        return PipelineRunner(DebugOptions(), verify_no_change=True).run(self.make(), module)


test_simplification = real_modules_test(lambda: _Run(lambda: Pipeline("s", [simplification()])),
                                        exact=False)
test_optimization = real_modules_test(lambda: _Run(optimization), exact=False)
