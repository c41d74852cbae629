"""Sort and top-k as CUDA kernels (XLA's sort emitter in spirit), for a ``sort`` / ``topk``
step of the plan (unfused, a ``TopK`` custom call, or a fusion whose root is the sort:
its operands are computed elementally from the kernel inputs, e.g. the iota XLA's
StableSortExpander adds).

One thread block per row (every dimension but the sort dimension is a row, rows in the
physical order of the first output; a grid-stride loop over rows):

1. the row's operand values are staged (storage types) and an index array holds
   ``0 .. P-1`` (``P``: the row length rounded up to a power of two);
2. a bitonic sort of the index array: ``less(a, b)`` is the comparator
   ``to_apply(lhs_0, rhs_0, lhs_1, rhs_1, ...)`` (rendered as a device function from the
   computation) at the staged values, an index ``>= n`` (padding) is greater than
   everything, and when the comparator orders neither way the lower index goes first --
   so the sort is always stable, as the interpreter's (a valid result for
   ``is_stable=false`` too, and the same one);
3. every output element ``i`` of the row is the staged value at ``index[i]`` (top-k: the
   first k, and the index itself).

Rows whose staging fits the block's static shared memory (``device.
shared_memory_per_block``: 4096 f32 keys, or 4096 f32 keys with s32 values) sort in shared
memory.  Longer rows take a merge sort (XLA's and CUB's shape), several launches in order:

1. every block sorts a tile of a row (the largest power of two whose staging fits the
   shared memory) with the same staging and bitonic code, tiles of all rows over the whole
   grid, writing the tile's sorted row positions and the staged row to ``__device__``
   scratch (``rows * n`` staged values and a ping-pong pair of ``rows * n`` positions; a
   fixed size per step, so graph capture sees launches only);
2. ``log2(tiles)`` merge passes, each a launch over all rows: every thread finds its
   ``MERGE_ITEMS`` outputs' split of a pair of sorted runs by a binary search along its
   merge-path diagonal, then merges them into the other buffer -- ``less`` orders ties by
   position, so the left run's come first (stable, as the bitonic sort); top-k merges
   only the first k of each run;
3. the outputs gathered from the staged values (top-k: the first k positions).

The scratch holds the rows that fit ``MERGE_SCRATCH_BYTES``; more rows run the three steps
chunk after chunk (up to ``MERGE_CHUNKS``).  Beyond that, or a row alone past the scratch,
each row runs in one block with its staging in a ``__device__`` array (one row per block
in flight, the grid capped so the scratch stays under ``SCRATCH_BYTES``).

Top-k (``topk``, or XLA:CPU's ``TopK`` custom call) sorts with the comparator "greater in
XLA's total order" (``largest=false``: less), ties by the lower index, as the interpreter.
"""
from __future__ import annotations

from ...codegen import index as ix
from ...codegen.elemental import ElementalEmitter, computation_exprs
from ...codegen.expr import Expr, var
from ...errors import UnsupportedError
from .emitters import KernelBlock, KernelSource, c_name, step_input_map
from .renderer import BITS, CTYPE, STORAGE, Block, check_type, from_storage, to_storage

MAX_THREADS = 512
SCRATCH_BYTES = 64 << 20       # global staging of all blocks in flight (long rows)
MAX_ROW_BYTES = 1 << 30        # a longer row runs on the host
MERGE_SCRATCH_BYTES = 1 << 30  # the merge sort's scratch: rows in chunks of what it holds
MERGE_CHUNKS = 16              # more chunks (or a row over the scratch): one block per row
MERGE_ITEMS = 16               # outputs per thread of a merge pass
MERGE_THREADS = 256


def _hero(inst):
    if inst.opcode in ("sort", "topk"):
        return inst
    if inst.opcode == "custom-call" and inst.attr("custom_call_target", "") == "TopK":
        return inst
    if inst.opcode == "fusion" and inst.fused_computation.root.opcode == "sort":
        return inst.fused_computation.root
    return None


