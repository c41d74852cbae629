"""Runs a :class:`~.program.Program` on a device: one arena from buffer assignment,
constants uploaded once, thunks in order on one stream, host control flow around them.

The device is an object with ``alloc(nbytes) -> addr``, ``upload(addr, bytes)``,
``download(addr, nbytes) -> bytes``, ``copy(dst, src, nbytes)``,
``launch(kernel_source, addrs)``, ``sync()`` and, for profiles, ``timer()``; the CUDA
driver (``driver.py``) and cuda-sim's host memory (``cuda_sim/device.py``) provide it.
"""
from __future__ import annotations

import time

import numpy as np

from ...errors import HloError
from .libraries import capturable


def to_physical(arr, shape) -> bytes:
    """The bytes of a logical numpy array laid out by ``shape``'s layout."""
    a = np.asarray(arr)
    if a.dtype != shape.dtype:
        a = a.astype(shape.dtype)
    if shape.dims and len(shape.dims) > 1:
        m2m = shape.effective_layout().minor_to_major
        a = np.transpose(a, tuple(reversed(m2m)))
    return np.ascontiguousarray(a).tobytes()


def from_physical(data: bytes, shape):
    dims = list(shape.dims)
    a = np.frombuffer(data, dtype=shape.dtype, count=shape.num_elements()).copy()
    if len(dims) > 1:
        m2m = list(shape.effective_layout().minor_to_major)
        order = list(reversed(m2m))
        a = a.reshape([dims[d] for d in order])
        inv = [order.index(d) for d in range(len(dims))]
        return np.transpose(a, inv).copy()
    return a.reshape(dims)


CONTROL = ("while", "conditional", "call")  # timed through the thunks they run
MAX_GRAPH_THUNKS = 20000   # one CUDA graph holds at most this many thunks (loops unrolled)
PROFILE_KIND = {"launch": "kernel", "host": "host call", "library": "library"}


class Frame:
    """Addresses of one computation's parameters (param n, leaf j -> address)."""

    def __init__(self, params: dict):
        self.params = params


