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
memory.  Longer rows run the same kernel with the staging in a ``__device__`` scratch
array (one row per block in flight, the grid capped so the scratch stays under
``SCRATCH_BYTES``): correct for any length, not yet a fast multi-block sort.

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
    """A KernelSource for a sort / top-k step, or None when the step is not one."""
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
    threads = min(MAX_THREADS, max(32, p2 // 2))
    row_bytes = p2 * 4 + n * sum(BITS[o.shape.element_type] // 8 for o in ops)
    shared = row_bytes <= device.shared_memory_per_block
    if not shared and row_bytes > MAX_ROW_BYTES:
        raise UnsupportedError(f"sort: a row of {row_bytes} bytes")
    grid = min(rows, device.core_count * 16) if shared else \
        max(1, min(rows, device.core_count * 2, SCRATCH_BYTES // row_bytes))
    name = c_name(step.name, names)
    cmp_name = c_name(name + "_cmp", names)
    less_name = c_name(name + "_less", names)
    sizes = [v.shape.num_elements() for v in step.inputs]
    narrow = max(sizes + [total, p2]) < (1 << 30)
    it = "int" if narrow else "int64_t"

    # the multi-index of (row R, position I): rows over the other dims, outputs' order
    m2m = list(outs[0].effective_layout().minor_to_major)
    other = [x for x in reversed(m2m) if x != d]
    rv, iv = ix.loop_var("R", max(rows, 2)), ix.loop_var("I", max(n, 2))
    ri = ix.delinearize([shape.dims[x] for x in other], rv) if other else ()
    idx = [None] * shape.rank
    for x, e in zip(other, ri):
        idx[x] = e
    idx[d] = iv
    idx = tuple(idx)

    def load(num, code, dtype):
        return from_storage(dtype, f"in{num}[HLO_CHK({code}, {sizes[num]})]")

    em = ElementalEmitter(step_input_map(step))
    st = [STORAGE[o.shape.element_type] for o in ops]
    code = [_comparator(cmp_name, params, cmp),
            _less(less_name, cmp_name, params, st, n)]
    decl = [f"const {STORAGE[v.shape.element_type]}* in{i}" for i, v in enumerate(step.inputs)]
    decl += [f"{STORAGE[o.element_type]}* out{i}" for i, o in enumerate(outs)]
    lines = []
    if shared:
        lines.append(f"  __shared__ int32_t sidx[{p2}];")
        lines += [f"  __shared__ {t} sv{k}[{n}];" for k, t in enumerate(st)]
    else:
        code.append(f"__device__ int32_t {name}_idx[{grid * p2}];\n" + "".join(
            f"__device__ {t} {name}_v{k}[{grid * n}];\n" for k, t in enumerate(st)))
        lines.append(f"  int32_t* sidx = {name}_idx + (int64_t)blockIdx.x * {p2};")
        lines += [f"  {t}* sv{k} = {name}_v{k} + (int64_t)blockIdx.x * {n};"
                  for k, t in enumerate(st)]
    lines.append(f"  for ({it} row = blockIdx.x; row < {rows}; row += gridDim.x) {{")
    # 1. stage the row
    blk = KernelBlock(load, narrow, indent=3)
    blk.bindings["R"], blk.bindings["I"] = "row", "e"
    for k, o in enumerate(ops):
        blk.emit(f"sv{k}[e] = {to_storage(o.shape.element_type, blk.value(em.value(o, idx)))};")
    lines.append(f"    for (int e = threadIdx.x; e < {p2}; e += {threads}) {{")
    lines.append("      sidx[e] = e;")
    lines.append(f"      if (e < {n}) {{")
    lines += blk.lines
    lines += ["      }", "    }", "    __syncthreads();"]
    # 2. bitonic sort of the index array
    vs = ", ".join(f"sv{k}" for k in range(len(ops)))
    lines += [
        f"    for (int kk = 2; kk <= {p2}; kk <<= 1) {{",
        "      for (int jj = kk >> 1; jj > 0; jj >>= 1) {",
        "        #pragma unroll 1",
        f"        for (int t = threadIdx.x; t < {p2 // 2}; t += {threads}) {{",
        "          const int lo = ((t & ~(jj - 1)) << 1) | (t & (jj - 1)), hi = lo + jj;",
        "          const int a = sidx[lo], b = sidx[hi];",
        f"          if ((lo & kk) == 0 ? {less_name}(b, a, {vs}) : {less_name}(a, b, {vs})) {{",
        "            sidx[lo] = b;",
        "            sidx[hi] = a;",
        "          }",
        "        }",
        "        __syncthreads();",
        "      }",
        "    }"]
    # 3. the outputs of the row
    oblk = KernelBlock(load, narrow, indent=3)
    oblk.bindings["R"], oblk.bindings["I"] = "row", "e"
    oidx = tuple(ix.loop_var("I", max(keep, 2)) if x == d else e for x, e in enumerate(idx))
    for k, o in enumerate(outs):
        pos = oblk.value(ix.linear_index(o, oidx))
        src = "src" if topk and k == 1 else f"sv{k}[src]"
        oblk.emit(f"out{k}[HLO_CHK({pos}, {o.num_elements()})] = {src};")
    lines.append(f"    for (int e = threadIdx.x; e < {keep}; e += {threads}) {{")
    lines.append("      const int src = sidx[e];")
    lines += oblk.lines
    lines += ["    }", "    __syncthreads();", "  }"]
    code.append(f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n' + "\n".join(lines) + "\n}\n")
    params_ = [(f"const {STORAGE[v.shape.element_type]}*", "in", i)
               for i, v in enumerate(step.inputs)]
    params_ += [(f"{STORAGE[o.element_type]}*", "out", i) for i, o in enumerate(outs)]
    kind = ("topk" if topk else "sort") + ("_shared" if shared else "_global")
    return KernelSource(name, step.name, kind, "\n".join(code), params_, (grid, 1, 1),
                        (threads, 1, 1), True,
                        extra={"row": n, "padded_row": p2, "rows": rows, "shared": shared})


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


def _less(name, cmp_name, params, st, n) -> str:
    """``less(a, b)`` of two row positions: padding last, comparator, then the index."""
    arrays = ", ".join(f"const {t}* v{k}" for k, t in enumerate(st))
    lines = [f"__device__ __forceinline__ bool {name}(int a, int b, {arrays}) {{",
             f"  if (a >= {n}) return false;",
             f"  if (b >= {n}) return true;"]
    for k in range(len(st)):
        dt = params[2 * k][1]
        lines.append(f"  const {CTYPE[dt]} a{k} = {from_storage(dt, f'v{k}[a]')}, "
                     f"b{k} = {from_storage(dt, f'v{k}[b]')};")
    ab = ", ".join(f"a{k}, b{k}" for k in range(len(st)))
    ba = ", ".join(f"b{k}, a{k}" for k in range(len(st)))
    lines += [f"  if ({cmp_name}({ab})) return true;",
              f"  if ({cmp_name}({ba})) return false;",
              "  return a < b;", "}"]
    return "\n".join(lines) + "\n"

