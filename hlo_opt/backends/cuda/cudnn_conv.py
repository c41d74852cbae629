"""Convolutions through cuDNN's frontend (``nvidia-cudnn-frontend``, ``import cudnn``): one
graph per :class:`~.conv_plan.ConvPlan` (conv_fprop / conv_dgrad / conv_wgrad, and for
``convBiasActivationForward`` the scale, side input, bias and activation as pointwise
nodes), validated, lowered, given the heuristics' engines (modes A, then FALLBACK),
checked and built once, then executed on raw device pointers on the runner's stream (one
handle per device, ``cudnn.set_stream``), with a workspace of the plan's size.

Engines whose numerics fall short of the interpreter's (:func:`excluded_notes`: TF32 for
f32 convolutions, f16 accumulation) are left out.  Engines are addressed by their index
in the graph's ranked plan list; only cuDNN backend engines (ids below the frontend's
python-engine range) are used.  ``engines(plan)`` lists the indices that build with their
(engine id, knobs), the autotuner's candidates; a plan whose ``engine`` names one of them
runs it, one naming none raises :class:`EngineGone`.  Everything that can fail here (no
``cudnn`` module, no libcudnn, a graph cuDNN does not support, a gone engine) raises; the
runtime then runs the conv kernel instead (``CudaDeviceAdapter.cudnn_conv``).

CUDA graphs: graphs are built, engines compiled and the workspace allocated on a
convolution's first plain run (the runtime captures an entry on its second run); a capture
that meets a convolution not :meth:`CudnnConv.ready` yet (a while body is captured on its
first run) records the conv kernel instead, and an execute that fails inside a capture is
re-raised (the runtime then drops graphs for that runner and reruns plainly).
"""
from __future__ import annotations

import dataclasses
import functools

from .toolchain import MissingToolError

DTYPE = {"f32": "FLOAT", "f16": "HALF", "bf16": "BFLOAT16", "f64": "DOUBLE"}
PYTHON_ENGINE_ID_BASE = 10_000   # frontend ids from here on are not cuDNN backend engines


class EngineGone(RuntimeError):
    """The engine a backend config selects is not among this graph's engines."""


@functools.cache
def _cudnn():
    try:
        import cudnn
    except ImportError:
        raise MissingToolError("cuDNN frontend not found: install the "
                               "'nvidia-cudnn-frontend' package and cuDNN "
                               "('nvidia-cudnn-cu13'; or everything: "
                               "pip install 'hlo-opt[cuda]')") from None
    return cudnn


def cudnn_available() -> bool:
    """Whether the frontend module imports (no device touched)."""
    try:
        _cudnn()
    except MissingToolError:
        return False
    return True


def _knobs(knobs) -> tuple:
    """(knob, value) pairs as sorted ints, for backend configs and candidate keys."""
    return tuple(sorted((int(getattr(k, "value", k)), int(v)) for k, v in (knobs or {}).items()))


@dataclasses.dataclass
class ConvGraph:
    """A built cuDNN graph of one plan: its tensors (x, w, y, bias, side), the default
    engine's index, and per index (engine id, knobs) / built or not."""
    graph: object
    tensors: dict
    default: int
    engines: dict = dataclasses.field(default_factory=dict)   # index -> (id, knobs)
    built: set = dataclasses.field(default_factory=set)
    failed: set = dataclasses.field(default_factory=set)
    workspace: dict = dataclasses.field(default_factory=dict)   # index -> bytes

    def workspace_size(self, index: int) -> int:
        if index not in self.workspace:
            self.workspace[index] = int(self.graph.get_workspace_size_plan_at_index(index))
        return self.workspace[index]


def excluded_notes(plan) -> tuple:
    """cuDNN numerical notes of engines that would not meet the interpreter's precision:
    f16 accumulation anywhere, and for f32 / f64 tensor-core engines (TF32 inputs)."""
    out = ("REDUCED_PRECISION_REDUCTION",)
    if plan.result.dtype in ("f32", "f64"):
        out += ("TENSOR_CORE", "DOWN_CONVERT_INPUTS")
    return out


