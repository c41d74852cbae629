"""Kernel emitters: a plan's :class:`~hlo_opt.codegen.plan.Kernel` -> CUDA C++ kernels.

Chosen by the kernel's kind (XLA:GPU's emitters are chosen by the fusion's hero):

* ``loop``: one thread per output element, a grid-stride loop over the physical
  order of the output; several outputs of one index space share the loop. Inner
  reductions (reduce-window, a reduce inside a loop fusion) run serially per thread.
* ``row_reduction``: a warp per output row (several rows per block) for short rows, a
  block per row for long ones; partial sums by warp shuffles, then shared memory.
* ``column_reduction``: a 32 x 8 block: 32 adjacent outputs (coalesced reads), 8 slices
  of the reduced dims, partials combined through a shared tile.
* ``multi_output_reduction``: as above when every output has the reduced shape; outputs
  of other shapes get kernels of their own.
* ``in_place_dynamic_update_slice``: a loop over the update only.
* anything else the plan calls a kernel (concatenate, transpose, reduce_window) renders
  as ``loop`` (correct, not yet XLA's shared-memory tiling for transposes).

Launch dimensions are parameters (``LaunchConfig``) derived from the device; the
autotuner can pass others.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ...codegen import index as ix
from ...codegen.elemental import ElementalEmitter
from ...codegen.expr import Expr
from ...errors import UnsupportedError
from .renderer import CTYPE, STORAGE, Block, check_type, from_storage, to_storage

INT32_MAX = (1 << 31) - 1


@dataclass
class LaunchConfig:
    """Knobs of one kernel (candidates for the autotuner)."""
    block: int = 256                 # threads per block (loop kernels)
    max_blocks_per_sm: int = 16      # grid cap for grid-stride loops
    unroll: int = 4                  # elements per thread per loop trip (loop kernels)
    row_threads: int = 0             # 0: choose (32 for short rows, block for long)


@dataclass
class KernelSource:
    name: str
    step_name: str                   # the instruction it comes from (profile rows)
    kind: str
    code: str
    params: list                     # [(c type, role, slot)] role in {"in", "out"}
    grid: tuple
    block: tuple
    fibered: bool                    # uses barriers / warp collectives
    bytes_moved: int = 0
    extra: dict = field(default_factory=dict)


def c_name(name: str, taken: set) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if not base or base[0].isdigit():
        base = "k_" + base
    n, i = base, 1
    while n in taken:
        i += 1
        n = f"{base}_{i}"
    taken.add(n)
    return n


class KernelBlock(Block):
    """A Block whose s64 index arithmetic with known small bounds renders as 32-bit."""

    def __init__(self, load, narrow: bool, indent: int = 1):
        super().__init__(load, indent)
        self.narrow = narrow
        self._idx: dict = {}

    def _is_index(self, e) -> bool:
        if not self.narrow or e.dtype != "s64":
            return False
        hit = self._idx.get(e)
        if hit is None:
            hit = False
            if e.op in ("const", "var", "add", "multiply", "floordiv", "rem", "maximum",
                        "minimum"):
                if e.op == "var" and not isinstance(e.attr, tuple):
                    hit = False
                elif e.op in ("const", "var") or all(self._is_index(a) for a in e.args):
                    b = ix.bounds(e)
                    hit = b is not None and -INT32_MAX <= b[0] and b[1] <= INT32_MAX
            self._idx[e] = hit
        return hit

    def _node(self, n) -> str:
        if self._is_index(n):
            if n.op == "const":
                return str(int(n.attr))
            if n.op == "var":
                return super()._node(n)
            a = [self._lookup(x) for x in n.args]
            op = {"add": "+", "multiply": "*", "floordiv": "/", "rem": "%"}.get(n.op)
            code = f"({a[0]} {op} {a[1]})" if op else \
                f"{'min' if n.op == 'minimum' else 'max'}({a[0]}, {a[1]})"
            name = self.fresh("j")
            self.emit(f"const int {name} = {code};")
            return name
        return super()._node(n)


def _delinearize_physical(shape, linear: Expr) -> tuple:
    """Multi-index of physical offset ``linear`` in a buffer of ``shape``."""
    strides = ix.physical_strides(shape)
    out = []
    for d, n in enumerate(shape.dims):
        out.append(ix.rem(ix.div(linear, strides[d]), n) if n > 1 else ix.c(0))
    return tuple(out)


class KernelEmitter:
    def __init__(self, kernel, names: set, device, config: LaunchConfig | None = None):
        self.k = kernel
        self.names = names
        self.device = device
        self.cfg = config or LaunchConfig()

    # ---- shared pieces -------------------------------------------------------------------
    def _signature(self, name, out_numbers, bounds_note=""):
        k = self.k
        params, decl = [], []
        in_place_inputs = set(k.in_place.values())
        aliased = {i for i, s in enumerate(k.input_slices) if s in k.output_slices}
        for i, v in enumerate(k.inputs):
            check_type(v.shape.element_type, f"input of {k.name}")
            t = STORAGE[v.shape.element_type]
            restrict = "" if (i in in_place_inputs or i in aliased) else " __restrict__"
            decl.append(f"const {t}*{restrict} in{i}")
            params.append((f"const {t}*", "in", i))
        for n in out_numbers:
            v = k.outputs[n]
            check_type(v.shape.element_type, f"output of {k.name}")
            t = STORAGE[v.shape.element_type]
            decl.append(f"{t}* out{n}")
            params.append((f"{t}*", "out", n))
        return params, decl

    def _load(self, n, idx_code, dtype):
        size = self.k.inputs[n].shape.num_elements()
        return from_storage(dtype, f"in{n}[HLO_CHK({idx_code}, {size})]")

    def _store(self, blk, n, idx_code, value_code):
        v = self.k.outputs[n]
        size = v.shape.num_elements()
        blk.emit(f"out{n}[HLO_CHK({idx_code}, {size})] = "
                 f"{to_storage(v.shape.element_type, value_code)};")

    def _narrow(self) -> bool:
        sizes = [v.shape.num_elements() for v in self.k.inputs + self.k.outputs]
        return max(sizes, default=0) < INT32_MAX // 2

    # ---- entry ---------------------------------------------------------------------------
    def emit(self) -> list[KernelSource]:
        k = self.k
        kind = k.kind
        if kind == "in_place_dynamic_update_slice" and k.in_place:
            return [self._dus()]
        groups = self._output_groups()
        out = []
        for outs in groups:
            shape = k.outputs[outs[0]].shape
            has_reduce = self._root_has_reduce(outs)
            if kind in ("row_reduction", "column_reduction", "multi_output_reduction") \
                    and has_reduce:
                row = self._is_row(outs)
                out.append(self._reduction(outs, row))
            else:
                out.append(self._loop(outs, shape))
        return out

    def _output_groups(self):
        """Outputs sharing one index space (same dims and layout) run in one kernel."""
        groups: dict = {}
        for n, v in enumerate(self.k.outputs):
            s = v.shape
            key = (tuple(s.dims), tuple(s.effective_layout().minor_to_major))
            groups.setdefault(key, []).append(n)
        return list(groups.values())

    def _root_exprs(self, em, outs, idx):
        return [em.value(*self.k.roots[n], idx) if len(self.k.roots[n]) == 1
                else em.value(self.k.roots[n][0], idx, self.k.roots[n][1]) for n in outs]

    def _root_has_reduce(self, outs) -> bool:
        return any(r[0].opcode == "reduce" or self._hero_reduce(r[0]) for n in outs
                   for r in [self.k.roots[n]])

    def _hero_reduce(self, inst):
        from ...codegen.kinds import find_hero
        return find_hero(inst).opcode == "reduce"

    def _is_row(self, outs) -> bool:
        from ...codegen.kinds import find_hero, reduction_is_row
        for n in outs:
            h = find_hero(self.k.roots[n][0])
            if h.opcode == "reduce":
                return reduction_is_row(h)
        return True

    def _name(self, suffix=""):
        return c_name(self.k.name + suffix, self.names)

    def _grid_for(self, work_items: int, threads: int) -> int:
        cap = self.device.core_count * self.cfg.max_blocks_per_sm
        return max(1, min((work_items + threads - 1) // threads, cap))

    # ---- loop ----------------------------------------------------------------------------
    def _loop(self, outs, shape) -> KernelSource:
        k = self.k
        name = self._name("" if len(outs) == len(k.outputs) else f"_o{outs[0]}")
        n_el = shape.num_elements()
        narrow = self._narrow()
        it = "int" if narrow else "int64_t"
        blk = KernelBlock(self._load, narrow, indent=2)
        lin = ix.loop_var("L", max(n_el, 2))
        blk.bindings["L"] = "L"
        em = ElementalEmitter(k.input_map)
        idx = _delinearize_physical(shape, lin) if n_el > 1 else tuple(ix.c(0) for _ in shape.dims)
        vals = self._root_exprs(em, outs, idx)
        codes = [blk.value(v) for v in vals]
        for n, c in zip(outs, codes):
            self._store(blk, n, "L", c)
        params, decl = self._signature(name, outs)
        threads = self.cfg.block
        grid = self._grid_for(n_el, threads)
        body = "\n".join(blk.lines)
        code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n'
                f"  for ({it} L = ({it})blockIdx.x * blockDim.x + threadIdx.x; L < {n_el}; "
                f"L += ({it})gridDim.x * blockDim.x) {{\n{body}\n  }}\n}}\n")
        return KernelSource(name, k.name, "loop", code, params, (grid, 1, 1), (threads, 1, 1),
                            False, self._bytes(outs))

    def _bytes(self, outs) -> int:
        b = sum(v.shape.num_elements() * v.shape.dtype.itemsize for v in self.k.inputs)
        return b + sum(self.k.outputs[n].shape.num_elements()
                       * self.k.outputs[n].shape.dtype.itemsize for n in outs)

    # ---- in-place dynamic-update-slice ----------------------------------------------------
    def _dus(self) -> KernelSource:
        k = self.k
        root = k.roots[0][0]
        upd = root.operands[1]
        shape = root.shape
        n_el = upd.shape.num_elements()
        name = self._name()
        narrow = self._narrow()
        it = "int" if narrow else "int64_t"
        blk = KernelBlock(self._load, narrow, indent=2)
        blk.bindings["L"] = "L"
        em = ElementalEmitter(k.input_map)
        j = _delinearize_physical(upd.shape, ix.loop_var("L", max(n_el, 2))) \
            if n_el > 1 else tuple(ix.c(0) for _ in upd.shape.dims)
        out_idx = []
        for d, jd in enumerate(j):
            s = em.value(root.operands[2 + d], ())
            if s.dtype != "s64":
                s = Expr("convert", "s64", (s,))
            start = Expr("clamp", "s64", (ix.c(0), s, ix.c(shape.dims[d] - upd.shape.dims[d])))
            out_idx.append(ix.add(jd, start))
        val = blk.value(em.value(upd, j))
        pos = blk.value(ix.linear_index(shape, tuple(out_idx)))
        self._store(blk, 0, pos, val)
        params, decl = self._signature(name, [0])
        threads = self.cfg.block
        grid = self._grid_for(n_el, threads)
        code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n'
                f"  for ({it} L = ({it})blockIdx.x * blockDim.x + threadIdx.x; L < {max(n_el, 1)}; "
                f"L += ({it})gridDim.x * blockDim.x) {{\n" + "\n".join(blk.lines) + "\n  }\n}\n")
        ks = KernelSource(name, k.name, "in_place_dynamic_update_slice", code, params,
                          (grid, 1, 1), (threads, 1, 1), False,
                          2 * n_el * upd.shape.dtype.itemsize)
        ks.extra["in_place"] = dict(k.in_place)
        return ks

    # ---- reductions ------------------------------------------------------------------------
    def _reduction(self, outs, row: bool) -> KernelSource:
        k = self.k
        shape = k.outputs[outs[0]].shape
        rows = shape.num_elements()
        name = self._name("" if len(outs) == len(k.outputs) else f"_o{outs[0]}")
        narrow = self._narrow()
        em = ElementalEmitter(k.input_map)
        # the reduced size decides threads per row
        k_size = self._reduced_size(outs)
        if row:
            tpr = self.cfg.row_threads or (32 if k_size <= 2048 else 256)
            threads = 256
            rows_per_block = threads // tpr
            mode = "warp" if tpr == 32 else "block"
        else:
            tpr, threads, rows_per_block, mode = 8, 256, 32, "column"
        blk = ReductionBlock(self._load, narrow, mode, tpr, indent=2)
        row_var = ix.loop_var("R", max(rows, 2))
        blk.bindings["R"] = "Rc"  # clamped row: every thread computes a valid row
        idx = _delinearize_physical(shape, row_var) if rows > 1 else \
            tuple(ix.c(0) for _ in shape.dims)
        vals = self._root_exprs(em, outs, idx)
        codes = [blk.value(v) for v in vals]
        first = {"warp": "lane == 0", "block": "threadIdx.x == 0", "column": "ty == 0"}[mode]
        blk.emit(f"if ({first} && R < {rows}) {{")
        blk.indent += 1
        for n, c in zip(outs, codes):
            self._store(blk, n, "R", c)
        blk.indent -= 1
        blk.emit("}")
        params, decl = self._signature(name, outs)
        body = "\n".join(blk.lines)
        it = "int" if narrow else "int64_t"
        if mode == "warp":
            nblocks = (rows + rows_per_block - 1) // rows_per_block
            head = (f"  const int lane = threadIdx.x % 32;\n"
                    f"  const {it} R = ({it})blockIdx.x * {rows_per_block} + threadIdx.x / 32;\n"
                    f"  if (R >= {rows}) return;  // whole warps leave together\n"
                    f"  const {it} Rc = R;\n")
            grid = nblocks
            wrap_open, wrap_close = "", ""
        elif mode == "block":
            grid = min(rows, self.device.core_count * 32)
            head = "  const int lane = threadIdx.x % 32;\n"
            wrap_open = (f"  for ({it} R = blockIdx.x; R < {rows}; R += gridDim.x) {{\n"
                         f"  const {it} Rc = R;\n")
            wrap_close = "  __syncthreads();\n  }\n"
        else:
            grid = (rows + 31) // 32
            head = (f"  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;\n"
                    f"  const {it} R = ({it})blockIdx.x * 32 + tx;\n"
                    f"  const {it} Rc = R < {rows} ? R : {rows - 1};\n")
            wrap_open, wrap_close = "", ""
        code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n{head}{wrap_open}{body}\n{wrap_close}}}\n')
        return KernelSource(name, k.name, f"{'row' if row else 'column'}_reduction", code,
                            params, (max(grid, 1), 1, 1), (threads, 1, 1),
                            True, self._bytes(outs))

    def _reduced_size(self, outs) -> int:
        from ...codegen.kinds import find_hero
        best = 1
        for n in outs:
            h = find_hero(self.k.roots[n][0])
            if h.opcode == "reduce":
                s = h.operands[0].shape
                size = 1
                for d in h.dimensions:
                    size *= s.dims[d]
                best = max(best, size)
        return best


class ReductionBlock(KernelBlock):
    """Top-level reduces become parallel: the flattened reduced index is strided over the
    threads of a row, partials are combined by shuffles (and shared memory)."""

    def __init__(self, load, narrow, mode, threads_per_row, indent=1):
        super().__init__(load, narrow, indent)
        self.mode = mode
        self.tpr = threads_per_row
        self.depth = 0

    def reduce_loops(self, spec, init_codes, dtypes, loop_header=None):
        """Each thread folds its elements starting from its first one (``has`` says it
        has one); partials combine across threads; the init value is combined once at
        the end, as the interpreter does (so a non-identity init gives its result)."""
        if self.depth:
            return super().reduce_loops(spec, init_codes, dtypes, loop_header)
        self.depth += 1
        accs = []
        for code, dt in zip(init_codes, dtypes):
            a = self.fresh("acc")
            self.emit(f"{CTYPE[dt]} {a} = {code};")
            accs.append(a)
        has = self.fresh("has")
        self.emit(f"bool {has} = false;")
        trips = [t for _, t in spec.loop_vars]
        total = 1
        for t in trips:
            total *= t
        kv = self.fresh("k")
        start = {"warp": "lane", "block": "threadIdx.x", "column": "ty"}[self.mode]
        step = {"warp": 32, "block": self.tpr, "column": self.tpr}[self.mode]
        kt = "int" if self.narrow else "int64_t"
        self.open(f"for ({kt} {kv} = {start}; {kv} < {total}; {kv} += {step})")
        rest = total
        for name, trip in spec.loop_vars:
            rest //= trip
            c = self.fresh("i")
            self.bindings[name] = c
            expr = f"({kv} / {rest}) % {trip}" if rest > 1 else f"{kv} % {trip}"
            if rest * trip == total:
                expr = f"{kv} / {rest}" if rest > 1 else kv
            self.emit(f"const {kt} {c} = {expr};")
        xs = [self.value(v) for v in spec.values]
        self._fold(spec, accs, xs, dtypes, has, None)
        self.close()
        self._combine_threads(spec, accs, dtypes, has)
        # the init value, once
        inits = []
        for code, dt in zip(init_codes, dtypes):
            i = self.fresh("init")
            self.emit(f"const {CTYPE[dt]} {i} = {code};")
            inits.append(i)
        self.open(f"if ({has})")
        self.combine_into(spec, accs, inits, accs, dtypes)
        self.close()
        self.emit("else { " + " ".join(f"{a} = {i};" for a, i in zip(accs, inits)) + " }")
        self.round_narrow(accs, dtypes)
        self.depth -= 1
        return accs

    def _fold(self, spec, accs, xs, dtypes, has, other_has):
        """accs = has ? combine(accs, xs) : xs (when other_has, only if it is set)."""
        if other_has:
            self.open(f"if ({other_has})")
        self.open(f"if ({has})")
        self.accumulate(spec, accs, xs, dtypes)
        self.close()
        self.emit("else { " + " ".join(f"{a} = {x};" for a, x in zip(accs, xs))
                  + f" {has} = true; }}")
        if other_has:
            self.close()

    def _combine_threads(self, spec, accs, dtypes, has):
        if self.mode in ("warp", "block"):
            for off in (16, 8, 4, 2, 1):
                xs = []
                for a, dt in zip(accs, dtypes):
                    x = self.fresh("s")
                    self.emit(f"const {CTYPE[dt]} {x} = hlo_shfl_xor({a}, {off});")
                    xs.append(x)
                oh = self.fresh("oh")
                self.emit(f"const bool {oh} = hlo_shfl_xor({has}, {off});")
                self._fold(spec, accs, xs, dtypes, has, oh)
            if self.mode == "block":
                nw = self.tpr // 32
                self._smem_combine(spec, accs, dtypes, has, nw, "threadIdx.x / 32", "lane == 0",
                                   lambda sm, w: f"{sm}[{w}]", lambda sm: f"{sm}[{nw}]")
        else:  # column: 8 partials per output, in a [8][33] tile
            nt = self.tpr
            self._smem_combine(spec, accs, dtypes, has, nt, "ty", "true",
                               lambda sm, w: f"{sm}[{w}][tx]", lambda sm: f"{sm}[{nt}][33]")

    def _smem_combine(self, spec, accs, dtypes, has, parts, me, writer, at, decl):
        sms = []
        for a, dt in zip(accs, dtypes):
            sm = self.fresh("sm")
            self.emit(f"__shared__ {CTYPE[dt]} {decl(sm)};")
            sms.append(sm)
        hs = self.fresh("smh")
        self.emit(f"__shared__ bool {decl(hs)};")
        self.emit(f"if ({writer}) {{ " + " ".join(f"{at(sm, me)} = {a};"
                                                 for sm, a in zip(sms, accs))
                  + f" {at(hs, me)} = {has}; }}")
        self.emit("__syncthreads();")
        self.emit(f"{has} = false;")
        self.open(f"for (int w = 0; w < {parts}; ++w)")
        xs = []
        for sm, dt in zip(sms, dtypes):
            x = self.fresh("s")
            self.emit(f"const {CTYPE[dt]} {x} = {at(sm, 'w')};")
            xs.append(x)
        self._fold(spec, accs, xs, dtypes, has, at(hs, "w"))
        self.close()
        self.emit("__syncthreads();  // the tile is reused by the next row")


def emit_kernel(kernel, names: set, device, config: LaunchConfig | None = None):
    if not kernel.outputs:
        return []
    return KernelEmitter(kernel, names, device, config).emit()
