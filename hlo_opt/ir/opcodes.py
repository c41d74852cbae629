"""The opcodes of current XLA (xla/hlo/ir/hlo_opcode.h): text name, operand arity, category.

Arity -1 means variadic.  Categories drive the graph colours, the cost model and the
elementwise-ness queries passes ask.
"""
from __future__ import annotations

from dataclasses import dataclass

VARIADIC = -1

_UNARY_ELEMENTWISE = """abs acos acosh asin asinh atan atanh cbrt ceil count-leading-zeros cosine
cosh erf exponential exponential-minus-one floor imag is-finite log log-plus-one logistic
negate not popcnt real round-nearest-afz round-nearest-even rsqrt sign sine sinh sqrt tan
tanh convert bitcast-convert reduce-precision""".split()
_BINARY_ELEMENTWISE = """add subtract multiply divide remainder power maximum minimum atan2
complex and or xor shift-left shift-right-arithmetic shift-right-logical compare mulhi
stochastic-convert""".split()
_TERNARY_ELEMENTWISE = ["select", "clamp"]

# name -> (arity, category)
OPCODES: dict[str, tuple[int, str]] = {}
for _n in _UNARY_ELEMENTWISE:
    OPCODES[_n] = (1, "elementwise")
for _n in _BINARY_ELEMENTWISE:
    OPCODES[_n] = (2, "elementwise")
for _n in _TERNARY_ELEMENTWISE:
    OPCODES[_n] = (3, "elementwise")
OPCODES.update({
    # data movement
    "bitcast": (1, "data"), "broadcast": (1, "broadcast"), "concatenate": (VARIADIC, "data"),
    "copy": (1, "data"), "reshape": (1, "data"), "dynamic-reshape": (VARIADIC, "data"),
    "slice": (1, "data"), "dynamic-slice": (VARIADIC, "data"),
    "dynamic-update-slice": (VARIADIC, "broadcast"), "pad": (2, "elementwise_like"),
    "reverse": (1, "data"), "transpose": (1, "data"), "iota": (0, "elementwise_like"),
    "gather": (2, "reduce"), "scatter": (VARIADIC, "reduce"),
    "get-dimension-size": (1, "data"), "set-dimension-size": (2, "data"),
    "shuffle": (VARIADIC, "data"),
    # reductions and friends
    "reduce": (VARIADIC, "reduce"), "reduce-window": (VARIADIC, "reduce"),
    "select-and-scatter": (3, "reduce"), "sort": (VARIADIC, "reduce"), "topk": (1, "reduce"),
    "scan": (VARIADIC, "reduce"), "map": (VARIADIC, "map"),
    # linear algebra
    "dot": (2, "linalg"), "ragged-dot": (3, "linalg"), "scaled-dot": (4, "linalg"),
    "convolution": (2, "linalg"), "fft": (1, "linalg"), "cholesky": (1, "linalg"),
    "triangular-solve": (2, "linalg"), "batch-norm-training": (3, "reduce"),
    "batch-norm-inference": (5, "reduce"), "batch-norm-grad": (5, "reduce"),
    # structure
    "parameter": (0, "parameter"), "constant": (0, "constant"), "tuple": (VARIADIC, "tuple"),
    "get-tuple-element": (1, "tuple"), "call": (VARIADIC, "control"),
    "conditional": (VARIADIC, "control"), "while": (1, "control"),
    "fusion": (VARIADIC, "fusion"), "custom-call": (VARIADIC, "control"),
    "async-start": (VARIADIC, "async"), "async-update": (1, "async"),
    "async-done": (1, "async"), "opt-barrier": (1, "tuple"), "add-dependency": (2, "tuple"),
    "after-all": (VARIADIC, "tuple"), "domain": (1, "fusion"),
    # RNG
    "rng": (VARIADIC, "rng"), "rng-bit-generator": (1, "rng"),
    "rng-get-and-update-state": (0, "rng"),
    # collectives
    "all-gather": (VARIADIC, "collective"), "all-gather-start": (VARIADIC, "collective"),
    "all-gather-done": (1, "collective"), "all-reduce": (VARIADIC, "collective"),
    "all-reduce-start": (VARIADIC, "collective"), "all-reduce-done": (1, "collective"),
    "reduce-scatter": (VARIADIC, "collective"), "all-to-all": (VARIADIC, "collective"),
    "ragged-all-to-all": (6, "collective"), "collective-broadcast": (VARIADIC, "collective"),
    "collective-permute": (VARIADIC, "collective"),
    "collective-permute-start": (VARIADIC, "collective"),
    "collective-permute-done": (1, "collective"), "collective-reduce": (VARIADIC, "collective"),
    "partition-id": (0, "collective"), "replica-id": (0, "collective"),
    # I/O
    "infeed": (1, "io"), "outfeed": (2, "io"), "send": (2, "io"), "send-done": (1, "io"),
    "recv": (1, "io"), "recv-done": (1, "io"), "copy-start": (1, "data"),
    "copy-done": (1, "data"),
})

