"""Scatter as a CUDA kernel (XLA's scatter emitter in spirit), for a scatter step of the
plan (unfused, or a fusion whose hero is the scatter: indices and updates are computed
elementally from the kernel inputs, the scattered operand is an input updated in place).

One thread per update element, in (scatter index, window element) order.  The combiner
decides how elements land:

* ``add`` / ``maximum`` / ``minimum`` of the two parameters on types with atomics:
  ``atomicAdd`` / ``atomicMax`` / a compare-and-swap loop (floats, NaN-propagating);
* assignment (the combiner returns the update) with ``unique_indices=true``: plain stores;
* anything else: *ordered*, one thread applies every update in the interpreter's order
  (correct for any combiner; slow, and said so by the kernel's kind).

Out-of-bounds windows are skipped whole, as XLA specifies.  Variadic scatters and batching
dims are not handled here (the step then runs on the host).
"""
from __future__ import annotations

from ...codegen import index as ix
from ...codegen.elemental import ElementalEmitter, _reducer_exprs
from ...codegen.expr import Expr
from ...errors import UnsupportedError
from .emitters import KernelBlock, KernelSource, c_name, step_input_map
from .renderer import CTYPE, STORAGE, check_type, from_storage, to_storage

ATOMIC_ADD = {"f32", "f64", "s32", "u32", "u64", "s64"}
ATOMIC_MINMAX_INT = {"s32", "u32", "s64", "u64"}


def _hero(inst):
    if inst.opcode == "scatter":
        return inst
    if inst.opcode == "fusion" and inst.fused_computation.root.opcode == "scatter":
        return inst.fused_computation.root
    return None


