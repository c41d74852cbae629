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
* ``row_normalization`` (a ``__triton`` softmax / layer-norm fusion): one kernel, a warp
  or a block per row, each reduction by warp shuffles, then the row's outputs
  (``row_norm.py``).
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
from .renderer import CTYPE, STORAGE, Block, check_type, from_storage, to_storage

INT32_MAX = (1 << 31) - 1
TRANSPOSE_BLOCKS = (128, 256, 512, 1024)   # 32 x (block / 32) threads per 32 x 32 tile

# kind -> emitter(KernelEmitter) -> KernelSource, for kinds emitted by modules of their own
# (they register themselves: ``row_norm.py``, ``gemm_fusion_kernel.py``)
KIND_EMITTERS: dict = {}


@dataclass
class LaunchConfig:
    """Knobs of one kernel (candidates for the autotuner)."""
    block: int = 256                 # threads per block (loop kernels)
    max_blocks_per_sm: int = 16      # grid cap for grid-stride loops
    unroll: int = 4                  # elements per thread per loop trip (loop kernels)
    row_threads: int = 0             # 0: choose (32 for short rows, block for long)
    tile_transposes: bool = True     # stage transposed loads through shared tiles


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
    if base == name:  # "div", "exp", "atan2": C and CUDA functions keep no '.' in their names
        base += "_k"
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


def _strides(e, vars_: dict):
    """{dim: d(e)/d(var)} when ``e`` moves by a constant step along each var near 0 (the
    step decides which dimension a load walks contiguously), else None."""
    env0 = {v.attr[0]: 0 for v in vars_.values() if v.op == "var"}
    base = _eval(e, env0)
    if base is None:
        return None
    out = {}
    for d, v in vars_.items():
        if v.op != "var":
            continue
        s1 = _eval(e, dict(env0, **{v.attr[0]: 1}))
        s2 = _eval(e, dict(env0, **{v.attr[0]: 2}))
        if s1 is None or s2 is None:
            return None
        out[d] = s1 - base if s2 - s1 == s1 - base else None
    return out


def _eval(e, env):
    """Value of an index expression at integer points (None: not index arithmetic)."""
    op = e.op
    if op == "const":
        return e.attr if isinstance(e.attr, int) else None
    if op == "var":
        name = e.attr[0] if isinstance(e.attr, tuple) else e.attr
        return env.get(name, 0)
    a = [_eval(x, env) for x in e.args]
    if any(x is None for x in a):
        return None
    if op == "add":
        return a[0] + a[1]
    if op == "multiply":
        return a[0] * a[1]
    if op == "floordiv":
        return a[0] // a[1] if a[1] else None
    if op == "rem":
        return a[0] % a[1] if a[1] else None
    if op == "maximum":
        return max(a)
    if op == "minimum":
        return min(a)
    if op == "clamp":
        return min(max(a[1], a[0]), a[2])
    return None


class TiledBlock(KernelBlock):
    """Phase 2 of a tiled transpose: staged loads read the shared tile instead."""

    def __init__(self, load, narrow, indent=1):
        super().__init__(load, narrow, indent)
        self.staged: dict = {}

    def _node(self, n) -> str:
        hit = self.staged.get(n)
        if hit is not None:
            return hit
        return super()._node(n)


_VEC = {1: "uchar", 2: "ushort", 4: "uint"}
_COMP = "xyzw"


def _bits_to(dtype: str, code: str) -> str:
    """A vector component (unsigned bits of the storage width) as the storage type."""
    st = STORAGE[dtype]
    if st == "float":
        return f"__uint_as_float({code})"
    if st == "bool":
        return f"({code} != 0)"
    return f"(({st}){code})"


def _to_bits(dtype: str, code: str, itemsize: int) -> str:
    st = STORAGE[dtype]
    if st == "float":
        return f"__float_as_uint({code})"
    return f"(({'unsigned ' + {1: 'char', 2: 'short', 4: 'int'}[itemsize]}){code})"


