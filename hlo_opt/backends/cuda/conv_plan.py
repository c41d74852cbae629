"""A convolution (plain ``convolution`` or a cuDNN custom call of the ``gpu`` pipeline) as
one cuDNN frontend graph: :class:`ConvPlan`, read off the instruction's dim_labels,
window, groups and operand layouts, hashable (the cuDNN graphs are cached per plan).

cuDNN's convolutions work on tensors described as ``[N, C, spatial...]`` dims with
arbitrary strides, so any HLO layout is just the physical strides of the canonical dims
(``conv._canonical``); the filter is ``[K, C/G, R...]`` (cuDNN infers the groups from
``C / (C/G)``), the output ``[N, K, P...]``.  The three operations, all on the forward
convolution's geometry (pre/post padding, stride, dilation), as the custom calls are:

* ``fprop``: ``Y = conv(X, W)`` (plain ``convolution``, ``__cudnn$convForward``, and
  ``__cudnn$convBiasActivationForward``, whose epilogue ``act(scale * Y + side_scale *
  side + bias)`` becomes pointwise nodes of the same graph);
* ``dgrad``: ``DX = conv_dgrad(DY, W)`` (``__cudnn$convBackwardInput``);
* ``wgrad``: ``DW = conv_wgrad(X, DY)`` (``__cudnn$convBackwardFilter``).

``conv_plan`` returns None for what cuDNN cannot take (the conv kernel runs it): integer
or mixed element types, base (lhs) dilation, negative padding, batch groups, a kernel
reversed along some spatial dims only, vectorized NCHW_VECT_C operands, empty tensors.

The cuDNN engine the autotuner chose (``cudnn_conv_backend_config.algorithm`` with
``is_cudnn_frontend``: XLA's ``algo_id`` = engine id and ``tuning_knobs``) is the plan's
``engine``; an algorithm without ``is_cudnn_frontend`` that names one of the conv kernel's
(``conv.ALGORITHMS``) selects the kernel (:func:`kernel_selected`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import UnsupportedError
from ..interpreter.ops_convolution import conv_params, dim_labels
from ..interpreter.ops_custom_call import CUDNN_ACTIVATIONS, CUDNN_ROLES, cudnn_config
from .conv import _BY_ID, FLOAT_TYPES, _canonical, is_convolution

KINDS = {"output": "fprop", "input": "dgrad", "kernel": "wgrad"}


@dataclass(frozen=True)
class TensorDesc:
    """A cuDNN tensor: dims ``[N, C, spatial...]`` (filters ``[K, C/G, R...]``) and the
    element strides of the HLO layout; ``operand`` is the HLO operand (None: the result)."""
    dims: tuple
    strides: tuple
    dtype: str
    operand: int | None


@dataclass(frozen=True)
class ConvPlan:
    kind: str                     # fprop | dgrad | wgrad
    x: TensorDesc                 # image (dgrad: its gradient, the result)
    w: TensorDesc                 # filter (wgrad: its gradient, the result)
    y: TensorDesc                 # output (dgrad / wgrad: its gradient, an operand)
    pre_padding: tuple
    post_padding: tuple
    stride: tuple
    dilation: tuple
    groups: int
    convolution: bool             # kernel reversed (cuDNN's CONVOLUTION mode)
    compute: str                  # f32 | f64
    # convBiasActivationForward: act(scale * conv + side_scale * side + bias)
    fused: bool = False
    scale: float = 1.0
    side: TensorDesc | None = None
    side_scale: float = 0.0
    bias: TensorDesc | None = None
    activation: str = "kNone"
    leaky_alpha: float = 0.0
    engine: tuple | None = None   # (engine id, ((knob, value), ...)); None: heuristics

    @property
    def result(self) -> TensorDesc:
        return {"fprop": self.y, "dgrad": self.x, "wgrad": self.w}[self.kind]

    def summary(self) -> str:
        """One line: the cuDNN operation, tensors, geometry, epilogue, engine."""
        t = lambda d: f"{d.dtype}{list(d.dims)}/{list(d.strides)}"  # noqa: E731
        ops = {"fprop": "conv_fprop", "dgrad": "conv_dgrad", "wgrad": "conv_wgrad"}
        parts = [f"{ops[self.kind]} x {t(self.x)} w {t(self.w)} y {t(self.y)}",
                 f"pad {list(self.pre_padding)}/{list(self.post_padding)}",
                 f"stride {list(self.stride)}", f"dilation {list(self.dilation)}"]
        if self.groups > 1:
            parts.append(f"groups {self.groups}")
        if self.convolution:
            parts.append("CONVOLUTION mode")
        if self.fused:
            epi = ([f"scale {self.scale:g}"] if self.scale != 1 else []) + \
                (["side input"] if self.side is not None else []) + \
                (["bias"] if self.bias is not None else []) + [self.activation]
            parts.append("then " + ", ".join(epi))
        parts.append(f"engine {self.engine[0]}" if self.engine else "heuristic engine")
        return ", ".join(parts)

    @property
    def flops(self) -> int:
        """2 * multiply-adds of the convolution (the same for all three kinds)."""
        return 2 * math.prod(self.y.dims) * math.prod(self.w.dims[1:])


def kernel_selected(inst) -> bool:
    """The call's backend config names one of the conv kernel's algorithms (the
    autotuner chose the kernel over cuDNN's engines)."""
    if inst.opcode != "custom-call":
        return False
    algo = cudnn_config(inst, required=False).get("algorithm")
    if not isinstance(algo, dict) or not algo or _frontend(algo):
        return False
    try:
        return int(algo.get("algo_id", 0)) in _BY_ID
    except (TypeError, ValueError):
        return False


def _frontend(algo: dict) -> bool:
    v = algo.get("is_cudnn_frontend", False)
    return v is True or str(v).lower() == "true"


def selected_engine(inst) -> tuple | None:
    """(engine id, sorted knobs) of a cuDNN frontend engine the backend config selects."""
    if inst.opcode != "custom-call":
        return None
    algo = cudnn_config(inst, required=False).get("algorithm")
    if not isinstance(algo, dict) or not _frontend(algo):
        return None
    try:
        knobs = tuple(sorted((int(k), int(v)) for k, v in
                             (algo.get("tuning_knobs") or {}).items()))
        return int(algo.get("algo_id", 0)), knobs
    except (AttributeError, TypeError, ValueError):
        return None


def cudnn_layout(t: TensorDesc) -> bool:
    """Whether ``t`` (dims ``[N, C, spatial...]``, or ``[K, C, R, S...]`` for a filter) is
    packed channels-first (NCHW / KCRS) or channels-last (NHWC / KRSC): the layouts
    cuDNN's engines compute in.  Others (a filter with K minor-most, as the default
    layout of ``01io`` gives) validate and then compute garbage on the GPU."""
    inner = 1
    for d in reversed(_physical_order(t)):
        if t.dims[d] > 1 and t.strides[d] != inner:
            return False
        inner *= t.dims[d]
    order = [d for d in _physical_order(t) if t.dims[d] > 1]
    first = [d for d in range(len(t.dims)) if t.dims[d] > 1]
    last = [d for d in [0] + list(range(2, len(t.dims))) + [1] if t.dims[d] > 1]
    return order in (first, last)


def _physical_order(t: TensorDesc) -> list:
    """The dims from the major-most to the minor-most (by stride; ties keep dim order)."""
    return sorted(range(len(t.dims)), key=lambda d: (-t.strides[d], d))


def conv_plan(inst) -> ConvPlan | None:
    """The cuDNN graph of a convolution, or None (not a convolution, or cuDNN cannot
    take it: the conv kernel runs it)."""
    plan = strided_plan(inst)
    if plan is None or not all(cudnn_layout(t) for t in (plan.x, plan.w, plan.y) +
                               ((plan.side,) if plan.side is not None else ())):
        return None
    return plan


def strided_plan(inst) -> ConvPlan | None:
    """The convolution as dims and strides whatever its layouts (what :func:`conv_plan`
    hands cuDNN where the layouts are ones cuDNN computes in)."""
    if not is_convolution(inst):
        return None
    try:
        return _plan(inst)
    except (UnsupportedError, KeyError, ValueError, TypeError, AttributeError):
        return None


def _plan(inst) -> ConvPlan | None:
    plain = inst.opcode == "convolution"
    target = "convolution" if plain else inst.custom_call_target
    roles = ("input", "kernel", "output") if plain else CUDNN_ROLES[target]
    ops = [o.shape for o in inst.operands]
    res = inst.shape.tuple_shapes[0] if inst.shape.is_tuple() else inst.shape
    if any(not s.is_array() for s in ops + [res]):
        return None
    fused = target == "__cudnn$convBiasActivationForward"
    if not (2 <= len(ops) <= 4 if fused else len(ops) == 2):
        return None
    dtype = res.element_type
    if dtype not in FLOAT_TYPES or any(s.element_type != dtype for s in ops[:2]):
        return None
    if any(s.num_elements() == 0 for s in ops[:2] + [res]):
        return None
    labels = dim_labels(inst, ops[0].rank)
    params = conv_params(inst, len(labels.input_spatial))
    if params.batch_group_count != 1 or params.feature_group_count < 1:
        return None
    if not plain and cudnn_config(inst, required=False).get("reordered_int8_nchw_vect"):
        return None
    win = params.window
    if any(w.base_dilation != 1 or w.padding_low < 0 or w.padding_high < 0
           or w.stride < 1 or w.window_dilation < 1 for w in win):
        return None
    flips = {bool(w.window_reversal) for w in win if w.size > 1}
    if len(flips) > 1:
        return None
    desc = {}
    for i, (role, s) in enumerate(zip(roles, ops[:2])):
        dims, st = _canonical(s, labels, role)
        desc[role] = TensorDesc(tuple(dims), tuple(st), dtype, i)
    dims, st = _canonical(res, labels, roles[2])
    desc[roles[2]] = TensorDesc(tuple(dims), tuple(st), dtype, None)
    x, w, y = desc["input"], desc["kernel"], desc["output"]
    G = params.feature_group_count
    if x.dims[0] != y.dims[0] or w.dims[0] != y.dims[1] or w.dims[0] % G \
            or x.dims[1] != w.dims[1] * G:
        return None
    pre = tuple(d.padding_low for d in win)
    post = tuple(d.padding_high for d in win)
    stride = tuple(d.stride for d in win)
    dil = tuple(d.window_dilation for d in win)
    for d in range(len(win)):
        if w.dims[2 + d] != win[d].size:
            return None
        eff = (win[d].size - 1) * dil[d] + 1
        if (x.dims[2 + d] + pre[d] + post[d] - eff) // stride[d] + 1 != y.dims[2 + d] \
                or x.dims[2 + d] + pre[d] + post[d] < eff:
            return None
    plan = dict(kind=KINDS[roles[2]], x=x, w=w, y=y, pre_padding=pre, post_padding=post,
                stride=stride, dilation=dil, groups=G, convolution=flips == {True},
                compute="f64" if dtype == "f64" else "f32",
                engine=None if plain else selected_engine(inst))
    if fused:
        cfg = cudnn_config(inst)
        mode = cfg.get("activation_mode", "kNone")
        if mode not in CUDNN_ACTIVATIONS:
            return None
        plan.update(fused=True, scale=float(cfg.get("conv_result_scale", 1)),
                    activation=mode, leaky_alpha=float(cfg.get("leakyrelu_alpha", 0)))
        if len(ops) > 2:
            b = ops[2]
            if b.rank != 1 or b.dims[0] != y.dims[1] or b.element_type not in FLOAT_TYPES:
                return None
            K = y.dims[1]
            plan["bias"] = TensorDesc((1, K) + (1,) * len(win), (K, 1) + (1,) * len(win),
                                      b.element_type, 2)
        if len(ops) > 3:
            s = ops[3]
            if s.element_type not in FLOAT_TYPES:
                return None
            sd, sst = _canonical(s, labels, "output")
            if tuple(sd) != y.dims:
                return None
            plan["side"] = TensorDesc(tuple(sd), tuple(sst), s.element_type, 3)
            plan["side_scale"] = float(cfg.get("side_input_scale", 0))
    return ConvPlan(**plan)