# Attribute names that name called computations, per XLA's text syntax.
CALLED_COMPUTATION_ATTRS = ("to_apply", "calls", "condition", "body", "true_computation",
                            "false_computation", "branch_computations", "select", "scatter",
                            "called_computations", "comparator")

# ---- side effects: XLA's HloInstruction::HasSideEffectNoRecurse, the one definition ------
# (``Instruction.has_side_effect()`` adds the called computations, as HasSideEffect.)
# Always side-effecting, whatever the attributes:
SIDE_EFFECT_ALWAYS = frozenset({
    "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng",
    "rng-get-and-update-state", "all-reduce-start", "all-reduce-done", "all-gather-start",
    "all-gather-done", "collective-broadcast", "collective-permute-start",
    "collective-permute-done",
})
# Side-effecting with ``constrain_layout=true``, or with a ``channel_id`` (XLA: outside
# SPMD programs; the text cannot tell, so a channel counts: the safe reading).
SIDE_EFFECT_LAYOUT_CONSTRAINED = frozenset({"all-to-all", "all-gather", "all-reduce",
                                            "reduce-scatter"})
SIDE_EFFECT_WITH_CHANNEL = SIDE_EFFECT_LAYOUT_CONSTRAINED | {"collective-permute"}
# Every opcode HasSideEffectNoRecurse can say yes to (custom-call: with
# ``custom_call_has_side_effect=true``).
SIDE_EFFECT_POSSIBLE = SIDE_EFFECT_ALWAYS | SIDE_EFFECT_WITH_CHANNEL | {"custom-call"}

# Opcodes whose result may differ between runs or that talk to the outside world (the
# interpreter never evaluates them at plan time; constant folding never folds them).
IMPURE = frozenset({
    "rng", "rng-get-and-update-state", "custom-call", "infeed", "outfeed", "send",
    "send-done", "recv", "recv-done", "after-all", "all-reduce", "all-reduce-start",
    "all-reduce-done", "all-gather", "all-gather-start", "all-gather-done",
    "collective-permute", "collective-permute-start", "collective-permute-done",
    "all-to-all", "reduce-scatter", "ragged-all-to-all", "collective-broadcast",
    "async-start", "async-update", "async-done",
})

ELEMENTWISE = frozenset(n for n, (_, cat) in OPCODES.items() if cat == "elementwise")


# ---- facts the passes, the cost model and the interpreter read (one place each) --------
# Transcendental elementwise ops (the cost model counts them apart from flops).
TRANSCENDENTAL = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "power",
    "rsqrt", "sqrt", "cbrt", "tanh", "tan", "sine", "cosine", "atan2", "erf", "acos", "acosh",
    "asin", "asinh", "atan", "atanh", "cosh", "sinh"})