class Runner:
    def __init__(self, program, device, profile: bool = False):
        self.p = program
        self.dev = device
        self.arena = device.alloc(max(program.arena_size, 64))
        self.consts = []
        for c in program.constants:
            data = to_physical(c.literal.array, c.shape) if c.shape.num_elements() else b""
            a = device.alloc(max(len(data), 16))
            if data:
                device.upload(a, data)
            self.consts.append(a)
        self.param_bufs: list = []
        self.profile = profile
        self.times: dict = {}          # thunk name -> [seconds, count]
        self._host_eval = None
        self._graph = None
        self._runs = 0
        self._loop_graphs: dict = {}   # (while thunk, state addresses) -> body graph
        self._capture_failed = False
        self._capturing = False
        self._via_library: set = set()  # launch thunks a library ran (profile: "library")
        self._warm_loops: set = set()   # loop bodies with library launches run plainly once
        self.lt_refused: set = set()   # ids of library thunks cuBLASLt refused

    # ---- addresses ------------------------------------------------------------------------
    def addr(self, sl, frame: Frame) -> int:
        if sl.kind == "arena":
            return self.arena + sl.offset
        if sl.kind == "const":
            return self.consts[sl.index]
        return frame.params[(sl.index, sl.offset)]

    # ---- entry ----------------------------------------------------------------------------
    def run(self, args) -> list:
        entry = self.p.entry
        params = entry.plan.computation.parameters
        frame_params = {}
        leaves = []
        for n, (p, a) in enumerate(zip(sorted(params, key=lambda q: q.parameter_number),
                                      args)):
            shapes = p.shape.leaves() if p.shape.is_tuple() else [p.shape]
            vals = _flatten(a) if p.shape.is_tuple() else [a]
            for j, (s, v) in enumerate(zip(shapes, vals)):
                leaves.append(((n, j), s, v))
        if len(self.param_bufs) != len(leaves) or any(
                b[1] < max(s.num_elements() * s.dtype.itemsize, 16)
                for b, (_, s, _) in zip(self.param_bufs, leaves)):
            self.param_bufs = [(self.dev.alloc(max(s.num_elements() * s.dtype.itemsize, 16)),
                                max(s.num_elements() * s.dtype.itemsize, 16))
                               for _, s, _ in leaves]
        for (key, s, v), (buf, _) in zip(leaves, self.param_bufs):
            data = to_physical(v, s)
            if data:
                self.dev.upload(buf, data)
            frame_params[key] = buf
        frame = Frame(frame_params)
        self.execute(entry, frame)
        self.dev.sync()
        out = []
        root = entry.plan.computation.root.shape
        shapes = root.leaves() if root.is_tuple() else [root]
        for s, sl in zip(shapes, entry.root_slices):
            data = self.dev.download(self.addr(sl, frame), s.num_elements() * s.dtype.itemsize)
            out.append(from_physical(data, s))
        return out

    def execute(self, entry, frame) -> None:
        """Run the entry's thunks; a straight-line entry (launches, copies, cuBLASLt
        calls) is captured into a CUDA graph on its second run and replayed after
        (addresses are stable: the arena and the argument buffers are reused)."""
        if self._graphs_ok():
            key = tuple(sorted(frame.params.items()))
            if self._graph is not None and self._graph[0] == key:  # replay: nothing else
                self.dev.launch_graph(self._graph[1])
                return
        if not self._graphs_ok() or not self._capturable(entry.thunks, frame):
            self.run_computation(entry, frame)
            return
        self._runs += 1
        if self._runs < 2:
            self.run_computation(entry, frame)
            return
        exe = self._capture(lambda: self.run_computation(entry, frame))
        if exe is None:
            self.run_computation(entry, frame)
            return
        self._graph = (key, exe)
        self.dev.launch_graph(exe)

    def _graphs_ok(self) -> bool:
        return hasattr(self.dev, "begin_capture") and not self.profile \
            and not self._capture_failed

    def _capture(self, record):
        """A CUDA graph of what ``record`` puts on the stream, or None when the capture
        fails (graphs are then off for this runner; the work runs as plain thunks)."""
        self.dev.begin_capture()
        self._capturing = True
        try:
            record()
        except Exception:  # noqa: BLE001 - e.g. a library call that refuses capture
            try:
                self.dev.end_capture()
            except Exception:  # noqa: BLE001 - the capture was invalidated
                pass
            self._capture_failed = True
            return None
        finally:
            self._capturing = False
        try:
            return self.dev.end_capture()
        except Exception:  # noqa: BLE001
            self._capture_failed = True
            return None

    # ---- thunks ---------------------------------------------------------------------------
    def run_computation(self, cp, frame: Frame) -> None:
        for t in cp.thunks:
            if self.profile and t.kind not in CONTROL:
                tm = self.dev.timer()
                tm.start()
                self._run_thunk(t, frame)
                secs = tm.stop()
                kind = "library" if t.name in self._via_library else \
                    PROFILE_KIND.get(t.kind, t.kind)
                rec = self.times.setdefault((t.name, kind), [0.0, 0])
                rec[0] += secs
                rec[1] += 1
            else:
                self._run_thunk(t, frame)

    def _run_thunk(self, t, frame):
        k = t.kind
        if k == "launch":
            if t.spec is not None and self._library_launch(t, frame):
                self._via_library.add(t.name)
                return
            self.dev.launch(t.kernel, [self.addr(s, frame) for s in t.args])
        elif k == "copy":
            dst, src = (self.addr(s, frame) for s in t.args)
            if dst != src and t.nbytes:
                self.dev.copy(dst, src, t.nbytes)
        elif k == "host":
            self._host_call(t.step, frame)
        elif k == "library":
            self.dev.library_call(self, t, frame)
        elif k == "while":
            self._while(t, frame)
        elif k == "conditional":
            self._conditional(t, frame)
        elif k == "call":
            self._call(t, frame)
        else:
            raise AssertionError(k)

    def _library_launch(self, t, frame) -> bool:
        """A launch a library can run instead (a convolution's cuDNN graph): True when
        the device ran it so, False when the kernel should run (no such library on this
        device, or it refused: ``Program.library_fallbacks`` says why)."""
        run = getattr(self.dev, "cudnn_conv", None)
        return run is not None and run(self, t, frame)

    def _read_values(self, slices, shapes, frame):
        from ..interpreter.values import TOKEN
        self.dev.sync()
        return [from_physical(self.dev.download(self.addr(sl, frame),
                                                s.num_elements() * s.dtype.itemsize), s)
                if s.is_array() else TOKEN for sl, s in zip(slices, shapes)]

    def _host_call(self, st, frame):
        from ..interpreter.evaluator import Evaluator
        from ..interpreter.registry import HANDLERS
        inst = st.instruction
        shapes = [s for o in inst.operands
                  for s in (o.shape.leaves() if o.shape.is_tuple() else [o.shape])]
        vals = self._read_values(st.input_slices, shapes, frame)
        it = iter(vals)
        operands = [_rebuild(o.shape, it) for o in inst.operands]
        h = HANDLERS.get(inst.opcode)
        if h is None:
            raise HloError(f"{self.dev.name}: no way to run %{inst.name} ({inst.opcode})")
        if self._host_eval is None:
            self._host_eval = Evaluator()
        result = self._host_eval.run_handler(h, inst, operands)
        outs = _flatten(result) if inst.shape.is_tuple() else [result]
        for v, sl, r in zip(st.outputs, st.output_slices, outs):
            if not v.shape.is_array():
                continue
            data = to_physical(r, v.shape)
            if data:
                self.dev.upload(self.addr(sl, frame), data)

    def _callee_frame(self, cp, addrs_per_param) -> Frame:
        return Frame({(n, j): a for n, addrs in enumerate(addrs_per_param)
                      for j, a in enumerate(addrs)})

    def _copy_root_to(self, cp, frame, dsts, shapes):
        srcs = [self.addr(sl, frame) for sl in cp.root_slices]
        sizes = [s.num_elements() * s.dtype.itemsize for s in shapes]
        if self._root_overlaps(cp, frame, dsts):
            self.dev.sync()
            datas = [self.dev.download(s, n) for s, n in zip(srcs, sizes)]
            for d, data, n in zip(dsts, datas, sizes):
                if n:
                    self.dev.upload(d, data)
            return
        for s, d, n in zip(srcs, dsts, sizes):
            if s != d and n:
                self.dev.copy(d, s, n)

    def _capturable(self, thunks, frame=None) -> bool:
        """Whether ``thunks`` only put device work on the stream (launches, device copies,
        library calls that may be captured (``libraries.capturable``) and, given the
        ``frame``, while loops with a known trip count whose body is such work), so that
        a CUDA graph can hold them: at most
        ``MAX_GRAPH_THUNKS`` of them, loops unrolled."""
        size = 0
        for t in thunks:
            if t.kind == "library":
                # asked first: it makes the library's handles and workspaces outside any
                # capture; a gemm with our kernel is device work either way
                ok = capturable(self.dev, t)
                if t.kernel is None and (not ok or id(t) in self.lt_refused):
                    return False
            elif t.kind == "while" and frame is not None:
                unrolled = self._unrolled_size(t, frame)
                if unrolled is None:
                    return False
                size += unrolled
            elif t.kind not in ("launch", "copy"):
                return False
            size += 1
        return size <= MAX_GRAPH_THUNKS

    def _unrolled_size(self, t, frame) -> int | None:
        """Thunks of a while loop unrolled into its caller's graph, or None when it cannot
        be (no known trip count, a body that is not plain device work, swapped state)."""
        trips = known_trip_count(t.step.instruction)
        if trips is None:
            return None
        _, body, state, _, f = self._loop_parts(t, frame)
        if not self._capturable(body.thunks, f) or self._root_overlaps(body, f, state):
            return None
        return trips * (len(body.thunks) + len(state))

    def _root_overlaps(self, cp, frame, dsts) -> bool:
        """A root leaf is another leaf's destination (swapped state): the copy back then
        stages through the host."""
        srcs = [self.addr(sl, frame) for sl in cp.root_slices]
        return any(s != d and s in dsts for s, d in zip(srcs, dsts))

    def _loop_parts(self, t, frame):
        """(condition, body, state addresses, state shapes, the body's frame) of a while
        thunk in ``frame``."""
        st = t.step
        from ..interpreter.ops_control import called_by
        progs = {cp.plan.computation: cp for cp in t.callees}
        cond = progs[called_by(st.instruction, "condition")]
        body = progs[called_by(st.instruction, "body")]
        state = [self.addr(sl, frame) for sl in st.output_slices]
        return cond, body, state, [v.shape for v in st.outputs], \
            self._callee_frame(None, [state])

    def _while(self, t, frame):
        st = t.step
        inst = st.instruction
        cond, body, state, shapes, f = self._loop_parts(t, frame)
        for d, sl, s in zip(state, st.input_slices, shapes):
            src = self.addr(sl, frame)
            n = s.num_elements() * s.dtype.itemsize
            if src != d and n:
                self.dev.copy(d, src, n)
        trips = known_trip_count(inst)
        if trips is not None:  # XLA's WhileThunk with a trip count: no condition runs
            step = self._loop_body(t, body, f, state, shapes)
            for _ in range(trips):
                step()
            return
        while True:
            self.run_computation(cond, f)
            (pred,) = self._read_values(cond.root_slices, [cond.plan.root_values[0].shape], f)
            if not bool(np.asarray(pred).reshape(())):
                break
            self.run_computation(body, f)
            self._copy_root_to(body, f, state, shapes)

    def _loop_body(self, t, body, f, state, shapes):
        """One iteration of a while body (its thunks, then the root copied back into the
        state): a CUDA graph, captured once and replayed, when the body is launches and
        device copies only; else the thunks themselves."""
        def plain():
            self.run_computation(body, f)
            self._copy_root_to(body, f, state, shapes)
        if self._capturing:      # unrolled into the graph being captured
            return plain
        key = (id(t), tuple(state))
        graph = self._loop_graphs.get(key)
        if graph is None:
            if not self._graphs_ok() or not self._capturable(body.thunks, f) or \
                    self._root_overlaps(body, f, state):
                return plain
            if key not in self._warm_loops and any(
                    b.kind == "launch" and b.spec is not None for b in body.thunks):
                self._warm_loops.add(key)   # a library builds on a plain run, not captured
                return plain
            graph = self._capture(plain)
            if graph is None:
                return plain
            self._loop_graphs[key] = graph
        return lambda: self.dev.launch_graph(graph)

    def _split_operands(self, inst, slices, start):
        out, k = [], 0
        for o in inst.operands:
            n = len(o.shape.leaves()) if o.shape.is_tuple() else 1
            if o.shape.is_tuple() and not o.shape.tuple_shapes:
                n = 0
            out.append(slices[k:k + n])
            k += n
        return out[start:]

    def _conditional(self, t, frame):
        st = t.step
        inst = st.instruction
        from ..interpreter.ops_control import called_by
        (sel,) = self._read_values(st.input_slices[:1], [inst.operands[0].shape], frame)
        ops = self._split_operands(inst, st.input_slices, 1)
        if inst.operands[0].shape.element_type == "pred":
            b = 0 if bool(np.asarray(sel).reshape(())) else 1
            comp = called_by(inst, "true_computation" if b == 0 else "false_computation")
        else:
            b = int(np.asarray(sel).reshape(()))
            if b < 0 or b >= len(inst.called):
                b = len(inst.called) - 1
            comp = inst.called[b]
        cp = {c.plan.computation: c for c in t.callees}[comp]
        f = self._callee_frame(cp, [[self.addr(s, frame) for s in ops[b]]])
        self.run_computation(cp, f)
        self._copy_root_to(cp, f, [self.addr(s, frame) for s in st.output_slices],
                           [v.shape for v in st.outputs])

    def _call(self, t, frame):
        st = t.step
        cp = t.callees[0]
        ops = self._split_operands(st.instruction, st.input_slices, 0)
        f = self._callee_frame(cp, [[self.addr(s, frame) for s in o] for o in ops])
        self.run_computation(cp, f)
        self._copy_root_to(cp, f, [self.addr(s, frame) for s in st.output_slices],
                           [v.shape for v in st.outputs])

    # ---- profile --------------------------------------------------------------------------
    def profile_rows(self):
        total = sum(v[0] for v in self.times.values()) or 1.0
        rows = [{"name": n, "kind": k, "time_us": v[0] * 1e6 / max(v[1], 1),
                 "calls": v[1], "share": v[0] / total}
                for (n, k), v in self.times.items()]
        rows.sort(key=lambda r: -r["share"])
        return rows


def known_trip_count(inst) -> int | None:
    """``known_trip_count.n`` of a while's backend_config (while-loop-trip-count-annotator)."""
    from ..interpreter.ops_custom_call import backend_config
    try:
        n = backend_config(inst).get("known_trip_count", {}).get("n")
    except Exception:  # noqa: BLE001 - no or unreadable config: the condition decides
        return None
    try:
        return int(n) if n is not None else None
    except (TypeError, ValueError):
        return None


def _flatten(v):
    if isinstance(v, (tuple, list)):
        out = []
        for x in v:
            out.extend(_flatten(x))
        return out
    return [v]


def _rebuild(shape, it):
    if shape.is_tuple():
        return tuple(_rebuild(s, it) for s in shape.tuple_shapes)
    return next(it)


class WallTimer:
    def __init__(self, dev):
        self.dev = dev

    def start(self):
        self.dev.sync()
        self.t = time.perf_counter()

    def stop(self):
        self.dev.sync()
        return time.perf_counter() - self.t