def _spec(s, step):
    """(sort dim, operands, comparator expr over p0..p{2N-1}, outputs kept per row, topk)."""
    ops = list(s.operands)
    if not ops or any(not o.shape.is_array() for o in ops):
        raise UnsupportedError("sort: tuple-shaped operands")
    if s.opcode == "sort":
        dims = s.attr("dimensions", ())
        if len(dims) != 1:
            raise UnsupportedError(f"sort: dimensions={list(dims)}")
        d = dims[0]
        for o in ops[1:]:
            if list(o.shape.dims) != list(ops[0].shape.dims):
                raise UnsupportedError("sort: operands of different shapes")
        params = []
        for o in ops:
            params += [(f"p{len(params)}", o.shape.element_type),
                       (f"p{len(params) + 1}", o.shape.element_type)]
        root = s.to_apply.root
        if not root.shape.is_array() or root.shape.element_type != "pred" or root.shape.dims:
            raise UnsupportedError("sort: the comparator does not return a pred scalar")
        cmp = computation_exprs(s.to_apply, params)[0]
        return d, ops, params, cmp, ops[0].shape.dims[d], False
    # top-k along the last dimension: (values, s32 indices)
    if len(ops) != 1 or ops[0].shape.rank == 0 or len(step.outputs) != 2:
        raise UnsupportedError("topk: one operand of rank >= 1, (values, indices)")
    if s.opcode == "topk":
        k, largest = s.attr("k"), s.attr("largest", True)
    else:
        from ..interpreter.ops_custom_call import _comparator_is_less
        k, largest = step.outputs[0].shape.dims[-1], not _comparator_is_less(s)
    d = ops[0].shape.rank - 1
    if k is None or not 0 < k <= ops[0].shape.dims[d]:
        raise UnsupportedError(f"topk: k={k}")
    et = ops[0].shape.element_type
    params = [("p0", et), ("p1", et)]
    cmp = Expr("compare", "pred", (var("p0", et), var("p1", et)),
               ("GT" if largest else "LT", "TOTALORDER"))
    return d, ops, params, cmp, k, True