def build_graph(cudnn, plan, handle=None):
    """The frontend graph of ``plan`` (not validated): (graph, {role: tensor})."""
    io = getattr(cudnn.data_type, DTYPE[plan.result.dtype])
    comp = getattr(cudnn.data_type, DTYPE[plan.compute])
    kwargs = dict(io_data_type=io, intermediate_data_type=comp, compute_data_type=comp)
    if handle is not None:
        kwargs["handle"] = handle
    g = cudnn.pygraph(**kwargs)

    def tensor(desc, name):
        return g.tensor(dim=list(desc.dims), stride=list(desc.strides),
                        data_type=getattr(cudnn.data_type, DTYPE[desc.dtype]), name=name)
    geometry = dict(pre_padding=list(plan.pre_padding), post_padding=list(plan.post_padding),
                    stride=list(plan.stride), dilation=list(plan.dilation),
                    compute_data_type=comp)
    if plan.convolution:
        geometry["convolution_mode"] = cudnn._pybind_module.convolution_mode.CONVOLUTION
    t = {}
    if plan.kind == "fprop":
        t["x"], t["w"] = tensor(plan.x, "x"), tensor(plan.w, "w")
        out = g.conv_fprop(image=t["x"], weight=t["w"], **geometry)
    elif plan.kind == "dgrad":
        t["y"], t["w"] = tensor(plan.y, "dy"), tensor(plan.w, "w")
        out = g.conv_dgrad(loss=t["y"], filter=t["w"], out_dims=list(plan.x.dims),
                           **geometry)
    else:
        t["x"], t["y"] = tensor(plan.x, "x"), tensor(plan.y, "dy")
        out = g.conv_wgrad(image=t["x"], loss=t["y"], out_dims=list(plan.w.dims),
                           **geometry)
    res = plan.result

    def shaped(v):  # intermediates in the result's layout (fusion engines want NHWC)
        return v.set_dim(list(res.dims)).set_stride(list(res.strides))
    out = shaped(out)
    if plan.fused:
        if plan.scale != 1:
            out = shaped(g.mul(a=out, b=g.tensor_scalar(float(plan.scale), comp)))
        if plan.side is not None:
            t["side"] = tensor(plan.side, "side")
            side = t["side"]
            if plan.side_scale != 1:
                side = shaped(g.mul(a=side, b=g.tensor_scalar(float(plan.side_scale), comp)))
            out = shaped(g.add(a=out, b=side))
        if plan.bias is not None:
            t["bias"] = tensor(plan.bias, "bias")
            out = shaped(g.add(a=out, b=t["bias"]))
        if plan.activation == "kRelu":
            out = shaped(g.relu(input=out))
        elif plan.activation == "kRelu6":
            out = shaped(g.relu(input=out, lower_clip=0.0, upper_clip=6.0))
        elif plan.activation == "kElu":
            out = shaped(g.elu(input=out))
        elif plan.activation == "kLeakyRelu":
            out = shaped(g.leaky_relu(input=out, negative_slope=float(plan.leaky_alpha)))
    out.set_output(True).set_data_type(io)
    t["out"] = out
    return g, t