class VectorBlock(KernelBlock):
    """Lanes of a vectorized loop: loads at the output's own linear index become one
    vector load per input (shared by the lanes), stores one vector store per output."""

    def __init__(self, load, narrow, out_lin, kernel, indent=1, width=4):
        super().__init__(load, narrow, indent)
        self.width = width
        self.out_lin = out_lin
        self.k = kernel
        self.lane = 0
        self.vec: dict = {}
        self.base_indent = indent

    def _node(self, n) -> str:
        if n.op == "load" and n.args[0] == self.out_lin and self.indent == self.base_indent:
            v = self.k.inputs[n.attr].shape
            size = v.dtype.itemsize
            if size in _VEC and v.num_elements() == self.k.outputs[0].shape.num_elements() \
                    or size in _VEC and n.attr in self.vec:
                name = self.vec.get(n.attr)
                width = self.width
                if name is None:
                    name = self.fresh("vin")
                    t = f"{_VEC[size]}{width}"
                    self.emit(f"const {t} {name} = *reinterpret_cast<const {t}*>("
                              f"in{n.attr} + HLO_CHK(L0, {v.num_elements() - width + 1}));")
                    self.vec[n.attr] = name
                comp = f"{name}.{_COMP[self.lane]}"
                code = from_storage(n.dtype, _bits_to(v.element_type, comp))
                out = self.fresh()
                self.emit(f"const {CTYPE[n.dtype]} {out} = {code};")
                return out
        return super()._node(n)

    def vector_store(self, n, dtype, codes) -> None:
        size = self.k.outputs[n].shape.dtype.itemsize
        t = f"{_VEC[size]}{len(codes)}"
        o = self.fresh("vout")
        self.emit(f"{t} {o};")
        for u, c in enumerate(codes):
            self.emit(f"{o}.{_COMP[u]} = {_to_bits(dtype, to_storage(dtype, c), size)};")
        total = self.k.outputs[n].shape.num_elements()
        self.emit(f"*reinterpret_cast<{t}*>(out{n} + HLO_CHK(L0, {total - len(codes) + 1})) = {o};")


def _delinearize_physical(shape, linear: Expr) -> tuple:
    """Multi-index of physical offset ``linear`` in a buffer of ``shape``."""
    strides = ix.physical_strides(shape)
    out = []
    for d, n in enumerate(shape.dims):
        out.append(ix.rem(ix.div(linear, strides[d]), n) if n > 1 else ix.c(0))
    return tuple(out)


def step_input_map(step) -> dict:
    """(value, 0) -> input number of a library-call step's instruction: its operands, or
    a fusion's parameters in parameter order (the scatter and sort emitters' operands)."""
    inst = step.instruction
    if inst.opcode != "fusion":
        return {(o, 0): i for i, o in enumerate(inst.operands)}
    params = sorted(inst.fused_computation.parameters, key=lambda q: q.parameter_number)
    return {(q, 0): i for i, q in enumerate(params)}


def flat_roots(kernel) -> list:
    """(instruction, leaf) per output: a fusion root tuple whose operands are tuples
    themselves (a variadic reduce among the outputs) gives one entry per leaf."""
    inst = kernel.instruction
    if inst.opcode != "fusion":
        return list(kernel.roots)
    r = inst.fused_computation.root
    if r.opcode != "tuple":
        return list(kernel.roots)
    out = []
    for x in r.operands:
        n = len(x.shape.leaves()) if x.shape.is_tuple() else 1
        out.extend((x, j) for j in range(n))
    return out if len(out) == len(kernel.outputs) else list(kernel.roots)