def emit_sort(step, names: set, device):
    """The kernels of a sort / top-k step, or None when the step is not one: one
    KernelSource (a row in one block), or a list run in order (the merge sort)."""
    s = _hero(step.instruction)
    if s is None:
        return None
    d, ops, params, cmp, keep, topk = _spec(s, step)
    for o in ops:
        check_type(o.shape.element_type, "sort")
    outs = [v.shape for v in step.outputs]
    for o in outs:
        check_type(o.element_type, "sort")
    shape = ops[0].shape
    n = shape.dims[d]
    total = shape.num_elements()
    if n == 0 or total == 0:
        raise UnsupportedError("sort: an empty operand")
    rows = total // n
    p2 = 1 << (n - 1).bit_length()
    op_bytes = sum(BITS[o.shape.element_type] // 8 for o in ops)
    row_bytes = p2 * 4 + n * op_bytes
    smem = device.shared_memory_per_block
    shared = row_bytes <= smem
    tile = 1 << ((smem // (4 + op_bytes)).bit_length() - 1) if smem >= 4 + op_bytes else 0
    chunk = MERGE_SCRATCH_BYTES // (n * (8 + op_bytes))      # rows the scratch holds
    merge = not shared and tile >= 2 * MERGE_ITEMS and chunk >= 1 and \
        -(-rows // min(rows, chunk)) <= MERGE_CHUNKS
    if not shared and not merge and row_bytes > MAX_ROW_BYTES:
        raise UnsupportedError(f"sort: a row of {row_bytes} bytes")
    sizes = [v.shape.num_elements() for v in step.inputs]
    narrow = max(sizes + [total, p2]) < (1 << 30)
    g = _Gen(step, c_name(step.name, names), ops, outs, d, n, rows, keep, topk, narrow)
    cmp_name = c_name(g.name + "_cmp", names)
    g.less = c_name(g.name + "_less", names)
    g.less_values = c_name(g.less + "_values", names)
    head = [_comparator(cmp_name, params, cmp),
            _less(g.less, g.less_values, cmp_name, params, g.st)]
    kind = "topk" if topk else "sort"
    extra = {"row": n, "padded_row": p2, "rows": rows, "shared": shared, "merge": merge}
    if merge:
        return _merge_sort(g, names, device, head, tile, chunk, kind, extra)
    threads = min(MAX_THREADS, max(32, p2 // 2))
    grid = min(rows, device.core_count * 16) if shared else \
        max(1, min(rows, device.core_count * 2, SCRATCH_BYTES // row_bytes))
    lines = []
    if shared:
        lines.append(f"  __shared__ int32_t sidx[{p2}];")
        lines += [f"  __shared__ {t} sv{k}[{n}];" for k, t in enumerate(g.st)]
    else:
        head.append(f"__device__ int32_t {g.name}_idx[{grid * p2}];\n" + "".join(
            f"__device__ {t} {g.name}_v{k}[{grid * n}];\n" for k, t in enumerate(g.st)))
        lines.append(f"  int32_t* sidx = {g.name}_idx + (int64_t)blockIdx.x * {p2};")
        lines += [f"  {t}* sv{k} = {g.name}_v{k} + (int64_t)blockIdx.x * {n};"
                  for k, t in enumerate(g.st)]
    lines.append(f"  for ({g.it} row = blockIdx.x; row < {rows}; row += gridDim.x) {{")
    lines += g.sort_block(p2, threads, str(n), "e", [])
    # 3. the outputs of the row
    lines.append(f"    for (int e = threadIdx.x; e < {keep}; e += {threads}) {{")
    lines.append("      const int src = sidx[e];")
    lines += g.output_lines(3)
    lines += ["    }", "    __syncthreads();", "  }"]
    head.append(g.kernel(g.name, threads, lines))
    return KernelSource(g.name, step.name, kind + ("_shared" if shared else "_global"),
                        "\n".join(head), g.params, (grid, 1, 1), (threads, 1, 1), True,
                        extra=extra)


class _Gen:
    """What the kernels of one sort step share: the row geometry and the code that stages
    a row (or tile), sorts it in a block and writes the outputs."""

    def __init__(self, step, name, ops, outs, d, n, rows, keep, topk, narrow):
        self.step, self.name, self.ops, self.outs = step, name, ops, outs
        self.n, self.rows, self.keep, self.topk, self.narrow = n, rows, keep, topk, narrow
        self.it = "int" if narrow else "int64_t"
        self.st = [STORAGE[o.shape.element_type] for o in ops]
        self.types = [o.shape.element_type for o in ops]
        self.vs = ", ".join(f"sv{k}" for k in range(len(ops)))
        self.params = [(f"const {STORAGE[v.shape.element_type]}*", "in", i)
                       for i, v in enumerate(step.inputs)]
        self.params += [(f"{STORAGE[o.element_type]}*", "out", i) for i, o in enumerate(outs)]
        self.decl = ", ".join(f"{t} {r}{i}" for t, r, i in self.params)
        shape = ops[0].shape
        # the multi-index of (row R, position I): rows over the other dims, outputs' order
        m2m = list(outs[0].effective_layout().minor_to_major)
        other = [x for x in reversed(m2m) if x != d]
        rv, iv = ix.loop_var("R", max(rows, 2)), ix.loop_var("I", max(n, 2))
        ri = ix.delinearize([shape.dims[x] for x in other], rv) if other else ()
        idx = [None] * shape.rank
        for x, e in zip(other, ri):
            idx[x] = e
        idx[d] = iv
        self.idx = tuple(idx)
        self.oidx = tuple(ix.loop_var("I", max(keep, 2)) if x == d else e
                          for x, e in enumerate(self.idx))

    def load(self, num, code, dtype):
        size = self.step.inputs[num].shape.num_elements()
        return from_storage(dtype, f"in{num}[HLO_CHK({code}, {size})]")

    def kernel(self, name, threads, lines) -> str:
        return (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{self.decl}) {{\n' + "\n".join(lines) + "\n}\n")

    def sort_block(self, p2, threads, count, pos, copies) -> list:
        """In row ``row``: stage the ``count`` values at positions ``pos`` (``e``: the
        position in the block) into ``sv*`` (and the ``copies``, indexed by ``pos``), then
        a bitonic sort of the index array ``sidx`` (``0 .. p2-1``; ``>= count``: padding)."""
        em = ElementalEmitter(step_input_map(self.step))
        blk = KernelBlock(self.load, self.narrow, indent=4)
        blk.bindings["R"], blk.bindings["I"] = "row", pos
        for k, o in enumerate(self.ops):
            value = blk.value(em.value(o, self.idx))
            blk.emit(f"sv{k}[e] = {to_storage(o.shape.element_type, value)};")
        blk.lines += [f"        {c}[{pos}] = sv{k}[e];" for k, c in enumerate(copies)]
        lines = [f"    for (int e = threadIdx.x; e < {p2}; e += {threads}) {{",
                 "      sidx[e] = e;",
                 f"      if (e < {count}) {{"]
        if pos != "e":
            lines.append(f"        const {self.it} {pos} = {pos}0 + e;")
        lines += blk.lines
        lines += ["      }", "    }", "    __syncthreads();"]
        # the bitonic sort of the index array
        lines += [
            f"    for (int kk = 2; kk <= {p2}; kk <<= 1) {{",
            "      for (int jj = kk >> 1; jj > 0; jj >>= 1) {",
            "        #pragma unroll 1",
            f"        for (int t = threadIdx.x; t < {p2 // 2}; t += {threads}) {{",
            "          const int lo = ((t & ~(jj - 1)) << 1) | (t & (jj - 1)), hi = lo + jj;",
            "          const int a = sidx[lo], b = sidx[hi];",
            f"          if ((lo & kk) == 0 ? {self.less}(b, a, {count}, {self.vs}) : "
            f"{self.less}(a, b, {count}, {self.vs})) {{",
            "            sidx[lo] = b;",
            "            sidx[hi] = a;",
            "          }",
            "        }",
            "        __syncthreads();",
            "      }",
            "    }"]
        return lines

    def output_lines(self, indent) -> list:
        """Output element ``e`` of row ``row``: the staged ``sv*[src]`` (top-k: and
        ``src``)."""
        oblk = KernelBlock(self.load, self.narrow, indent=indent)
        oblk.bindings["R"], oblk.bindings["I"] = "row", "e"
        for k, o in enumerate(self.outs):
            pos = oblk.value(ix.linear_index(o, self.oidx))
            src = "src" if self.topk and k == 1 else f"sv{k}[src]"
            oblk.emit(f"out{k}[HLO_CHK({pos}, {o.num_elements()})] = {src};")
        return oblk.lines


def _merge_sort(g, names, device, head, tile, chunk, kind, extra) -> list:
    """Rows longer than a block's tile: (1) every block sorts a tile of a row in shared
    memory (``sort_block``), tiles of all rows over the whole grid, writing the sorted row
    positions and the staged values to ``__device__`` scratch; (2) log2(tiles) passes,
    each merging pairs of sorted runs into the other half of a ping-pong index buffer,
    every thread ``MERGE_ITEMS`` outputs from its merge-path split (a binary search along
    its diagonal; ``less`` orders ties by position, so the left run's come first: stable);
    (3) the outputs (top-k: the first k) gathered from the staged values.  The scratch
    holds ``chunk`` rows: more rows run the three steps chunk after chunk (the kernels of
    a chunk: wrappers of the same device functions with the chunk's first row)."""
    n, rows, st, name = g.n, g.rows, g.st, g.name
    keep, K, mthreads = g.keep, MERGE_ITEMS, MERGE_THREADS
    tiles = -(-n // tile)
    passes = (tiles - 1).bit_length()
    cr = min(rows, chunk)
    chunks = -(-rows // cr)
    total = cr * n              # positions fit an int: the scratch is under 2^30 bytes
    tthreads = min(MAX_THREADS, max(32, tile // 2))
    cap_grid = device.core_count * 16
    gidx = c_name(name + "_idx", names)
    sv = [c_name(f"{name}_v{k}", names) for k in range(len(st))]
    head.append(f"__device__ int32_t {gidx}[{2 * total}];\n" + "".join(
        f"__device__ {t} {v}[{total}];\n" for v, t in zip(sv, st)))
    extra = dict(extra, tile=tile, tiles=tiles, passes=passes, chunks=chunks)
    args = ", ".join(f"{r}{i}" for _, r, i in g.params)
    # (1) the tiles of rows row0 .. row0 + nrows - 1
    tiles_fn = c_name(name + "_tiles", names)
    smem = ", ".join(["int32_t* sidx"] + [f"{t}* sv{k}" for k, t in enumerate(st)])
    lines = [f"__device__ __forceinline__ void {tiles_fn}(const int64_t row0, const int nrows, "
             f"{smem}, {g.decl}) {{",
             f"  for (int64_t b = blockIdx.x; b < (int64_t)nrows * {tiles}; b += gridDim.x) {{",
             f"    const int local = (int)(b / {tiles});",
             f"    const {g.it} row = ({g.it})(row0 + local);",
             f"    const int pos0 = (int)(b - (int64_t)local * {tiles}) * {tile};",
             f"    const int cnt = {n} - pos0 < {tile} ? {n} - pos0 : {tile};",
             f"    const int base = local * {n};"]
    lines += g.sort_block(tile, tthreads, "cnt", "pos", [f"({v} + base)" for v in sv])
    lines += [f"    for (int e = threadIdx.x; e < cnt; e += {tthreads})",
              f"      {gidx}[base + pos0 + e] = pos0 + sidx[e];",
              "    __syncthreads();", "  }", "}", ""]
    head.append("\n".join(lines))
    # (2) the merge passes; top-k merges only the first k of each run (all a later pass
    # or the outputs read)
    merge = c_name(name + "_merge", names)
    vrow = "".join(f", {v} + base" for v in sv)
    ba = ", ".join(f"b{k}, a{k}" for k in range(len(st)))

    def cap(x):
        return f"{x} < {keep} ? {x} : {keep}" if keep < n else x

    def heads(run, pos, indent="    "):
        return [f"{indent}{run}{k} = {from_storage(dt, f'{v}[base + {pos}]')};"
                for k, (v, dt) in enumerate(zip(sv, g.types))]
    head.append("\n".join([
        f"__device__ __forceinline__ void {merge}(const int w, const int per_pair, "
        "const int per_row, const int count, const int32_t* src, int32_t* dst) {",
        f"  for (int g = blockIdx.x * {mthreads} + threadIdx.x; g < count; "
        f"g += gridDim.x * {mthreads}) {{",
        "    const int row = g / per_row, r = g - row * per_row, pair = r / per_pair;",
        f"    const int s = pair * 2 * w, diag = (r - pair * per_pair) * {K};",
        f"    const int ra = {n} - s < w ? {n} - s : w;",
        f"    const int rb = {n} - s - ra < w ? {n} - s - ra : w;",
        f"    const int la = {cap('ra')}, lb = {cap('rb')};",
        f"    const int len = {cap('la + lb')};",
        "    if (diag >= len) continue;",
        f"    const int base = row * {n};",
        "    const int32_t* a = src + base + s;",
        "    const int32_t* b = a + ra;",
        "    int lo = diag > lb ? diag - lb : 0, hi = diag < la ? diag : la;",
        "    #pragma unroll 1",
        "    while (lo < hi) {",
        "      const int mid = (lo + hi) >> 1;",
        f"      if ({g.less}(b[diag - 1 - mid], a[mid], {n}{vrow})) hi = mid;",
        "      else lo = mid + 1;",
        "    }",
        "    int i = lo, j = diag - lo;",
        f"    const int end = diag + (len - diag < {K} ? len - diag : {K});",
        # the heads of both runs and their values in registers (position 0: a valid
        # stand-in for an exhausted run)
        "    int pa = i < la ? a[i] : 0, pb = j < lb ? b[j] : 0;",
        *[f"    {CTYPE[dt]} a{k}, b{k};" for k, dt in enumerate(g.types)],
        *heads("a", "pa"), *heads("b", "pb"),
        "    #pragma unroll 1",
        "    for (int q = diag; q < end; ++q) {",
        f"      if (j < lb && (i >= la || {g.less_values}(pb, pa, {ba}))) {{",
        "        dst[base + s + q] = pb;",
        "        if (++j < lb) {",
        "          pb = b[j];",
        *heads("b", "pb", " " * 10),
        "        }",
        "      } else {",
        "        dst[base + s + q] = pa;",
        "        if (++i < la) {",
        "          pa = a[i];",
        *heads("a", "pa", " " * 10),
        "        }",
        "      }",
        "    }",
        "  }",
        "}", ""]))
    # (3) the outputs of rows row0 .. row0 + nrows - 1
    out_fn = c_name(name + "_outputs", names)
    lines = [f"__device__ __forceinline__ void {out_fn}(const int64_t row0, const int nrows, "
             f"{g.decl}) {{",
             f"  for (int64_t q = (int64_t)blockIdx.x * {mthreads} + threadIdx.x; "
             f"q < (int64_t)nrows * {keep}; q += (int64_t)gridDim.x * {mthreads}) {{",
             f"    const int local = (int)(q / {keep}), e = (int)(q - (int64_t)local * {keep});",
             f"    const {g.it} row = ({g.it})(row0 + local);",
             f"    const int src = {gidx}[{total * (passes % 2)} + local * {n} + e];"]
    lines += [f"    const {t}* sv{k} = {v} + local * {n};" for k, (v, t) in enumerate(zip(sv, st))]
    lines += g.output_lines(2)
    lines += ["  }", "}", ""]
    head.append("\n".join(lines))
    # the kernels, chunk after chunk
    ks = []
    shared = [f"  __shared__ int32_t sidx[{tile}];"]
    shared += [f"  __shared__ {t} sv{k}[{tile}];" for k, t in enumerate(st)]
    svs = ", ".join(["sidx"] + [f"sv{k}" for k in range(len(st))])
    for c in range(chunks):
        row0, nrows = c * cr, min(cr, rows - c * cr)
        pre = name if c == 0 else c_name(f"{name}_c{c}", names)
        code = g.kernel(pre, tthreads, shared + [
            f"  {tiles_fn}({row0}, {nrows}, {svs}, {args});"])
        grid = max(1, min(nrows * tiles, cap_grid))
        ks.append(KernelSource(pre, g.step.name, kind + "_tiles", code, g.params,
                               (grid, 1, 1), (tthreads, 1, 1), True, extra=extra))
        for p in range(passes):
            w = tile << p
            per_pair = -(-min(keep, 2 * w) // K)
            per_row = -(-n // (2 * w)) * per_pair
            kn = c_name(f"{pre}_merge{p}", names)
            src, dst = f"{gidx} + {total * (p % 2)}", f"{gidx} + {total * (1 - p % 2)}"
            code = g.kernel(kn, mthreads, [
                f"  {merge}({w}, {per_pair}, {per_row}, {nrows * per_row}, {src}, {dst});"])
            grid = max(1, min(-(-nrows * per_row // mthreads), cap_grid))
            ks.append(KernelSource(kn, g.step.name, kind + "_merge", code, g.params,
                                   (grid, 1, 1), (mthreads, 1, 1), False, extra=extra))
        on = c_name(f"{pre}_out", names)
        code = g.kernel(on, mthreads, [f"  {out_fn}({row0}, {nrows}, {args});"])
        grid = max(1, min(-(-nrows * keep // mthreads), cap_grid))
        ks.append(KernelSource(on, g.step.name, kind + "_out", code, g.params, (grid, 1, 1),
                               (mthreads, 1, 1), False, extra=extra))
    ks[0].code = "\n".join(head + [ks[0].code])   # what every kernel uses comes first
    return ks


def _comparator(name, params, cmp) -> str:
    """``bool NAME(lhs_0, rhs_0, lhs_1, ...)``: the comparator computation."""
    def no_load(*_):
        raise UnsupportedError("sort: the comparator reads memory")
    blk = Block(no_load, indent=1)
    for p, _ in params:
        blk.bindings[p] = p
    out = blk.value(cmp)
    args = ", ".join(f"const {CTYPE[dt]} {p}" for p, dt in params)
    return (f"__device__ __forceinline__ bool {name}({args}) {{\n" + "\n".join(blk.lines)
            + f"\n  return {out};\n}}\n")


def _less(name, values_name, cmp_name, params, st) -> str:
    """``less(a, b)`` of two row positions: padding (``>= n``) last, comparator, then the
    index; ``values_name(a, b, a0, b0, ...)`` the same at values already loaded."""
    arrays = ", ".join(f"const {t}* v{k}" for k, t in enumerate(st))
    types = [params[2 * k][1] for k in range(len(st))]
    vals = ", ".join(f"const {CTYPE[dt]} a{k}, const {CTYPE[dt]} b{k}"
                     for k, dt in enumerate(types))
    ab = ", ".join(f"a{k}, b{k}" for k in range(len(st)))
    ba = ", ".join(f"b{k}, a{k}" for k in range(len(st)))
    lines = [f"__device__ __forceinline__ bool {values_name}(int a, int b, {vals}) {{",
             f"  if ({cmp_name}({ab})) return true;",
             f"  if ({cmp_name}({ba})) return false;",
             "  return a < b;", "}", "",
             f"__device__ __forceinline__ bool {name}(int a, int b, int n, {arrays}) {{",
             "  if (a >= n) return false;",
             "  if (b >= n) return true;"]
    for k, dt in enumerate(types):
        lines.append(f"  const {CTYPE[dt]} a{k} = {from_storage(dt, f'v{k}[a]')}, "
                     f"b{k} = {from_storage(dt, f'v{k}[b]')};")
    lines += [f"  return {values_name}(a, b, {ab});", "}"]
    return "\n".join(lines) + "\n"

