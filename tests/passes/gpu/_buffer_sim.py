"""A buffer-level simulator for testing copy-insertion, independent of the pass.

The interpreter has value semantics: copies never matter to it.  This simulator runs a
module the way XLA's buffer assignment must be able to, one numpy array per buffer:

* entry parameters are read-only unless donated (``input_output_alias``), constants are
  read-only;
* tuple, get-tuple-element and bitcast alias their operand;
* a ``while`` runs in the buffers of its init, and every leaf of the body's result must
  end in that leaf's loop buffer: the instruction producing it writes straight into the
  loop buffer when it runs (an op that is not in place); an in-place op or a nested loop
  must already be that buffer; a leaf that is another parameter element or a constant
  cannot be (XLA would need a copy);
* in-place ops (dynamic-update-slice, scatter, fusions rooted in them, custom-calls with
  ``output_to_operand_aliasing``) write into their operand's buffer;
* a conditional's branches write their results into the conditional's buffers (a result
  every branch forwards from the same operand aliases it);
* everything else (copies included) writes a fresh buffer.

Instructions run in random topological orders (operands and control edges respected) and
in a writers-first order.  A missing copy shows as a write into a read-only buffer, an
impossible body result, or results that differ from the run where every buffer is fresh
(``share=False``, which is plain value semantics).  Loops stop after ``max_trips``
iterations in both runs, so modules whose conditions never end can still be compared.
"""
from __future__ import annotations

import random
import re

import numpy as np

from hlo_opt.errors import UnsupportedError


class BufferError(AssertionError):
    """The module cannot run with XLA's buffer sharing."""


class Buf:
    __slots__ = ("arr", "read_only", "name")

    def __init__(self, arr, read_only=False, name=""):
        self.arr = arr
        self.read_only = read_only
        self.name = name


def _aliases(module) -> dict:
    raw = module.header_attrs.get("input_output_alias", "")
    out = {}
    for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}", raw):
        def idx(t):
            return tuple(int(x) for x in t.replace(" ", "").split(",") if x)
        out[idx(m.group(1))] = (int(m.group(2)), idx(m.group(3)))
    return out