class KernelEmitter:
    def __init__(self, kernel, names: set, device, config: LaunchConfig | None = None):
        self.k = kernel
        self.roots = flat_roots(kernel)
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
            own = k.output_slices[n] not in k.input_slices and not k.in_place
            decl.append(f"{t}*{' __restrict__' if own else ''} out{n}")
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
        special = KIND_EMITTERS.get(kind)
        if special is not None:
            return [special(self)]
        groups = self._output_groups()
        reducing = kind in ("row_reduction", "column_reduction", "multi_output_reduction")
        sides = self._side_outputs(groups) if reducing else {}
        out = []
        stored: set = set()   # outputs a reduction's loop stores
        for outs in groups:
            if reducing and self._root_has_reduce(outs):
                ks = self._reduction(outs, self._is_row(outs), sides.get(tuple(outs), []))
                stored |= set(ks.extra.get("side_outputs", ()))
                out.append(ks)
        for outs in groups:
            if not (reducing and self._root_has_reduce(outs)) and not set(outs) <= stored:
                out.append(self._loop(outs, k.outputs[outs[0]].shape))
        return out

    def _side_outputs(self, groups) -> dict:
        """{reduction group: outputs of the reduced operand's shape}: XLA's reduction
        emitter writes those while it reads the operand (each element is visited once), so
        a fusion of ``(reduce(tanh(x)), tanh(x))`` is one kernel, not two.  Only where one
        group reduces and the others all have its reduce's operand dims."""
        from ...codegen.kinds import find_hero
        reducing = [g for g in groups if self._root_has_reduce(g)]
        if len(reducing) != 1:
            return {}
        hero = find_hero(self.roots[reducing[0][0]][0])
        if hero.opcode != "reduce":
            return {}
        dims = tuple(hero.operands[0].shape.dims)
        rest = [n for g in groups if g is not reducing[0] for n in g]
        if not rest or any(tuple(self.k.outputs[n].shape.dims) != dims for n in rest):
            return {}
        return {tuple(reducing[0]): rest}

    def _output_groups(self):
        """Outputs sharing one index space (same dims and layout) run in one kernel."""
        groups: dict = {}
        for n, v in enumerate(self.k.outputs):
            s = v.shape
            key = (tuple(s.dims), tuple(s.effective_layout().minor_to_major))
            groups.setdefault(key, []).append(n)
        return list(groups.values())

    def _root_exprs(self, em, outs, idx):
        return [em.value(*self.roots[n], idx) if len(self.roots[n]) == 1
                else em.value(self.roots[n][0], idx, self.roots[n][1]) for n in outs]

    def _root_has_reduce(self, outs) -> bool:
        return any(r[0].opcode == "reduce" or self._hero_reduce(r[0]) for n in outs
                   for r in [self.roots[n]])

    def _hero_reduce(self, inst):
        from ...codegen.kinds import find_hero
        return find_hero(inst).opcode == "reduce"

    def _is_row(self, outs) -> bool:
        from ...codegen.kinds import find_hero, reduction_is_row
        for n in outs:
            h = find_hero(self.roots[n][0])
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
        n_el = shape.num_elements()
        if self.cfg.tile_transposes and n_el >= 1024:
            tiled = self._tiled(outs, shape)
            if tiled is not None:
                return tiled
        name = self._name("" if len(outs) == len(k.outputs) else f"_o{outs[0]}")
        narrow = self._narrow()
        it = "int" if narrow else "int64_t"
        lin = ix.loop_var("L", max(n_el, 2))
        em = ElementalEmitter(k.input_map)
        idx = _delinearize_physical(shape, lin) if n_el > 1 else tuple(ix.c(0) for _ in shape.dims)
        vals = self._root_exprs(em, outs, idx)
        width = self._vector_width(outs, n_el)
        threads = self.cfg.block
        params, decl = self._signature(name, outs)
        if width > 1:
            blk = VectorBlock(self._load, narrow, ix.linear_index(shape, idx), k, indent=2,
                              width=width)
            lanes = []
            for u in range(width):
                blk.scopes.append({})
                blk.lane = u
                lv = blk.fresh("L")
                blk.emit(f"const {it} {lv} = L0 + {u};")
                blk.bindings["L"] = lv
                lanes.append([blk.value(v) for v in vals])
                blk.scopes.pop()
            for j, n in enumerate(outs):
                blk.vector_store(n, self.k.outputs[n].shape.element_type,
                                 [lane[j] for lane in lanes])
            grid = self._grid_for(n_el // width, threads)
            loop = (f"  for ({it} L0 = (({it})blockIdx.x * blockDim.x + threadIdx.x) * {width}; "
                    f"L0 < {n_el}; L0 += ({it})gridDim.x * blockDim.x * {width}) {{\n")
        else:
            blk = KernelBlock(self._load, narrow, indent=2)
            blk.bindings["L"] = "L"
            codes = [blk.value(v) for v in vals]
            for n, c in zip(outs, codes):
                self._store(blk, n, "L", c)
            grid = self._grid_for(n_el, threads)
            loop = (f"  #pragma unroll 4\n"
                    f"  for ({it} L = ({it})blockIdx.x * blockDim.x + threadIdx.x; L < {n_el}; "
                    f"L += ({it})gridDim.x * blockDim.x) {{\n")
        body = "\n".join(blk.lines)
        code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n{loop}{body}\n  }}\n}}\n')
        ks = KernelSource(name, k.name, "loop", code, params, (grid, 1, 1), (threads, 1, 1),
                          False, self._bytes(outs))
        ks.extra["vector_width"] = width
        return ks

    # ---- loops whose inputs are read transposed: 32 x 32 tiles through shared memory --------
    def _tiled(self, outs, shape):
        """XLA's transpose emitter in spirit: when a load walks an input along a dimension
        that is not the output's minor-most one, tile the output over (minor dim ``a``,
        the input's contiguous dim ``b``), stage those loads through ``[32][33]`` shared
        tiles read coalesced along ``b``, then compute and store coalesced along ``a``.
        None when no load needs it."""
        from ...codegen.expr import walk
        k = self.k
        dims = list(shape.dims)
        m2m = [d for d in shape.effective_layout().minor_to_major if dims[d] > 1]
        if len(m2m) < 2:
            return None
        a = m2m[0]
        em = ElementalEmitter(k.input_map)
        rest_dims = [d for d in range(len(dims)) if d != a]
        probe = {d: ix.loop_var(f"P{d}", dims[d]) for d in range(len(dims))}
        pvals = self._root_exprs(em, outs, tuple(probe[d] for d in range(len(dims))))
        nodes = [n for v in pvals for n in walk(v)]
        if any(n.op == "reduce" for n in nodes):
            return None
        b = None
        for n in nodes:
            if n.op != "load":
                continue
            st = _strides(n.args[0], probe)
            if st is None or st.get(a) in (0, 1):  # contiguous, or a broadcast along a
                continue
            cands = [d for d in rest_dims if st.get(d) == 1]
            if cands:
                b = cands[0]
                break
        if b is None:
            return None
        A, B = dims[a], dims[b]
        others = [d for d in range(len(dims)) if d not in (a, b)]
        restn = 1
        for d in others:
            restn *= dims[d]
        ta_n, tb_n = (A + 31) // 32, (B + 31) // 32
        idx = [None] * len(dims)
        idx[a] = ix.loop_var("TA", max(A, 2))
        idx[b] = ix.loop_var("TB", max(B, 2))
        rs = ix.loop_var("RS", max(restn, 2))
        sub = ix.delinearize([dims[d] for d in others], rs) if others else ()
        for d, e in zip(others, sub):
            idx[d] = e
        em = ElementalEmitter(k.input_map)
        vals = self._root_exprs(em, outs, tuple(idx))
        staged = []
        for v in vals:
            for n in walk(v):
                if n.op == "load" and n not in staged:
                    st = _strides(n.args[0], {d: idx[d] for d in (a, b)})
                    if st is not None and st.get(a) not in (0, 1) and st.get(b) == 1:
                        staged.append(n)
        if not staged:
            return None
        smem = sum(32 * 33 * max(4, 8 if n.dtype in ("f64", "s64", "u64") else 4)
                   for n in staged)
        if smem > self.device.shared_memory_per_block:  # 48 KB without opt-in: plain loop
            return None
        narrow = self._narrow()
        it = "int" if narrow else "int64_t"
        name = self._name("" if len(outs) == len(k.outputs) else f"_o{outs[0]}")
        blk = TiledBlock(self._load, narrow, indent=1)
        blk.bindings["RS"] = "rs"
        blk.emit(f"const {it} bid = blockIdx.x;")
        blk.emit(f"const {it} a0 = (bid % {ta_n}) * 32, b0 = ((bid / {ta_n}) % {tb_n}) * 32;")
        blk.emit(f"const {it} rs = bid / {ta_n * tb_n};")
        # the thread tile: 32 x ``rows`` threads walk the 32 x 32 tile in 32 / rows passes
        threads = self.cfg.block if self.cfg.block in TRANSPOSE_BLOCKS else 256
        rows = threads // 32
        blk.emit("const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;")
        tiles = {}
        for n in staged:
            t = blk.fresh("tile")
            blk.emit(f"__shared__ {CTYPE[n.dtype]} {t}[32][33];")
            tiles[n] = t
        # phase 1: coalesced along b
        for r in range(32 // rows):
            blk.scopes.append({})
            blk.bindings["TA"], blk.bindings["TB"] = f"(a0 + ty + {rows * r})", "(b0 + tx)"
            blk.open(f"if (a0 + ty + {rows * r} < {A} && b0 + tx < {B})")
            for n, t in tiles.items():
                blk.emit(f"{t}[ty + {rows * r}][tx] = {blk.value(n)};")
            blk.close()
            blk.scopes.pop()
        blk.emit("__syncthreads();")
        # phase 2: coalesced along a
        for r in range(32 // rows):
            blk.scopes.append({})
            blk.staged = {n: f"{t}[tx][ty + {rows * r}]" for n, t in tiles.items()}
            blk.bindings["TA"], blk.bindings["TB"] = "(a0 + tx)", f"(b0 + ty + {rows * r})"
            blk.open(f"if (a0 + tx < {A} && b0 + ty + {rows * r} < {B})")
            codes = [blk.value(v) for v in vals]
            pos = blk.value(ix.linear_index(shape, tuple(idx)))
            for n, c in zip(outs, codes):
                self._store(blk, n, pos, c)
            blk.close()
            blk.scopes.pop()
        params, decl = self._signature(name, outs)
        grid = ta_n * tb_n * restn
        code = (f'extern "C" __global__ void __launch_bounds__({threads}) {name}('
                f'{", ".join(decl)}) {{\n' + "\n".join(blk.lines) + "\n}\n")
        ks = KernelSource(name, k.name, "transpose", code, params, (grid, 1, 1),
                          (threads, 1, 1), True, self._bytes(outs))
        ks.extra["tile"] = (a, b, len(staged))
        return ks

    def _vector_width(self, outs, n_el) -> int:
        """4 elements per thread (16-byte accesses for 32-bit types) when the outputs are
        of 1-, 2- or 4-byte types and the element count divides (buffers are 64-byte
        aligned by buffer assignment and the allocator)."""
        w = self.cfg.unroll if self.cfg.unroll in (2, 4) else 1
        if w == 1 or n_el % w or n_el < w:
            return 1
        for n in outs:
            if self.k.outputs[n].shape.dtype.itemsize not in (1, 2, 4):
                return 1
        return w

    def _bytes(self, outs) -> int:
        b = sum(v.shape.num_elements() * v.shape.dtype.itemsize for v in self.k.inputs)
        return b + sum(self.k.outputs[n].shape.num_elements()
                       * self.k.outputs[n].shape.dtype.itemsize for n in outs)

    # ---- in-place dynamic-update-slice ----------------------------------------------------
    def _dus(self) -> KernelSource:
        k = self.k
        root = self.roots[0][0]
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
    def _reduction(self, outs, row: bool, side=()) -> KernelSource:
        k = self.k
        shape = k.outputs[outs[0]].shape
        rows = shape.num_elements()
        name = self._name("" if len(outs) + len(side) == len(k.outputs) else f"_o{outs[0]}")
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
        red = self._side_stores(blk, em, vals, side) if side else None
        codes = [blk.value(v) for v in vals]
        # stored only where that reduction's loop was rendered (it pops its stores)
        side = list(side) if red is not None and red not in blk.side_stores else []
        blk.side_stores.clear()
        first = {"warp": "lane == 0", "block": "threadIdx.x == 0", "column": "ty == 0"}[mode]
        blk.emit(f"if ({first} && R < {rows}) {{")
        blk.indent += 1
        for n, c in zip(outs, codes):
            self._store(blk, n, "R", c)
        blk.indent -= 1
        blk.emit("}")
        params, decl = self._signature(name, list(outs) + list(side))
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
        ks = KernelSource(name, k.name, f"{'row' if row else 'column'}_reduction", code,
                          params, (max(grid, 1), 1, 1), (threads, 1, 1),
                          True, self._bytes(list(outs) + list(side)))
        if side:
            ks.extra["side_outputs"] = list(side)
        return ks

    def _side_stores(self, blk, em, vals, side):
        """Outputs ``side`` (the reduced operand's dims) stored by the first top-level
        reduction's loop at its operand index: that reduction's spec, or None (they get a
        loop kernel) when no top-level reduction has such an index."""
        rank = self.k.outputs[side[0]].shape.rank
        red = next((e for v in vals for e in _top_level_reduces(v)
                    if len(e.attr.operand_index) == rank), None)
        if red is None:
            return None
        at = red.attr.operand_index
        blk.side_stores[red.attr] = [
            (n, self._root_exprs(em, [n], at)[0],
             ix.linear_index(self.k.outputs[n].shape, at)) for n in side]
        blk.store = lambda n, pos, val: self._store(blk, n, pos, val)
        return red.attr

    def _reduced_size(self, outs) -> int:
        from ...codegen.kinds import find_hero
        best = 1
        for n in outs:
            h = find_hero(self.roots[n][0])
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
        self.keep_values = None   # a row buffer the next reduction stores its operand in
        self.side_stores: dict = {}   # ReduceSpec -> [(output, value, position)] its loop stores
        self.store = None             # (output, position code, value code) -> None
        self.quad_order = False   # row reductions walk each thread's 4-element runs

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
        quads = self.quad_order and len(spec.loop_vars) == 1 and \
            self.mode in ("warp", "block") and quad_runs(total, step)
        if quads:
            self.open_quads(kv, start, step, quads, kt)
        else:
            self.emit("#pragma unroll 4")
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
        for n, val, pos in self.side_stores.pop(spec, ()):
            self.store(n, self.value(pos), self.value(val))
        if self.keep_values and len(spec.loop_vars) == 1:  # kv is the row's column
            self.emit(f"{self.keep_values}[{kv}] = {xs[0]};")
            self.keep_values = None  # stored: the caller may read the buffer
        self._fold(spec, accs, xs, dtypes, has, None)
        self.close()
        if quads:
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

    def open_quads(self, var, start, step, runs, kt) -> None:
        """Two unrolled loops giving ``var`` the row positions ``4 * (start + q * step) +
        e`` (``q < runs``, ``e < 4``): each thread takes runs of 4 neighbours, which the
        compiler reads and writes as 16-byte vectors, with the loop and the ``has`` test
        of the first element folded away.  Close with two ``close()``."""
        q, e = self.fresh("q"), self.fresh("e")
        self.emit("#pragma unroll")
        self.open(f"for (int {q} = 0; {q} < {runs}; ++{q})")
        self.emit("#pragma unroll")
        self.open(f"for (int {e} = 0; {e} < 4; ++{e})")
        self.emit(f"const {kt} {var} = 4 * ({start} + {q} * {step}) + {e};")

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


def _top_level_reduces(root: Expr) -> list:
    """The ``reduce`` nodes of ``root`` outside any other reduction's body (those a
    reduction kernel parallelises), first found first."""
    out, seen, stack = [], set(), [root]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if e.op == "reduce":
            out.append(e)
        stack.extend(reversed(e.args))   # a reduction's args are its init values
    return out


QUAD_RUNS_MAX = 16   # 4-element runs per thread a row walk unrolls (64 elements)


def quad_runs(total: int, step: int) -> int:
    """Runs of 4 elements per thread when ``total`` splits evenly into them and they
    stay few enough to unroll, else 0."""
    runs, left = divmod(total, 4 * step)
    return runs if not left and 0 < runs <= QUAD_RUNS_MAX else 0


def emit_kernel(kernel, names: set, device, config: LaunchConfig | None = None):
    if not kernel.outputs:
        return []
    return KernelEmitter(kernel, names, device, config).emit()
