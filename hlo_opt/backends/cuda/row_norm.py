"""The CUDA kernel of a row normalisation (``row_normalization`` kind: a ``__triton``
softmax / layer-norm fusion), one kernel per fusion as XLA's Triton emitter makes:

* rows of at most ``WARP_ROW_MAX`` elements: one warp per row, 8 rows per 256-thread
  block; longer rows: one 256-thread block per row (a grid-stride loop over rows);
* per row, each reduction in post order: every thread folds a strided slice of the row
  (the reduction's operand evaluated elementally, earlier reductions of the row already
  in registers), partials combine by warp shuffles (``hlo_shfl_xor``; a block combines its
  warps' partials through shared memory), so every thread holds the row's value;
* then every thread stores its strided slice of the output (the root evaluated at
  ``(row, c)``).

Inputs read row by row are staged first: the row is copied into shared memory with
16-byte vector loads (coalesced, once per row), and the reductions and the output read
it there.  A row of any length runs in the one kernel (the threads loop over it); inputs
whose rows do not fit the block's shared memory are read from global memory by each pass
instead (the looped fallback).
"""
from __future__ import annotations

from ...codegen import index as ix
from ...codegen.row_norm import RowEmitter, reached_from_root, reduction_var, row_norm_of
from .emitters import _VEC, KIND_EMITTERS, KernelSource, ReductionBlock, c_name, quad_runs
from .renderer import CTYPE, STORAGE, from_storage

WARP_ROW_MAX = 2048
THREADS = 256
SHARED_BYTES = 48 * 1024   # static shared memory of one block (no opt-in)


def _staged_inputs(k, rn, n, rows_per_block) -> list:
    """Kernel inputs read row by row (a fused parameter of the output's shape), staged in
    shared memory while they fit: each is then read from global memory once per row."""
    comp = k.instruction.fused_computation
    out, used = [], 0
    for p in sorted(comp.parameters, key=lambda q: q.parameter_number):
        num = k.input_map.get((p, 0))
        if num is None or tuple(p.shape.dims) != tuple(rn.root.shape.dims):
            continue
        size = rows_per_block * n * p.shape.dtype.itemsize
        if used + size <= SHARED_BYTES:
            out.append(num)
            used += size
    return out


def _quad_friendly(k, n) -> bool:
    """Rows of 4-element runs: a row length of a multiple of 4 and 16-byte aligned rows
    of every array input and the output (32-bit elements)."""
    arrays = [v.shape for v in k.inputs + k.outputs[:1] if v.shape.rank]
    return n % 4 == 0 and all(s.dtype.itemsize == 4 for s in arrays)


def _aligned_pointers(k, params) -> str:
    """``__builtin_assume_aligned`` for the array buffers that start on 16 bytes (every
    allocation does; an arena slice where its offset does)."""
    lines = []
    for ctype, role, slot in params:
        v = (k.inputs if role == "in" else k.outputs)[slot]
        sl = (k.input_slices if role == "in" else k.output_slices)[slot]
        if v.shape.rank and (sl.kind != "arena" or sl.offset % 16 == 0):
            name = f"{role}{slot}"
            lines.append(f"  {name} = ({ctype})__builtin_assume_aligned({name}, 16);\n")
    return "".join(lines)


def _kept_operands(k, rn, n, rows_per_block, staged) -> set:
    """Reductions whose operand the output reads again (softmax's ``exp(x - max)``) and is
    computed, not a plain input: each thread keeps its elements of it in a row buffer in
    shared memory while reducing, and the output reads them there (one ``exp`` per
    element, not two), while the buffers fit beside the staged inputs."""
    used = sum(rows_per_block * n * k.inputs[num].shape.dtype.itemsize for num in staged)
    out = set()
    for i, red in enumerate(rn.reduces):
        op = red.operands[0]
        if op.opcode in ("parameter", "constant", "broadcast") or \
                not reached_from_root(rn, op):
            continue
        size = rows_per_block * n * (8 if CTYPE[op.shape.element_type] in
                                     ("double", "int64_t", "uint64_t") else 4)
        if used + size <= SHARED_BYTES:
            out.add(i)
            used += size
    return out


def _declare_row_buffer(blk, name, ctype, n, rows_per_block, mode) -> None:
    """``name``: this row's ``n`` values in shared memory (a warp's own slot in warp mode).
    The thread that writes an element is the one that reads it back, so no barrier."""
    blk.emit(f"alignas(16) __shared__ {ctype} {name}_all[{rows_per_block * n}];")
    slot = f" + (threadIdx.x / 32) * {n}" if mode == "warp" else ""
    blk.emit(f"{ctype}* {name} = {name}_all{slot};")