class CudnnConv:
    """cuDNN convolutions on one driver device (``dev``: ``stream``, ``alloc``,
    ``free``)."""

    def __init__(self, dev):
        cudnn = _cudnn()
        self.cudnn = cudnn
        self.dev = dev
        self.handle = cudnn.create_handle()
        cudnn.set_stream(self.handle, int(dev.stream))
        self.graphs: dict = {}
        self.workspace = (0, 0)        # (address, bytes)
        self._outgrown: list = []      # smaller workspaces before it (doubling: <= its size)

    @staticmethod
    def _key(plan):
        return dataclasses.replace(plan, engine=None)

    def graph(self, plan) -> ConvGraph:
        """The built graph of ``plan`` (cached; raises when cuDNN cannot run it)."""
        key = self._key(plan)
        hit = self.graphs.get(key)
        if isinstance(hit, Exception):
            raise hit
        if hit is not None:
            return hit
        try:
            hit = self._build(key)
        except Exception as e:  # noqa: BLE001 - remembered: the kernel runs it from now on
            self.graphs[key] = RuntimeError(f"cuDNN: {type(e).__name__}: {str(e)[:300]}")
            raise self.graphs[key] from None
        self.graphs[key] = hit
        return hit

    def _build(self, plan) -> ConvGraph:
        cudnn = self.cudnn
        g, t = build_graph(cudnn, plan, self.handle)
        g.validate()
        g.build_operation_graph()
        g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
        notes = cudnn.numerical_note
        g.deselect_numeric_notes([getattr(notes, n) for n in excluded_notes(plan)])
        refused = None
        try:
            g.check_support()
        except Exception as e:  # noqa: BLE001 - aggregate; the engines' builds decide
            refused = f"{type(e).__name__}: {str(e)[:200]}"
        cg = ConvGraph(g, t, -1)
        for i in range(g.get_execution_plan_count()):
            try:
                eid, knobs = g.get_engine_and_knobs_at_index(i)
            except Exception:  # noqa: BLE001 - an entry with no engine to name
                continue
            if 0 <= int(eid) < PYTHON_ENGINE_ID_BASE:
                cg.engines[i] = (int(eid), _knobs(knobs))
        for i in cg.engines:
            if self._build_index(cg, i):
                cg.default = i
                break
        if cg.default < 0:
            raise RuntimeError(f"no cuDNN engine builds for {plan.summary()} (of "
                               f"{len(cg.engines)}; check_support: {refused or 'ok'})")
        return cg

    def _build_index(self, cg: ConvGraph, index: int) -> bool:
        if index in cg.built:
            return True
        if index in cg.failed:
            return False
        try:
            cg.graph.build_plan_at_index(index)
        except Exception:  # noqa: BLE001 - this engine declines the graph
            cg.failed.add(index)
            return False
        cg.built.add(index)
        return True

    def engines(self, plan, limit: int | None = None) -> list:
        """[(index, engine id, knobs, workspace bytes)] of the engines that build (the
        heuristics' first ``limit``)."""
        cg = self.graph(plan)
        out = []
        for i, (eid, knobs) in cg.engines.items():
            if limit is not None and len(out) >= limit:
                break
            if self._build_index(cg, i):
                out.append((i, eid, knobs, cg.workspace_size(i)))
        return out

    def index_of(self, plan) -> int:
        """The plan index ``plan.engine`` names (the default engine without one)."""
        cg = self.graph(plan)
        if plan.engine is None:
            return cg.default
        for i, e in cg.engines.items():
            if e == tuple(plan.engine) and self._build_index(cg, i):
                return i
        raise EngineGone(f"cuDNN engine {plan.engine[0]} (knobs {dict(plan.engine[1])}) is "
                         f"not among this convolution's engines")

    def ready(self, plan) -> bool:
        """Whether ``plan`` runs without building or allocating anything (what a stream
        capture allows): its graph and engine built, the workspace big enough."""
        cg = self.graphs.get(self._key(plan))
        if not isinstance(cg, ConvGraph):
            return False
        if plan.engine is None:
            i = cg.default
        else:
            i = next((i for i, e in cg.engines.items() if e == tuple(plan.engine)), None)
        return i is not None and i in cg.built and cg.workspace_size(i) <= self.workspace[1]

    def _workspace(self, nbytes: int) -> int:
        addr, have = self.workspace
        if nbytes <= have:
            return addr
        if addr:  # kept, not freed: a call still queued or a captured graph may use it
            self._outgrown.append(addr)
        size = max(nbytes, 2 * have, 1 << 20)
        self.workspace = (self.dev.alloc(size), size)
        return self.workspace[0]

    def run(self, plan, operands: list, result: int, index: int | None = None,
            workspace: int | None = None) -> None:
        """The convolution on device pointers: ``operands`` the HLO operands' addresses,
        ``result`` the result's; ``index`` a plan index (else the plan's engine);
        ``workspace`` an address big enough for it (else this object's own)."""
        cg = self.graph(plan)
        i = self.index_of(plan) if index is None else index
        if not self._build_index(cg, i):
            raise EngineGone(f"cuDNN engine at index {i} does not build")
        pack = {}
        for role, desc in (("x", plan.x), ("w", plan.w), ("y", plan.y), ("bias", plan.bias),
                           ("side", plan.side)):
            if role in cg.tensors and desc is not None and desc.operand is not None:
                pack[cg.tensors[role]] = int(operands[desc.operand])
        pack[cg.tensors["out"]] = int(result)
        if workspace is None:
            workspace = self._workspace(cg.workspace_size(i))
        cg.graph.execute_plan_at_index(pack, workspace, index=i, handle=self.handle)