def _in_place(inst) -> list:
    """(operand number, output index) pairs that must share a buffer."""
    op = inst.opcode
    if op == "dynamic-update-slice":
        return [(0, ())]
    if op == "scatter":
        n = len(inst.operands) // 2
        return [(i, (i,) if n > 1 else ()) for i in range(n)]
    if op == "fusion":
        root = inst.called[0].root
        outs = list(enumerate(root.operands)) if root.opcode == "tuple" else [(None, root)]
        pairs = []
        for k, r in outs:
            while r.opcode == "bitcast":
                r = r.operands[0]
            base = () if k is None else (k,)
            if r.opcode == "dynamic-update-slice":
                inputs = [((), r.operands[0])]
            elif r.opcode == "scatter":
                n = len(r.operands) // 2
                inputs = [((i,) if n > 1 else (), r.operands[i]) for i in range(n)]
            else:
                continue
            for sub, x in inputs:
                while x.opcode == "bitcast":
                    x = x.operands[0]
                if x.opcode == "parameter":
                    pairs.append((x.parameter_number, base + sub))
        return pairs
    if op == "custom-call":
        raw = inst.attrs.get("output_to_operand_aliasing", "")
        return [(int(m.group(2)), tuple(int(x) for x in m.group(1).split(",") if x.strip()))
                for m in re.finditer(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,", raw)]
    return []


def _leaf(value, index):
    for k in index:
        value = value[k]
    return value


def _map_leaves(value, fn, index=()):
    if isinstance(value, tuple):
        return tuple(_map_leaves(v, fn, index + (k,)) for k, v in enumerate(value))
    return fn(value, index)


def _producer(inst, index):
    """(instruction, leaf index) that defines the value at ``inst``/``index`` through
    tuple / get-tuple-element / bitcast forwarding."""
    while True:
        if inst.opcode == "tuple" and index:
            inst, index = inst.operands[index[0]], index[1:]
        elif inst.opcode == "get-tuple-element":
            inst, index = inst.operands[0], (inst.attr("index"),) + index
        elif inst.opcode == "bitcast":
            inst = inst.operands[0]
        else:
            return inst, index


class Simulator:
    def __init__(self, module, share: bool, order: str, seed: int, max_trips: int):
        from hlo_opt.backends.interpreter import HANDLERS, Evaluator
        self.module = module
        self.share = share
        self.order = order
        self.rng = random.Random(seed)
        self.max_trips = max_trips
        self.handlers = HANDLERS
        self.ctx = Evaluator()
        self.aliases = _aliases(module)

    # ---- running a computation -------------------------------------------------------------
    def _schedule(self, comp, dests):
        pending = {i: len(set(i.operands)) + len(set(i.control_predecessors))
                   for i in comp.instructions}
        users = {i: set(i.users) | set(i.control_successors) for i in comp.instructions}
        ready = [i for i, n in pending.items() if n == 0]
        out = []
        while ready:
            if self.order == "writers-first":
                writers = [i for i in ready if i in dests or _in_place(i) or
                           i.opcode in ("while", "copy")]
                pick = (writers or ready)[0]
            else:
                pick = ready[self.rng.randrange(len(ready))]
            ready.remove(pick)
            out.append(pick)
            for u in users[pick]:
                if u in pending:
                    pending[u] -= 1
                    if pending[u] == 0:
                        ready.append(u)
        return out

    def run(self, comp, args, result_bufs=None):
        """Run ``comp`` on ``args``; ``result_bufs``: per result leaf, the buffer the
        result must end in (loop state, conditional output), or None."""
        dests = {}
        if self.share and result_bufs is not None:
            for index, buf in result_bufs.items():
                inst, idx = _producer(comp.root, index)
                if inst.opcode == "parameter":
                    continue  # checked after the run: it must already be that buffer
                if inst.opcode == "constant":
                    raise BufferError(f"%{comp.name} returns constant %{inst.name} into a "
                                      f"loop buffer")
                if _in_place(inst) or inst.opcode in ("while", "call"):
                    continue
                if idx in dests.get(inst, {}):
                    raise BufferError(f"%{inst.name} is returned at two loop indices of "
                                      f"%{comp.name}")
                dests.setdefault(inst, {})[idx] = buf
        values = {}
        for inst in self._schedule(comp, dests):
            values[inst] = self.step(inst, values, args, dests.get(inst, {}))
        result = values[comp.root]
        if self.share and result_bufs is not None:
            for index, buf in result_bufs.items():
                leaf = _leaf(result, index)
                if leaf is not buf and not (np.shares_memory(leaf.arr, buf.arr) and
                                            leaf.arr.size == buf.arr.size):
                    raise BufferError(f"%{comp.name} result {index} is not in its loop buffer "
                                      f"(a copy is missing)")
        return result

    def step(self, inst, values, args, dest):
        op = inst.opcode
        ops = [values[o] for o in inst.operands]
        if op == "parameter":
            return args[inst.parameter_number]
        if op == "constant":
            return self._fresh(inst, self.handlers[op](inst, [], self.ctx), {}, True)
        if op == "tuple":
            return tuple(ops)
        if op == "get-tuple-element":
            return ops[0][inst.attr("index")]
        if op == "bitcast":
            arr = np.asarray(self.handlers[op](inst, [ops[0].arr], self.ctx))
            shared = np.shares_memory(arr, ops[0].arr) if self.share else False
            return Buf(arr, ops[0].read_only, inst.name) if shared else \
                self._fresh(inst, arr, dest)
        if op == "while":
            return self._while(inst, ops[0])
        if op == "conditional":
            return self._conditional(inst, ops, dest)
        if op == "call":
            return self.run(inst.called[0], ops)
        raw = self.handlers[op](inst, [_arrays(v) for v in ops], self.ctx)
        out = self._fresh(inst, raw, dest)
        if self.share:
            for j, oidx in _in_place(inst):
                target = ops[j]
                if target.read_only:
                    raise BufferError(f"%{inst.name} updates read-only %{target.name} in place")
                value = np.asarray(_leaf(raw, oidx))
                view = _view(target.arr, inst.operands[j].shape, value,
                             _sub(inst.shape, oidx))
                if view is None:
                    continue  # a layout-changing bitcast: not modelled, the result is fresh
                np.copyto(view, value)
                out = _replace_leaf(out, oidx, target if view is target.arr else
                                    Buf(view, target.read_only, target.name))
        return out

    def _fresh(self, inst, raw, dest, read_only=False):
        def make(arr, index):
            if self.share and index in dest:
                buf = dest[index]
                if buf.read_only:
                    raise BufferError(f"%{inst.name} writes read-only %{buf.name}")
                np.copyto(buf.arr, np.reshape(arr, buf.arr.shape))  # through bitcasts
                return buf
            return Buf(np.array(arr, copy=True), read_only, inst.name)
        return _map_leaves(raw, make)

    def _while(self, inst, init):
        attr = inst.called_attr
        cond = inst.called[attr.index("condition")]
        body = inst.called[attr.index("body")]
        state = init if self.share else _map_leaves(init, lambda b, i: Buf(b.arr.copy()))
        loop_bufs = {}
        _map_leaves(state, lambda b, i: loop_bufs.__setitem__(i, b))
        for _ in range(self.max_trips):
            pred = self.run(cond, [state])
            if not bool(np.asarray(pred.arr)):
                break
            state = self.run(body, [state], loop_bufs if self.share else None)
        return state

    def _conditional(self, inst, ops, dest):
        if len(inst.called) == 2 and ops[0].arr.dtype == np.bool_:
            k = 0 if bool(ops[0].arr) else 1
        else:
            k = int(ops[0].arr)
            k = k if 0 <= k < len(inst.called) else len(inst.called) - 1
        branch = inst.called[k]
        outs = None
        if self.share:
            outs = {}
            for index in _leaf_indices(inst.shape):
                forwarded = self._forwarded(inst, index)
                if forwarded is None:
                    sub = _sub(inst.shape, index)
                    outs[index] = dest.get(index) or Buf(np.zeros(sub.dims, dtype=sub.dtype),
                                                         False, inst.name)
            return self.run(branch, [ops[k + 1]], outs)
        return self.run(branch, [ops[k + 1]])

    def _forwarded(self, inst, index):
        """The operand leaf every branch returns unchanged at ``index``, if any."""
        found = None
        for k, b in enumerate(inst.called):
            p, idx = _producer(b.root, index)
            if p.opcode != "parameter":
                return None
            src = _producer(inst.operands[k + 1], idx)
            if found is not None and src != found:
                return None
            found = src
        return found


def _default_layout(shape) -> bool:
    layout = shape.layout
    return layout is None or list(layout.minor_to_major) == list(range(len(shape.dims)))[::-1]


def _view(arr, arr_shape, value, value_shape):
    """``arr`` seen with ``value``'s dims when the two shapes hold their elements in the
    same order (a bitcast between row-major shapes is a reshape); None otherwise."""
    if arr.shape == value.shape and arr_shape.effective_layout() == \
            value_shape.effective_layout():
        return arr
    if arr.size == value.size and _default_layout(arr_shape) and _default_layout(value_shape):
        return arr.reshape(value.shape)
    return None


def _arrays(value):
    if isinstance(value, tuple):
        return tuple(_arrays(v) for v in value)
    return value.arr


def _replace_leaf(value, index, new):
    if not index:
        return new
    parts = list(value)
    parts[index[0]] = _replace_leaf(parts[index[0]], index[1:], new)
    return tuple(parts)


def _leaf_indices(shape, prefix=()):
    if shape.is_tuple():
        out = []
        for k, s in enumerate(shape.tuple_shapes):
            out.extend(_leaf_indices(s, prefix + (k,)))
        return out
    return [prefix] if shape.is_array() else []


def _sub(shape, index):
    for k in index:
        shape = shape.tuple_shapes[k]
    return shape


def simulate(module, args, share: bool, order: str = "random", seed: int = 0,
             max_trips: int = 16) -> list:
    """Run the entry computation; returns the result leaves (numpy arrays)."""
    sim = Simulator(module, share, order, seed, max_trips)
    entry = module.entry
    donated = {p for p, _ in sim.aliases.values()}
    bufs = []
    origin = {}
    for k, (p, a) in enumerate(zip(entry.parameters, args)):
        ro = k not in donated

        def make(x, i, k=k, ro=ro, name=p.name):
            buf = Buf(np.array(x, copy=True), ro, name)
            origin[id(buf)] = (k, i)
            return buf
        bufs.append(_map_leaves(_wrap(a), make))
    result = sim.run(entry, bufs)
    leaves = []
    seen = {}
    for index in _leaf_indices(entry.root.shape):
        buf = _leaf(result, index)
        if share:
            if buf.read_only:
                raise BufferError(f"entry result {index} is read-only %{buf.name}")
            if id(buf) in origin and sim.aliases.get(index) != origin[id(buf)]:
                raise BufferError(f"entry result {index} is parameter buffer "
                                  f"{origin[id(buf)]}, not the one it is donated from")
            if id(buf) in seen:
                raise BufferError(f"entry results {seen[id(buf)]} and {index} share a buffer")
            seen[id(buf)] = index
        leaves.append(np.array(buf.arr, copy=True))
    return leaves


def _wrap(a):
    if isinstance(a, tuple):
        return tuple(_wrap(x) for x in a)
    return np.asarray(a)


def assert_buffer_safe(module, seeds=(0, 1), orders: int = 4, max_trips: int = 16,
                       max_elements: int = 1 << 20) -> bool:
    """Shared-buffer runs in several orders agree with the fresh-buffer run; False when
    the module could not be simulated (too large, nondeterministic, an opcode the
    interpreter lacks), True when it was checked."""
    from tests.support.harness import largest_array, random_args
    if largest_array(module) > max_elements or not _deterministic(module):
        return False
    for seed in seeds:
        args = random_args(module, seed)
        if args is None:
            return False
        try:
            expected = simulate(module, args, share=False, max_trips=max_trips)
        except UnsupportedError:
            return False
        runs = [("writers-first", 0)] + [("random", s) for s in range(orders)]
        for order, s in runs:
            got = simulate(module, args, share=True, order=order, seed=s,
                           max_trips=max_trips)
            for k, (e, g) in enumerate(zip(expected, got)):
                if not np.array_equal(e, g, equal_nan=e.dtype.kind in "fc"):
                    raise BufferError(f"result {k} differs with shared buffers "
                                      f"(order {order} {s})")
    return True


def _deterministic(module) -> bool:
    bad = {"rng", "rng-bit-generator", "rng-get-and-update-state", "infeed", "recv",
           "recv-done", "outfeed", "send", "send-done"}
    for inst in module.instructions():
        if inst.opcode in bad:
            return False
        if inst.opcode == "custom-call" and not inst.custom_call_target.startswith(
                ("__cublas", "__cudnn", "__cusolver")):
            return False
    return True


__all__ = ["BufferError", "assert_buffer_safe", "simulate"]