def _stage(blk, k, staged, n, mode, tpr, it) -> None:
    """Copy the current row of each staged input into shared memory: 4-element vector
    copies (16 bytes for 32-bit types) when the row length allows, else element by
    element; every thread of the row copies a strided part, then the row's threads sync."""
    rows_per_block = THREADS // tpr
    me = "lane" if mode == "warp" else "threadIdx.x"
    for num in staged:
        v = k.inputs[num].shape
        st = STORAGE[v.element_type]
        size = v.dtype.itemsize
        total = v.num_elements()
        blk.emit(f"alignas(16) __shared__ {st} rs{num}[{rows_per_block * n}];")
        slot = f" + (threadIdx.x / 32) * {n}" if mode == "warp" else ""
        blk.emit(f"{st}* rw{num} = rs{num}{slot};")
        base = f"(({it})Rc * {n})"
        if size in _VEC and n % 4 == 0:
            t = f"{_VEC[size]}4"
            blk.emit(f"for (int j = {me}; j < {n // 4}; j += {tpr}) "
                     f"reinterpret_cast<{t}*>(rw{num})[j] = *reinterpret_cast<const {t}*>("
                     f"in{num} + HLO_CHK({base} + 4 * j, {total - 3}));")
        else:
            blk.emit(f"for (int j = {me}; j < {n}; j += {tpr}) "
                     f"rw{num}[j] = in{num}[HLO_CHK({base} + j, {total})];")
    if staged:
        blk.emit("__syncwarp();" if mode == "warp" else "__syncthreads();")


def emit_row_norm(ke) -> KernelSource:
    """``ke``: the KernelEmitter of the plan's kernel."""
    k = ke.k
    rn = row_norm_of(k.instruction)
    shape = k.outputs[0].shape
    n = shape.dims[-1]
    rows = 1
    for d in shape.dims[:-1]:
        rows *= d
    tpr = ke.cfg.row_threads or (32 if n <= WARP_ROW_MAX else THREADS)
    tpr = 32 if tpr <= 32 else THREADS
    mode = "warp" if tpr == 32 else "block"
    narrow = ke._narrow()
    it = "int" if narrow else "int64_t"
    name = c_name(k.name, ke.names)
    per_block = THREADS // tpr
    staged = _staged_inputs(k, rn, n, per_block)

    def load(attr, idx_code, dtype):
        if isinstance(attr, tuple) and attr[0] == "cache":  # held in its register type
            return f"rk{attr[1]}[HLO_CHK({idx_code}, {n})]"
        if isinstance(attr, tuple):
            return from_storage(dtype, f"rw{attr[1]}[HLO_CHK({idx_code}, {n})]")
        return ke._load(attr, idx_code, dtype)
    blk = ReductionBlock(load, narrow, mode, tpr, indent=2)
    # every element access of the row in 4-element runs per thread (vector loads and
    # stores): the instruction count, not the memory, bounded softmax on an H200
    blk.quad_order = _quad_friendly(k, n)
    row = ix.loop_var("R", max(rows, 2))
    blk.bindings["R"] = "Rc"
    batch = ix.delinearize(shape.dims[:-1], row) if rows > 1 else \
        tuple(ix.c(0) for _ in shape.dims[:-1])
    col = ix.loop_var("C", n)
    em = RowEmitter(k.input_map, batch, frozenset(staged))
    _stage(blk, k, staged, n, mode, tpr, it)
    kept = _kept_operands(k, rn, n, per_block, staged)
    for i, red in enumerate(rn.reduces):
        if i in kept:
            _declare_row_buffer(blk, f"rk{i}", CTYPE[red.operands[0].shape.element_type],
                                n, per_block, mode)
            blk.keep_values = f"rk{i}"
        code = blk.value(em.value(red, batch))
        if i in kept and blk.keep_values is None:  # the reduction loop stored them
            em.cached[red.operands[0]] = i
        blk.keep_values = None
        v = reduction_var(i, red)
        blk.bindings[v.attr] = code
        em.known[red] = v
    start = "lane" if mode == "warp" else "threadIdx.x"
    runs = quad_runs(n, tpr) if blk.quad_order else 0
    if runs:
        blk.open_quads("C", start, tpr, runs, it)
    else:
        blk.open(f"for ({it} C = {start}; C < {n}; C += {tpr})")
    blk.bindings["C"] = "C"
    idx = batch + (col,)
    val = blk.value(em.value(rn.root, idx))
    pos = blk.value(ix.linear_index(shape, idx))
    ke._store(blk, 0, pos, val)
    blk.close()
    if runs:
        blk.close()
    params, decl = ke._signature(name, [0])
    body = "\n".join(blk.lines)
    # the compiler may then merge a run's 4 accesses into one
    aligned = _aligned_pointers(k, params) if blk.quad_order else ""
    if mode == "warp":
        grid = (rows + per_block - 1) // per_block
        head = (f"  const int lane = threadIdx.x % 32;\n"
                f"  const {it} R = ({it})blockIdx.x * {per_block} + threadIdx.x / 32;\n"
                f"  if (R >= {rows}) return;  // whole warps leave together\n"
                f"  const {it} Rc = R;\n")
        open_, close_ = "", ""
    else:
        grid = min(rows, ke.device.core_count * 32)
        head = "  const int lane = threadIdx.x % 32;\n"
        open_ = (f"  for ({it} R = blockIdx.x; R < {rows}; R += gridDim.x) {{\n"
                 f"  const {it} Rc = R;\n")
        close_ = "  __syncthreads();\n  }\n"
    code = (f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}('
            f'{", ".join(decl)}) {{\n{aligned}{head}{open_}{body}\n{close_}}}\n')
    ks = KernelSource(name, k.name, "row_normalization", code, params,
                      (max(grid, 1), 1, 1), (THREADS, 1, 1), True, ke._bytes([0]))
    ks.extra["threads_per_row"] = tpr
    ks.extra["staged_inputs"] = list(staged)
    ks.extra["reductions"] = len(rn.reduces)
    return ks


KIND_EMITTERS["row_normalization"] = emit_row_norm
