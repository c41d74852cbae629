"""Convolutions as CUDA kernels (the fallback XLA:GPU would not need, cuDNN being there):
a plain ``convolution`` or one of the cuDNN custom calls the ``gpu`` pipeline emits
(``__cudnn$convForward``, ``__cudnn$convBiasActivationForward``,
``__cudnn$convBackwardInput``, ``__cudnn$convBackwardFilter``) becomes one direct
convolution kernel instead of a host call.

One thread per result element (a grid-stride loop in the result's physical order, so the
stores are coalesced); each thread walks the window and the reduced features of its group
and accumulates in f32 (f64 for f64).  The semantics are the interpreter's
(``interpreter/ops_convolution.py``, ``ops_custom_call.py``), on canonical roles: input
(N, C, S...), kernel (O, I, K...), output (N, O, P...), each read through the physical
strides of its own layout:

* forward (the result is the output): ``out[n, o, p] = sum_{k, i} x[n', g*I + i, s] *
  w[o, i, k']`` with ``s*lhs_dilate = p*stride + k*rhs_dilate - pad_lo`` (skipped where
  that is a hole or outside the input), ``k'`` the kernel offset (reversed under
  ``rhs_reversal``), ``g = o / (O/G)`` for feature groups and ``n' = (o / (O/B))*N_out + n``
  for batch groups;
* backward input (the result is the input): ``dx[n, c, s] = sum_{k, j} dy[n, g*O/G + j, p]
  * w[g*O/G + j, c % I, k']`` over the ``p`` with ``p*stride + k*rhs_dilate = s*lhs_dilate
  + pad_lo``;
* backward filter (the result is the kernel): ``dw[o, i, k] = sum_{n, p} dy[n, o, p] *
  x[n, g*I + i, s]`` at the (reversed) offset ``k'``.

A forward convolution whose filter fits in 40 KiB stages the whole filter in shared
memory first, as [k..][i][o]: the warp's threads (adjacent output features in NHWC, one
feature in NCHW) then read adjacent words or one word per step, where the filter as laid
out (output features major, as the gpu pipeline lays it out) costs a cache line per thread.

Algorithms (``cudnn_conv_backend_config.algorithm.algo_id`` of a cuDNN call, which
``gpu-conv-algorithm-picker`` writes; a plain convolution, a call without one and an
unknown id get 0): variants of this one kernel that compute the same sums in the same
order, so each is correct wherever algorithm 0 is, and the implicit gemm
(:data:`ALGORITHMS`):

* 0: 256 threads per block, the filter staged in shared memory (as above);
* 1: 256 threads, the filter read where it lies (what a filter over 40 KiB gets anyway);
* 2 / 3: 128 / 512 threads per block, staged as 0 (the grid-stride loop and the staging
  loop step by ``blockDim.x``, and ``__launch_bounds__`` names the block launched).
* 4 / 5: the implicit-gemm kernel (:mod:`.conv_igemm`: the gemm kernel's tiles, mma.sync
  for f16/bf16 on sm_80+, with the operands gathered im2col-style) on a 64x64 / 128x32
  tile; where it declines (a plain convolution rounding its operands to a narrower result
  type) the direct kernel of algorithm 0 runs.

``convBiasActivationForward`` then applies ``conv_result_scale``, ``side_input_scale *
side``, the bias along the output features and the activation, as the interpreter does.
Operands of a plain convolution are first converted to its result type (the
interpreter's rounding), those of the custom calls straight to the accumulator type.

Left on the host (the step's fallback reason says which): integer convolutions (s8 ...),
cuDNN's vectorized NCHW_VECT_C operands and reordered int8x32 filters, cuDNN calls with
``batch_group_count > 1`` (the interpreter refuses them too), convolutions inside fusions.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from ...codegen import index as ix
from ...codegen.gemm_fusion import TileConfig
from ...errors import UnsupportedError
from ...ir.types import numpy_dtype
from ..interpreter.ops_convolution import conv_params, dim_labels
from ..interpreter.ops_custom_call import (CUDNN_ACTIVATIONS, CUDNN_ROLES, cudnn_config, role_dims,
                                          backend_config)
from .conv_igemm import emit_igemm_conv
from .emitters import KernelSource, c_name
from .renderer import CTYPE, STORAGE, _fn, literal, rounded, to_storage, from_storage

FLOAT_TYPES = ("f16", "bf16", "f32", "f64")
# forward convolutions stage filters up to this size (40 KiB: 5 blocks of 256 threads per
# H100 SM; conv_block's 3x3x32x32 f32 filter is 36 KiB)
SMEM_FILTER_BYTES = 40 << 10

# the interpreter's activations (ops_custom_call.CUDNN_ACTIVATIONS) in C, on a value ``r``
ACTIVATION_CODE = {
    "kNone": lambda r, t, cfg: r,
    "kRelu": lambda r, t, cfg: f"({r} < 0 ? {literal(0, t)} : {r})",
    "kRelu6": lambda r, t, cfg: (f"({r} < 0 ? {literal(0, t)} : ({r} > {literal(6, t)} ? "
                                 f"{literal(6, t)} : {r}))"),
    "kElu": lambda r, t, cfg: f"({r} > 0 ? {r} : {_fn(t, 'expm1')}({r}))",
    "kLeakyRelu": lambda r, t, cfg: (f"({r} > 0 ? {r} : "
                                     f"{literal(float(cfg.get('leakyrelu_alpha', 0)), t)} * "
                                     f"{r})"),
}
assert set(ACTIVATION_CODE) == set(CUDNN_ACTIVATIONS), "activations as the interpreter's"

MODES = {"output": "forward", "input": "backward_input", "kernel": "backward_filter"}


@dataclass(frozen=True)
class ConvAlgorithm:
    """One variant of the kernel: threads per block, whether a small forward filter is
    staged in shared memory; or, with ``tile``, the implicit-gemm kernel
    (:mod:`.conv_igemm`) on that tile."""
    algo_id: int
    threads: int = 256
    stage_filter: bool = True
    tile: TileConfig | None = None

    @property
    def name(self) -> str:
        if self.tile is not None:
            t = self.tile
            return (f"conv:algo_id={self.algo_id},implicit_gemm={t.block_m}x{t.block_n}x"
                    f"{t.block_k},warps={t.num_warps}")
        return (f"conv:algo_id={self.algo_id},threads={self.threads},"
                f"stage_filter={self.stage_filter}")


def _igemm(algo_id: int, tile: TileConfig) -> ConvAlgorithm:
    return ConvAlgorithm(algo_id, threads=tile.threads, tile=tile)


ALGORITHMS = (ConvAlgorithm(0), ConvAlgorithm(1, stage_filter=False),
              ConvAlgorithm(2, threads=128), ConvAlgorithm(3, threads=512),
              _igemm(4, TileConfig(64, 64, 32, 4)), _igemm(5, TileConfig(128, 32, 32, 4)))
DEFAULT_ALGORITHM = ALGORITHMS[0]
_BY_ID = {a.algo_id: a for a in ALGORITHMS}
assert len(_BY_ID) == len(ALGORITHMS), "algorithm ids are unique"


def algorithm_of(inst) -> ConvAlgorithm:
    """The algorithm a cuDNN call's backend config selects (0 for a plain convolution,
    a call without one, a cuDNN frontend engine, or an id this kernel does not know)."""
    if inst.opcode == "convolution":
        return DEFAULT_ALGORITHM
    algo = cudnn_config(inst, required=False).get("algorithm", {})
    if isinstance(algo, dict) and str(algo.get("is_cudnn_frontend", "")).lower() == "true":
        return DEFAULT_ALGORITHM   # a cuDNN engine: the kernel (its fallback) runs as is
    try:
        return _BY_ID.get(int(algo.get("algo_id", 0)), DEFAULT_ALGORITHM)
    except (AttributeError, TypeError, ValueError):
        return DEFAULT_ALGORITHM


def with_algorithm(inst, algo_id: int) -> None:
    """Select ``algo_id`` in a cuDNN call's backend config (the standalone modules the
    autotuner builds one program per algorithm from)."""
    config = backend_config(inst)
    conv = config.setdefault("cudnn_conv_backend_config", {})
    old = {k: v for k, v in conv.get("algorithm", {}).items()
           if k not in ("is_cudnn_frontend", "tuning_knobs")}   # no cuDNN engine's fields
    conv["algorithm"] = {**old, "algo_id": str(algo_id)}
    inst.attrs["backend_config"] = json.dumps(config, separators=(",", ":"))


def is_convolution(inst) -> bool:
    return inst.opcode == "convolution" or (
        inst.opcode == "custom-call" and inst.custom_call_target in CUDNN_ROLES)


def _canonical(shape, labels, role):
    """(sizes, physical strides) of an array of ``role`` in canonical dim order."""
    a, c, spatial = role_dims(labels, role)
    order = [a, c] + list(spatial)
    if len(order) != shape.rank:
        raise UnsupportedError(f"cuda conv: {role} of rank {shape.rank} with "
                               f"{len(order)} labelled dims (a vectorized NCHW_VECT_C layout)")
    st = ix.physical_strides(shape)
    return [shape.dims[d] for d in order], [st[d] for d in order]


def _load(dtype: str, code: str, via: str | None, acc: str) -> str:
    """An operand element as the accumulator type, through ``via`` (a plain convolution
    converts its operands to the result type first)."""
    v, reg = from_storage(dtype, code), CTYPE[dtype]
    if via and via != dtype:
        v = rounded(via, f"((float){v})") if via in ("f16", "bf16") else \
            f"(({CTYPE[via]}){v})"
        reg = CTYPE[via]
    return v if reg == CTYPE[acc] else f"(({CTYPE[acc]}){v})"


@dataclass
class ConvCall:
    """What the conv kernels need of a convolution step: its roles, canonical dims and
    physical strides of input (N, C, S...), kernel (O, I, K...), output (N, O, P...),
    groups, element and accumulator types."""
    step: object
    inst: object
    plain: bool
    target: str
    roles: tuple
    ops: list
    res: object
    labels: object
    params: object
    G: int
    B: int
    bias_act: bool
    alg: ConvAlgorithm
    et: str
    acc: str
    via: str | None
    dims: dict
    types: list

    @property
    def mode(self) -> str:
        return MODES[self.roles[2]]


def conv_call(step) -> ConvCall | None:
    """The :class:`ConvCall` of a convolution step, None for a step that is no
    convolution; UnsupportedError for a convolution no conv kernel takes."""
    inst = step.instruction
    if not is_convolution(inst):
        return None
    plain = inst.opcode == "convolution"
    target = "convolution" if plain else inst.custom_call_target
    roles = ("input", "kernel", "output") if plain else CUDNN_ROLES[target]
    ops = [v.shape for v in step.inputs]
    res = step.outputs[0].shape
    for s in ops + [res]:
        if s.element_type not in FLOAT_TYPES:
            raise UnsupportedError(f"cuda conv: {target} on {s.element_type} (float "
                                   f"convolutions only; integer ones run on the host)")
    labels = dim_labels(inst, ops[0].rank)
    params = conv_params(inst, len(labels.input_spatial))
    G, B = params.feature_group_count, params.batch_group_count
    if not plain and B != 1:
        raise UnsupportedError("cuda conv: cuDNN convolution with batch_group_count > 1")
    bias_act = target == "__cudnn$convBiasActivationForward"
    if not (2 <= len(ops) <= 4 if bias_act else len(ops) == 2):
        raise UnsupportedError(f"cuda conv: {target} with {len(ops)} operands")
    if not plain and cudnn_config(inst, required=False).get("reordered_int8_nchw_vect"):
        raise UnsupportedError("cuda conv: reordered int8x32 filter")
    alg = algorithm_of(inst)
    et = res.element_type
    acc = "f64" if et == "f64" else "f32"
    via = et if plain else None
    A = {r: _canonical(s, labels, r) for r, s in zip(roles, ops[:2])}
    A[roles[2]] = _canonical(res, labels, roles[2])
    xd, wd, yd = A["input"][0], A["kernel"][0], A["output"][0]
    if G < 1 or B < 1 or (G > 1 and B > 1) or wd[0] % G or wd[0] % B \
            or xd[1] != wd[1] * (G if B == 1 else 1) or (plain and xd[0] != yd[0] * B):
        raise UnsupportedError(f"cuda conv: {target}: feature_group_count={G}, "
                               f"batch_group_count={B} do not fit input {xd[:2]}, "
                               f"kernel {wd[:2]}")
    return ConvCall(step, inst, plain, target, roles, ops, res, labels, params, G, B,
                    bias_act, alg, et, acc, via, A, [s.element_type for s in ops])


def epilogue(cc: ConvCall, o_idx: str | None, names: list, emit) -> str:
    """cuDNN's scale, side input, bias and activation of a convBiasActivationForward on
    ``acc`` (``o_idx``: the output feature; ``names``: the result's canonical indices),
    as statements through ``emit``; the result's value (an expression of ``acc``)."""
    if not cc.bias_act:
        return "acc"
    ops, acc, labels = cc.ops, cc.acc, cc.labels
    cfg = cudnn_config(cc.inst)
    scale = float(cfg.get("conv_result_scale", 1))
    if scale != 1:
        emit(f"acc = acc * {literal(scale, acc)};")
    if len(ops) > 3:
        sd, sst = _canonical(ops[3], labels, "output")
        side = _load(cc.types[3], f"in3[{_off(sst, names)}]", None, acc)
        emit(f"acc = acc + {literal(float(cfg.get('side_input_scale', 0)), acc)} * "
             f"{side};")
    if len(ops) > 2:
        if ops[2].rank != 1 or ops[2].dims[0] != cc.dims["kernel"][0][0]:
            raise UnsupportedError(f"cuda conv: bias of shape {ops[2].dims}")
        emit(f"acc = acc + {_load(cc.types[2], f'in2[{o_idx}]', None, acc)};")
    mode_name = cfg.get("activation_mode", "kNone")
    if mode_name not in ACTIVATION_CODE:
        raise UnsupportedError(f"cuda conv: activation_mode {mode_name}")
    return ACTIVATION_CODE[mode_name]("acc", acc, cfg)


def _off(strides, idx):
    return " + ".join(f"{i} * {s}" for i, s in zip(idx, strides) if s) or "0"


def emit_conv(step, names: set, device):
    """KernelSource of a convolution step, None for a step that is no convolution;
    UnsupportedError for a convolution this kernel does not take (it runs on the host).
    An implicit-gemm algorithm (``alg.tile``) that declines the call gets the direct
    kernel of algorithm 0."""
    cc = conv_call(step)
    if cc is None:
        return None
    if cc.alg.tile is not None:
        try:
            return emit_igemm_conv(cc, names, device, epilogue)
        except UnsupportedError:
            cc.alg = DEFAULT_ALGORITHM
    roles, ops, res, params, G, B, alg, et, acc, via, A = (
        cc.roles, cc.ops, cc.res, cc.params, cc.G, cc.B, cc.alg, cc.et, cc.acc, cc.via,
        cc.dims)
    (xd, xs), (wd, ws), (yd, ys) = A["input"], A["kernel"], A["output"]
    mode = MODES[roles[2]]
    sizes = [s.num_elements() for s in ops + [res]]
    total = res.num_elements()
    it = "int" if max(sizes + [total]) < (1 << 31) - 1 else "int64_t"
    win = params.window
    sp = len(win)
    types = cc.types
    L = []

    def emit(depth, line):
        L.append("  " * depth + line)

    # the result's canonical indices from the physical position
    out_dims, out_st = A[roles[2]]
    names_ = ["a", "b"] + [f"q{d}" for d in range(sp)]
    for n, d, s in zip(names_, out_dims, out_st):
        q = f"L / {s}" if s != 1 else "L"
        emit(2, f"const {it} {n} = " + (f"{q};" if d * s == total else
                                        f"({q}) % {d};" if s != 1 else f"L % {d};"))
    emit(2, f"{CTYPE[acc]} acc = {literal(0, acc)};")
    K = [d.size for d in win]

    def kidx(k, d):  # kernel offset as stored (rhs_reversal flips it)
        return f"({K[d] - 1} - {k})" if win[d].window_reversal else k

    off = _off

    def x_spatial(depth, d, pos):
        """s_d of the input read at dilated position ``pos``, or continue."""
        w = win[d]
        emit(depth, f"const {it} t{d} = {pos};")
        if w.base_dilation > 1:
            emit(depth, f"if (t{d} % {w.base_dilation} != 0) continue;")
        emit(depth, f"const {it} s{d} = t{d} / {w.base_dilation};")
        emit(depth, f"if (s{d} < 0 || s{d} >= {xd[2 + d]}) continue;")

    def rd(role, at):  # an element of the operand playing ``role``, as ``acc``
        i = roles.index(role)
        return _load(types[i], f"in{i}[{at}]", via, acc)

    depth = 2
    prologue: list = []   # before the grid-stride loop (shared-memory staging)
    fibered = False
    if mode == "forward":
        n, o, ps = "a", "b", [f"q{d}" for d in range(sp)]
        og = wd[0] // (G if B == 1 else B)
        if B > 1:
            emit(depth, f"const {it} nx = ({o} / {og}) * {yd[0]} + {n};")
        else:
            emit(depth, f"const {it} nx = {n};")
        emit(depth, f"const {it} c0 = ({o} / {og}) * {wd[1]};" if G > 1 else
             f"const {it} c0 = 0;")
        for d in range(sp):
            emit(depth, f"for ({it} k{d} = 0; k{d} < {K[d]}; ++k{d}) {{")
            depth += 1
            x_spatial(depth, d, f"{ps[d]} * {win[d].stride} + k{d} * {win[d].window_dilation}"
                                f" - ({win[d].padding_low})")
        kk = [kidx(f"k{d}", d) for d in range(sp)]
        emit(depth, f"const {it} xo = {off(xs, ['nx', 'c0'] + [f's{d}' for d in range(sp)])};")
        nw = wd[0] * wd[1] * math.prod(K)
        if alg.stage_filter and 0 < nw * numpy_dtype(acc).itemsize <= SMEM_FILTER_BYTES:
            # the whole filter in shared memory, [k..][i][o]: a warp's threads (adjacent
            # output features, or one feature) read adjacent words or one word, where
            # the filter's own layout (o major, as the gpu pipeline lays it out) would
            # touch a cache line per thread
            kst = [math.prod(K[d + 1:]) for d in range(sp)]
            prologue.append(f"  __shared__ {CTYPE[acc]} wsh[{nw}];")
            prologue.append(f"  for (int e = threadIdx.x; e < {nw}; e += blockDim.x) {{")
            kl = "e / " + str(wd[0] * wd[1])
            at = [f"e % {wd[0]}", f"(e / {wd[0]}) % {wd[1]}"] + \
                [f"(({kl}) / {kst[d]}) % {K[d]}" for d in range(sp)]
            prologue.append(f"    wsh[e] = {rd('kernel', off(ws, at))};")
            prologue.append("  }")
            prologue.append("  __syncthreads();")
            fibered = True
            emit(depth, f"const {it} wo = ({off(kst, kk)}) * {wd[0] * wd[1]} + {o};")
            emit(depth, f"for ({it} i = 0; i < {wd[1]}; ++i)")
            emit(depth + 1, f"acc += {rd('input', f'xo + i * {xs[1]}')} * "
                            f"wsh[wo + i * {wd[0]}];")
        else:
            emit(depth, f"const {it} wo = {off(ws, [o, '0'] + kk)};")
            emit(depth, f"for ({it} i = 0; i < {wd[1]}; ++i)")
            emit(depth + 1, f"acc += {rd('input', f'xo + i * {xs[1]}')} * "
                            f"{rd('kernel', f'wo + i * {ws[1]}')};")
        o_idx = o
    elif mode == "backward_input":
        n, c, ss = "a", "b", [f"q{d}" for d in range(sp)]
        og = wd[0] // G
        emit(depth, f"const {it} o0 = ({c} / {wd[1]}) * {og};")
        emit(depth, f"const {it} ci = {c} % {wd[1]};")
        for d in range(sp):
            w = win[d]
            emit(depth, f"for ({it} k{d} = 0; k{d} < {K[d]}; ++k{d}) {{")
            depth += 1
            emit(depth, f"const {it} t{d} = {ss[d]} * {w.base_dilation} + ({w.padding_low}) - "
                        f"k{d} * {w.window_dilation};")
            emit(depth, f"if (t{d} < 0" + (f" || t{d} % {w.stride} != 0" if w.stride > 1
                                           else "") + ") continue;")
            emit(depth, f"const {it} p{d} = t{d} / {w.stride};")
            emit(depth, f"if (p{d} >= {yd[2 + d]}) continue;")
        kk = [kidx(f"k{d}", d) for d in range(sp)]
        emit(depth, f"const {it} yo = {off(ys, [n, 'o0'] + [f'p{d}' for d in range(sp)])};")
        emit(depth, f"const {it} wo = {off(ws, ['o0', 'ci'] + kk)};")
        emit(depth, f"for ({it} j = 0; j < {og}; ++j)")
        emit(depth + 1, f"acc += {rd('output', f'yo + j * {ys[1]}')} * "
                        f"{rd('kernel', f'wo + j * {ws[0]}')};")
        o_idx = None
    else:  # backward_filter
        o, i, ks = "a", "b", [f"q{d}" for d in range(sp)]
        og = wd[0] // G
        emit(depth, f"const {it} c = " + (f"({o} / {og}) * {wd[1]} + {i};" if G > 1 else
                                         f"{i};"))
        emit(depth, f"for ({it} n = 0; n < {xd[0]}; ++n) {{")
        depth += 1
        kk = [kidx(k, d) for d, k in enumerate(ks)]
        for d in range(sp):
            emit(depth, f"for ({it} p{d} = 0; p{d} < {yd[2 + d]}; ++p{d}) {{")
            depth += 1
            x_spatial(depth, d, f"p{d} * {win[d].stride} + {kk[d]} * "
                                f"{win[d].window_dilation} - ({win[d].padding_low})")
        pp = [f"p{d}" for d in range(sp)]
        sx = [f"s{d}" for d in range(sp)]
        emit(depth, f"acc += {rd('output', off(ys, ['n', o] + pp))} * "
                    f"{rd('input', off(xs, ['n', 'c'] + sx))};")
        o_idx = None
    while depth > 2:
        depth -= 1
        emit(depth, "}")
    # epilogue: cuDNN's scale, side input, bias, activation (convBiasActivationForward)
    r = epilogue(cc, o_idx, names_, lambda line: emit(2, line))
    val = f"(({CTYPE[et]}){r})" if CTYPE[et] != CTYPE[acc] else r
    emit(2, f"out0[L] = {to_storage(et, val)};")
    # the cuDNN scratch output: zeroed where the plan gives it elements
    scratch = [(j, s) for j, s in enumerate(step.outputs[1:], 1)
               if s.shape.num_elements() > 0]
    params = [(f"const {STORAGE[t]}*", "in", i) for i, t in enumerate(types)]
    params.append((f"{STORAGE[et]}*", "out", 0))
    params += [(f"{STORAGE[s.shape.element_type]}*", "out", j) for j, s in scratch]
    decl = [f"{t} {'in' if role == 'in' else 'out'}{slot}" for t, role, slot in params]
    name = c_name(step.name, names)
    threads = alg.threads
    grid = max(1, min((max([total] + [s.shape.num_elements() for _, s in scratch])
                       + threads - 1) // threads, device.core_count * 16))
    loop = (f"for ({it} L = ({it})blockIdx.x * blockDim.x + threadIdx.x; L < {{n}}; "
            f"L += ({it})gridDim.x * blockDim.x)")
    zero = "".join(f"  {loop.format(n=s.shape.num_elements())} out{j}[L] = 0;\n"
                   for j, s in scratch)
    code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
            f'{", ".join(decl)}) {{\n{zero}' + "".join(x + "\n" for x in prologue)
            + f"  {loop.format(n=total)} {{\n"
            + "\n".join(L) + "\n  }\n}\n")
    nbytes = sum(s.num_elements() * s.dtype.itemsize for s in ops + [res])
    return KernelSource(name, step.name, f"conv_{mode}", code, params, (grid, 1, 1),
                        (threads, 1, 1), fibered, bytes_moved=nbytes,
                        extra={"filter_in_shared_memory": fibered,
                               "algorithm": alg.algo_id})

