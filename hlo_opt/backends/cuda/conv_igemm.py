"""Convolutions as implicit gemms: the conv kernel's tiled algorithms
(``conv.ALGORITHMS`` entries with a ``tile``), the gemm kernel's tile loops
(:func:`.gemm_emitter.emit_tile_product`: SIMT f32/f64 tiles, ``mma.sync`` f16/bf16 tiles
on sm_80+ with f32 accumulation, their cuda-sim emulation) on operands that are gathered
from the convolution's arrays as the tiles load them, never materialised.

Per feature group (``blockIdx.z``; batch groups of a plain convolution alike), on the
canonical roles of :mod:`.conv` (input (N, C, S...), kernel (O, I, K...), output
(N, O, P...), each read through the physical strides of its own layout), with ``og``
output features per group:

* forward: ``Y[M = N*P..., og] = A[M, I*K...] . W[I*K..., og]``, ``A[(n, p), (k, i)] =
  x[n', g*I + i, s]`` with ``s*lhs_dilate = p*stride + k*rhs_dilate - pad_lo`` (zero
  where that is a hole or outside the input: the im2col gather), ``W[(k, i), j] =
  w[g*og + j, i, k']`` (``k'`` reversed under ``rhs_reversal``); the epilogue of a
  ``convBiasActivationForward`` (scale, side input, bias, activation) is the direct
  kernel's (``conv.epilogue``);
* backward input: ``dX[N*S..., I] = dY[N*S..., K...*og] . W[K...*og, I]`` with
  ``dY[(n, s), (k, j)] = dy[n, g*og + j, p]`` where ``p*stride + k*rhs_dilate =
  s*lhs_dilate + pad_lo`` (zero where no such ``p``);
* backward filter: ``dW[K...*I, og] = X[K...*I, N*P...] . dY[N*P..., og]`` with
  ``X[(k, i), (n, p)] = x[n, g*I + i, s]`` at the (reversed) offset ``k'``.

The reduction index runs with the fastest digit (the reduced feature, or the output
pixel) innermost, so NHWC gathers read contiguous words.  Declined (the direct kernel of
algorithm 0 runs instead): operands of different types, a plain convolution that rounds
its operands to its result type (f32 -> f16; f16/bf16 -> f32 is exact and taken), more
than 65535 row tiles or groups.
"""
from __future__ import annotations

import math

from ...errors import UnsupportedError
from ...ir.types import numpy_dtype
from .emitters import KernelSource, c_name
from .gemm_emitter import _LD2, TileOperand, emit_tile_product, tile_path
from .renderer import CTYPE, STORAGE, to_storage


def _split(it: str, var: str, names: list, sizes: list) -> list:
    """Statements naming the mixed-radix digits of ``var`` (the last fastest); the first
    digit is not reduced (``var`` is in range)."""
    out = []
    for d, (nm, sz) in enumerate(zip(names, sizes)):
        inner = math.prod(sizes[d + 1:])
        q = f"{var} / {inner}" if inner != 1 else var
        out.append(f"const {it} {nm} = " + (f"{q};" if d == 0 else f"({q}) % {sz};"))
    return out


def _sum(strides, idx) -> str:
    return " + ".join(f"({i}) * {s}" for i, s in zip(idx, strides) if s) or "0"


def _gather(name: str, it: str, row: tuple, red: tuple, body: list, at: str) -> list:
    """A lambda ``name(row, kr)`` in the kernel (of the block's group ``gz``): the element
    index of one operand of the gemm, -1 outside it (``row`` / ``red``: (bound, digit
    names, digit sizes) of the row and reduction indices; ``body``: statements that may
    ``return -1``)."""
    lines = [f"auto {name} = [&]({it} row, {it} kr) -> {it} {{",
             f"  if (row >= {row[0]} || kr >= {red[0]}) return -1;"]
    lines += ["  " + x for x in _split(it, "row", row[1], row[2])]
    lines += ["  " + x for x in _split(it, "kr", red[1], red[2])]
    lines += ["  " + x for x in body]
    lines += [f"  return {at};", "};"]
    return lines


def _contiguous8(strides, sizes, fast: int, digit: int) -> bool:
    """16-byte loads of a gathered operand: its fastest reduced digit (dim ``fast``, of
    ``digit`` values, a feature dim: the gather's bounds do not depend on it) is
    contiguous and a multiple of 8, every other dim steps by a multiple of 8 elements."""
    return strides[fast] == 1 and digit % 8 == 0 and all(
        st % 8 == 0 for d, (st, sz) in enumerate(zip(strides, sizes)) if d != fast and sz > 1)