# Instructions that move no data and launch no kernel (the cost model).
FREE = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
    "add-dependency", "opt-barrier", "partition-id", "replica-id", "domain"})

# InstructionFusion::IsExpensive says no for these, whatever the types (fusion).
NEVER_EXPENSIVE = frozenset("""add and bitcast bitcast-convert broadcast ceil clamp
count-leading-zeros compare complex concatenate constant convert copy copy-done copy-start
dynamic-slice dynamic-update-slice floor get-tuple-element imag infeed iota is-finite
maximum minimum multiply negate not opt-barrier or xor outfeed pad partition-id popcnt
real reduce-precision replica-id reshape dynamic-reshape reverse round-nearest-afz
round-nearest-even select shift-left shift-right-arithmetic shift-right-logical slice
stochastic-convert subtract transpose tuple""".split())

# Opcodes a computation may hold to be run "batched" (on whole arrays instead of the
# scalars it was written for) by the interpreter: reducers and map computations.
BATCHABLE = frozenset({
    "parameter", "constant", "tuple", "get-tuple-element", "add", "subtract", "multiply",
    "divide", "remainder", "power", "maximum", "minimum", "atan2", "complex", "and", "or",
    "xor", "shift-left", "shift-right-arithmetic", "shift-right-logical", "compare",
    "select", "clamp", "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt",
    "ceil", "count-leading-zeros", "cosine", "cosh", "erf", "exponential",
    "exponential-minus-one", "floor", "imag", "is-finite", "log", "log-plus-one",
    "logistic", "negate", "not", "popcnt", "real", "round-nearest-afz",
    "round-nearest-even", "rsqrt", "sign", "sine", "sinh", "sqrt", "tan", "tanh", "convert",
    "bitcast-convert", "reduce-precision", "mulhi",
})

# Non-elementwise opcodes the GPU fusion emitters take inside a fusion
# (priority_fusion.cc's IsFusible beside the elementwise ones).
EMITTER_FUSIBLE = frozenset({"copy", "iota", "constant", "reduce", "bitcast", "broadcast",
                        "concatenate", "dynamic-slice", "dynamic-update-slice", "gather",
                        "pad", "reduce-window", "reshape", "reverse", "scatter", "slice",
                        "transpose"})

# Opcodes the interpreter does not execute yet (every other opcode has a handler: the
# completeness test in tests/unit/test_opcodes.py keeps this list exact).
NOT_INTERPRETED = frozenset({"collective-reduce", "scaled-dot", "shuffle"})


@dataclass(frozen=True)
class OpcodeFacts:
    """One row of the table: what the code knows about an opcode (the code generators
    add their columns here)."""

    name: str
    arity: int
    category: str
    elementwise: bool
    side_effect: str  # "always", "possible" (attributes decide) or "never"
    impure: bool
    transcendental: bool
    free: bool
    never_expensive: bool
    batchable: bool
    emitter_fusible: bool
    interpreted: bool


def _row(name: str) -> OpcodeFacts:
    arity_, category_ = OPCODES[name]
    return OpcodeFacts(
        name, arity_, category_, name in ELEMENTWISE,
        "always" if name in SIDE_EFFECT_ALWAYS else
        "possible" if name in SIDE_EFFECT_POSSIBLE else "never",
        name in IMPURE, name in TRANSCENDENTAL, name in FREE, name in NEVER_EXPENSIVE,
        name in BATCHABLE, name in EMITTER_FUSIBLE, name not in NOT_INTERPRETED)


TABLE: dict[str, OpcodeFacts] = {name: _row(name) for name in sorted(OPCODES)}


def is_known(opcode: str) -> bool:
    return opcode in OPCODES


def arity(opcode: str) -> int:
    return OPCODES[opcode][0]


def category(opcode: str) -> str:
    return OPCODES[opcode][1]


def is_elementwise(opcode: str) -> bool:
    return opcode in ELEMENTWISE