def emit_scatter(step, names: set, device):
    """(KernelSource, input number updated in place) or None when not handled here."""
    s = _hero(step.instruction)
    if s is None or len(s.operands) != 3 or s.shape.is_tuple():
        return None
    if s.attr("input_batching_dims", ()) or s.attr("scatter_indices_batching_dims", ()):
        return None
    if any(o.shape.is_tuple() for o in step.instruction.operands):
        return None
    imap = step_input_map(step)
    base_in = imap.get((s.operands[0], 0))
    if base_in is None:  # the scattered operand must be a kernel input, updated in place
        return None
    operand, indices, updates = s.operands
    et = s.shape.element_type
    for x in (operand, indices, updates):
        check_type(x.shape.element_type, "scatter")
    rank = operand.shape.rank
    uwd = list(s.attr("update_window_dims", ()))
    inserted = set(s.attr("inserted_window_dims", ()))
    sd2od = list(s.attr("scatter_dims_to_operand_dims", ()))
    ivd = s.attr("index_vector_dim", indices.shape.rank)
    window_operand_dims = [d for d in range(rank) if d not in inserted]
    if len(window_operand_dims) != len(uwd):
        return None
    ushape = updates.shape.dims
    wsizes = [1] * rank
    for od, ud in zip(window_operand_dims, uwd):
        wsizes[od] = ushape[ud]
    scatter_udims = [d for d in range(len(ushape)) if d not in set(uwd)]
    m_dims = [ushape[d] for d in scatter_udims]
    w_dims = [wsizes[d] for d in window_operand_dims]
    m_total = 1
    for d in m_dims:
        m_total *= d
    w_total = 1
    for d in w_dims:
        w_total *= d
    total = m_total * w_total
    em = ElementalEmitter(imap)
    # update element (M, W): M over the scatter dims, W over the window in operand order
    mv = ix.loop_var("M", max(m_total, 2))
    wv = ix.loop_var("W", max(w_total, 2))
    mi = ix.delinearize(m_dims, mv) if m_dims else ()
    wi = ix.delinearize(w_dims, wv) if w_dims else ()
    uidx = [None] * len(ushape)
    for d, e in zip(scatter_udims, mi):
        uidx[d] = e
    for d, e in zip(uwd, wi):
        uidx[d] = e
    # the index vector: indices at the scatter index with k at index_vector_dim
    starts = [ix.c(0)] * rank
    for k, od in enumerate(sd2od):
        iidx = list(mi)
        if ivd < indices.shape.rank:
            iidx.insert(ivd, ix.c(k))
        v = em.value(indices, tuple(iidx))
        starts[od] = v if v.dtype == "s64" else Expr("convert", "s64", (v,))
    valid = None
    for d in range(rank):
        if d in sd2od:
            lo = Expr("compare", "pred", (starts[d], ix.c(0)), ("GE", ""))
            hi = Expr("compare", "pred", (starts[d], ix.c(operand.shape.dims[d] - wsizes[d])),
                      ("LE", ""))
            both = Expr("and", "pred", (lo, hi))
            valid = both if valid is None else Expr("and", "pred", (valid, both))
    oidx = list(starts)
    for od, e in zip(window_operand_dims, wi):
        oidx[od] = Expr("add", "s64", (oidx[od], e))
    pos = ix.linear_index(operand.shape, tuple(oidx)) if rank else ix.c(0)
    upd = em.value(updates, tuple(uidx))
    combiner, accs, xs = _reducer_exprs(em, s.to_apply, 1, [et])
    mode = _mode(s, combiner[0], accs[0], xs[0], et)
    name = c_name(step.name, names)
    sizes = [v.shape.num_elements() for v in step.inputs]
    narrow = max(sizes + [total]) < (1 << 30)

    def load(n, code, dtype):
        return from_storage(dtype, f"in{n}[HLO_CHK({code}, {sizes[n]})]")

    blk = KernelBlock(load, narrow, indent=2)
    blk.bindings["M"], blk.bindings["W"] = "m", "w"
    it = "int" if narrow else "int64_t"
    blk.emit(f"const {it} m = L / {max(w_total, 1)}, w = L % {max(w_total, 1)};")
    ok = blk.value(valid) if valid is not None else "true"
    blk.open(f"if ({ok})")
    p = blk.value(pos)
    u = blk.value(upd)
    n_out = operand.shape.num_elements()
    target = f"out0[HLO_CHK({p}, {n_out})]"
    st = STORAGE[et]
    if mode == "store":
        blk.emit(f"{target} = {to_storage(et, u)};")
    elif mode == "add":
        cast = "(unsigned long long*)" if et == "s64" else ""
        val = f"(unsigned long long){u}" if et == "s64" else u
        blk.emit(f"atomicAdd({cast}&{target}, {val});")
    elif mode in ("max", "min") and et in ATOMIC_MINMAX_INT:
        cast = "(long long*)" if et == "s64" else "(unsigned long long*)" if et == "u64" else ""
        val = f"(long long){u}" if et == "s64" else f"(unsigned long long){u}" \
            if et == "u64" else u
        blk.emit(f"atomic{mode.capitalize()}({cast}&{target}, {val});")
    elif mode in ("max", "min"):
        blk.emit(f"hlo_atomic_f{mode}(&{target}, {u});")
    else:  # ordered: this thread is the only one; acc = combiner(acc, x)
        old = blk.fresh("old")
        blk.emit(f"const {CTYPE[et]} {old} = {from_storage(et, target)};")
        blk.scopes.append({})
        blk.bindings[accs[0]], blk.bindings[xs[0]] = old, u
        new = blk.value(combiner[0])
        blk.scopes.pop()
        blk.emit(f"{target} = {to_storage(et, new)};")
    blk.close()
    decl = [f"const {STORAGE[v.shape.element_type]}* in{i}" for i, v in enumerate(step.inputs)]
    decl.append(f"{st}* out0")
    params = [(f"const {STORAGE[v.shape.element_type]}*", "in", i)
              for i, v in enumerate(step.inputs)] + [(f"{st}*", "out", 0)]
    ordered = mode == "ordered"
    threads = 1 if ordered else 256
    grid = 1 if ordered else max(1, min((total + 255) // 256, device.core_count * 16))
    loop = (f"  for ({it} L = 0; L < {total}; ++L) {{\n" if ordered else
            f"  for ({it} L = ({it})blockIdx.x * blockDim.x + threadIdx.x; L < {total}; "
            f"L += ({it})gridDim.x * blockDim.x) {{\n")
    code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
            f'{", ".join(decl)}) {{\n{loop}' + "\n".join(blk.lines) + "\n  }\n}\n")
    ks = KernelSource(name, step.name, f"scatter_{mode}", code, params, (grid, 1, 1),
                      (threads, 1, 1), False)
    return ks, base_in


def _mode(s, comb, acc, x, et) -> str:
    """How updates combine: store, add, max, min (atomics) or ordered."""
    def is_var(e, name):
        return e.op == "var" and e.attr == name
    if is_var(comb, x):
        unique = str(s.attrs.get("unique_indices", "")).strip().lower() == "true"
        return "store" if unique else "ordered"
    if comb.op in ("add", "maximum", "minimum") and len(comb.args) == 2 and \
            {a.op == "var" and a.attr for a in comb.args} == {acc, x}:
        if comb.op == "add" and et in ATOMIC_ADD:
            return "add"
        if comb.op != "add" and (et in ATOMIC_MINMAX_INT or et in ("f32", "f64")):
            return "max" if comb.op == "maximum" else "min"
    return "ordered"


def check_supported(step) -> None:
    if _hero(step.instruction) is None:
        raise UnsupportedError("not a scatter")