def emit_igemm_conv(cc, names: set, device, epilogue) -> KernelSource:
    """The implicit-gemm kernel of a :class:`.conv.ConvCall` on its algorithm's tile
    (``epilogue``: ``conv.epilogue``); UnsupportedError where it declines."""
    tile = cc.alg.tile
    step = cc.step
    t0, t1 = cc.types[0], cc.types[1]
    # a plain convolution converts its operands to the result type first: exact (so
    # skipped) from f16/bf16 to f32, a rounding the tiles do not make else
    if t0 != t1 or (cc.plain and t0 != cc.et and not (t0 in ("f16", "bf16")
                                                      and cc.et == "f32")):
        raise UnsupportedError(f"cuda conv: implicit gemm of {t0} x {t1} -> {cc.et}")
    dtype = t0
    path, shape = tile_path(dtype, tile, device)
    (xd, xs), (wd, ws), (yd, ys) = cc.dims["input"], cc.dims["kernel"], cc.dims["output"]
    win = cc.params.window
    sp = len(win)
    K = [d.size for d in win]
    G, B = cc.G, cc.B
    groups = G if B == 1 else B
    O, I = wd[0], wd[1]
    og = O // groups
    sizes = [s.num_elements() for s in cc.ops + [cc.res]]
    it = "int" if max(sizes) < (1 << 31) - 1 else "long long"
    kn = [f"k{d}" for d in range(sp)]
    kk = [f"({K[d] - 1} - k{d})" if win[d].window_reversal else f"k{d}" for d in range(sp)]
    mode = cc.mode
    ia, ib = (cc.roles.index(r) for r in {"forward": ("input", "kernel"),
                                          "backward_input": ("output", "kernel"),
                                          "backward_filter": ("input", "output")}[mode])
    name = c_name(step.name, names)
    fa, fb = "gather_a", "gather_b"

    def x_at(n, c, pos):
        """The input read at dilated positions ``pos`` (statements, index)."""
        body = []
        for d, w in enumerate(win):
            body.append(f"const {it} t{d} = {pos[d]};")
            if w.base_dilation > 1:
                body.append(f"if (t{d} % {w.base_dilation} != 0) return -1;")
            body.append(f"const {it} s{d} = t{d} / {w.base_dilation};")
            body.append(f"if (s{d} < 0 || s{d} >= {xd[2 + d]}) return -1;")
        return body, _sum(xs, [n, c] + [f"s{d}" for d in range(sp)])

    pp = [f"p{d}" for d in range(sp)]
    ss = [f"s{d}" for d in range(sp)]
    last = (lambda st: st[-1]) if sp else (lambda st: st[0])
    if mode == "forward":
        dm, dn, k = yd[0] * math.prod(yd[2:]), og, math.prod(K) * I
        nx = f"gz * {yd[0]} + n" if B > 1 else "n"
        c = f"gz * {I} + i" if G > 1 else "i"
        body, at = x_at(nx, c, [f"p{d} * {w.stride} + k{d} * {w.window_dilation} - "
                                f"({w.padding_low})" for d, w in enumerate(win)])
        ga = _gather(fa, it, (dm, ["n"] + pp, [yd[0]] + yd[2:]), (k, kn + ["i"], K + [I]),
                     body, at)
        gb = _gather(fb, it, (og, ["j"], [og]), (k, kn + ["i"], K + [I]), [],
                     _sum(ws, [f"gz * {og} + j", "i"] + kk))
        a_minor, b_minor = xs[1] <= last(xs), ws[1] <= ws[0]
        vec = _contiguous8(xs, xd, 1, I), _contiguous8(ws, wd, 1, I)
        row_sizes = [yd[0]] + yd[2:]
        res_idx = lambda: ["yr0", "o"] + [f"yr{d + 1}" for d in range(sp)]  # noqa: E731
        res_st = ys
    elif mode == "backward_input":
        dm, dn, k = xd[0] * math.prod(xd[2:]), I, math.prod(K) * og
        body = []
        for d, w in enumerate(win):
            body.append(f"const {it} t{d} = s{d} * {w.base_dilation} + ({w.padding_low}) - "
                        f"k{d} * {w.window_dilation};")
            body.append(f"if (t{d} < 0" + (f" || t{d} % {w.stride} != 0" if w.stride > 1
                                           else "") + ") return -1;")
            body.append(f"const {it} p{d} = t{d} / {w.stride};")
            body.append(f"if (p{d} >= {yd[2 + d]}) return -1;")
        ga = _gather(fa, it, (dm, ["n"] + ss, [xd[0]] + xd[2:]), (k, kn + ["j"], K + [og]),
                     body, _sum(ys, ["n", f"gz * {og} + j"] + pp))
        gb = _gather(fb, it, (I, ["ci"], [I]), (k, kn + ["j"], K + [og]), [],
                     _sum(ws, [f"gz * {og} + j", "ci"] + kk))
        a_minor, b_minor = ys[1] <= last(ys), ws[0] <= ws[1]
        vec = _contiguous8(ys, yd, 1, og), _contiguous8(ws, wd, 0, og)
        row_sizes = [xd[0]] + xd[2:]
        res_idx = lambda: ["yr0", f"gz * {I} + gj"] + [f"yr{d + 1}" for d in range(sp)]  # noqa: E731
        res_st = xs
    else:  # backward_filter: rows (k..., i), reduction (n, p...)
        dm, dn, k = math.prod(K) * I, og, xd[0] * math.prod(yd[2:])
        body, at = x_at("n", f"gz * {I} + i" if G > 1 else "i",
                        [f"p{d} * {w.stride} + {kk[d]} * {w.window_dilation} - "
                         f"({w.padding_low})" for d, w in enumerate(win)])
        ga = _gather(fa, it, (dm, kn + ["i"], K + [I]), (k, ["n"] + pp, [xd[0]] + yd[2:]),
                     body, at)
        gb = _gather(fb, it, (og, ["j"], [og]), (k, ["n"] + pp, [xd[0]] + yd[2:]), [],
                     _sum(ys, ["n", f"gz * {og} + j"] + pp))
        a_minor, b_minor = last(xs) <= xs[1], last(ys) <= ys[1]
        vec = False, False     # the reduction's fastest digit is a position
        row_sizes = K + [I]
        res_idx = lambda: ["o", "yr" + str(sp)] + [f"yr{d}" for d in range(sp)]  # noqa: E731
        res_st = ws
    if -(-dm // tile.block_m) > 65535 or groups > 65535:
        raise UnsupportedError(f"cuda conv: implicit gemm of {dm} rows x {groups} groups")
    na, nb = sizes[ia], sizes[ib]
    vec = [v and path == "mma" and tile.block_k % 8 == 0 for v in vec]
    opa = TileOperand(f"in{ia}", a_minor, na, lambda r, g: f"{fa}({r}, {g})",
                      vec="va" if vec[0] else None)
    opb = TileOperand(f"in{ib}", b_minor, nb, lambda r, g: f"{fb}({r}, {g})",
                      vec="vb" if vec[1] else None)
    L = []
    emit = L.append
    emit("  const int gz = blockIdx.z;")
    L.extend("  " + x for x in ga + gb)
    acc, et = cc.acc, cc.et
    ct = CTYPE[acc]
    # the scratch outputs of a cuDNN call, zeroed by the whole grid
    scratch = [(j, s) for j, s in enumerate(step.outputs[1:], 1)
               if s.shape.num_elements() > 0]
    for j, s in scratch:
        emit(f"  for ({it} L = (({it})(blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + "
             f"blockIdx.x) * blockDim.x + threadIdx.x; L < {s.shape.num_elements()}; "
             f"L += ({it})gridDim.x * gridDim.y * gridDim.z * blockDim.x) out{j}[L] = 0;")
    indent, closer = emit_tile_product(emit, path, shape, tile, dtype, it, dm, dn, k,
                                       opa, opb)
    e = [f"if (gi < {dm} && gj < {dn}) {{"]
    e += ["  " + x for x in _split(it, "gi", [f"yr{d}" for d in range(len(row_sizes))],
                                  row_sizes)]
    e.append(f"  const {it} o = gz * {og} + gj;")
    e.append("  (void)o;")
    idx = res_idx()
    e.append(f"  {ct} acc = r;")
    val = epilogue(cc, "o", idx, lambda line: e.append("  " + line))
    val = f"(({CTYPE[et]}){val})" if CTYPE[et] != ct else val
    e.append(f"  out0[HLO_CHK({_sum(res_st, idx)}, {sizes[-1]})] = {to_storage(et, val)};")
    e.append("}")
    L.extend(indent + x for x in e)
    L.append(closer)
    params = [(f"const {STORAGE[t]}*", "in", i) for i, t in enumerate(cc.types)]
    params.append((f"{STORAGE[et]}*", "out", 0))
    params += [(f"{STORAGE[s.shape.element_type]}*", "out", j) for j, s in scratch]
    decl = [f"{t} __restrict__ {'in' if role == 'in' else 'out'}{slot}"
            for t, role, slot in params]
    code = ((_LD2 if path == "mma" else "")
            + f'extern "C" __global__ void __launch_bounds__({tile.threads}) {name}('
            + ", ".join(decl) + ") {\n" + "\n".join(L) + "\n}\n")
    grid = (max(1, -(-dn // tile.block_n)), max(1, -(-dm // tile.block_m)), groups)
    nbytes = sum(s.num_elements() * numpy_dtype(s.element_type).itemsize
                 for s in cc.ops + [cc.res])
    return KernelSource(name, step.name, f"conv_{mode}", code, params, grid,
                        (tile.threads, 1, 1), True, bytes_moved=nbytes,
                        extra={"filter_in_shared_memory": False, "algorithm": cc.alg.algo_id,
                               "implicit_gemm": True, "tile": tile,
                               "tensor_cores": path == "mma",
                               "vector_loads": tuple(bool(v) for v in vec),
                               "flops": 2 * dm * dn * k * groups})
