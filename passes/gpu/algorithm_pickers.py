"""``gemm-algorithm-picker`` and ``gpu-conv-algorithm-picker``: XLA's autotuners.

Each asks the autotuning session the app layer installed (``hlo_opt.autotune``: the
backend's candidate provider -- host numpy candidates, cuda-sim, cuda --, the caches,
``--xla_gpu_autotune_level``) for the best
candidate of every cuBLAS gemm / cuDNN convolution in the non-fusion computations and
writes it into the custom call's backend config, as XLA does:

* gemm: ``gemm_backend_config.selected_algorithm`` (the algorithm, or the index into the
  provider's list); when one of our gemm kernel's tile configurations wins (a candidate
  keyed ``other(name=triton:...)``, as XLA keys a Triton config), the call keeps
  cuBLAS's default algorithm and gets the tile as ``triton_gemm_config`` (XLA's
  ``TritonGemmKey`` fields) beside ``gemm_backend_config``; a gemm with
  ``alpha == beta == 0`` is skipped; when every candidate fails, a warning is recorded
  and the call is left alone;
* convolution: ``cudnn_conv_backend_config.algorithm`` (``algo_id``, ``math_type``,
  ``workspace_size``) and the scratch tuple element resized to the chosen workspace (the
  call is rebuilt and repackaged as ``tuple(get-tuple-element(0), u8[0] constant)``, as
  XLA's picker does); when every candidate fails, ``--xla_gpu_strict_conv_algorithm_picker``
  (default true) makes it an error, otherwise a warning.

Level 0, or no session (hlo-opt compiling for no device, ``--platform`` other than a GPU
backend), changes no cuBLAS call.  Gemm fusions (``__triton_gemm``) are tuned here too,
as XLA's GemmFusionAutotuner: their tile configuration (``triton_gemm_config`` in the
fusion's backend_config) is XLA's default at level 0 / without a session, else the
fastest of the provider's tile candidates (cuda-sim and cuda generate one kernel per
candidate).  XLA's cuBLAS fallback for a gemm fusion is not among the candidates yet.
"""
from __future__ import annotations

import json

import numpy as np

from hlo_opt.autotune import AutotuneError, session_for
from hlo_opt.autotune.tuner import NoUsableCandidate
from hlo_opt.codegen.gemm_fusion import (DEFAULT_TILE, TileConfig, is_triton_gemm_fusion,
                                         set_tile_config)
from hlo_opt.ir.shape import Shape

from ._computations import nonfusion_computations
from ._gemm_common import read_config, write_config

DEFAULT_ALGORITHM = -1   # se::blas::kDefaultAlgorithm


def _targets(module, session, kind: str) -> list:
    return [inst for comp in nonfusion_computations(module) for inst in comp.instructions
            if inst.opcode == "custom-call" and session.kind_of(inst) == kind]


class _AlgorithmPicker:
    name = ""
    kind = ""

    def run(self, module) -> bool:
        session = session_for(module)
        if module.config.debug_options.xla_gpu_autotune_level == 0 or session is None \
                or not session.config.enabled:
            return False
        insts = [i for i in _targets(module, session, self.kind) if not self.skip(i)]
        if not insts:
            return False
        session.begin(insts)
        changed = False
        for inst in insts:
            try:
                result = session.autotune(inst)
            except NoUsableCandidate as e:
                self.on_all_failed(module, session, inst, e)
                continue
            changed |= self.apply(inst, result)
        return changed

    def skip(self, inst) -> bool:
        return False

    def on_all_failed(self, module, session, inst, error) -> None:
        """Every candidate failed: warn (the call keeps its default) or raise."""
        raise NotImplementedError

    def apply(self, inst, result) -> bool:
        raise NotImplementedError


TRITON_PREFIX = "triton:"


def _tune_gemm_fusions(module, session) -> bool:
    """Gemm fusions (``__triton_gemm``) get a tile configuration, as XLA's
    GemmFusionAutotuner: without measuring (level 0, no session, a provider without
    candidates for them) XLA's default config where none is set; otherwise the fastest
    of the provider's tile candidates that passes the checks."""
    fusions = [i for comp in nonfusion_computations(module) for i in comp.instructions
               if is_triton_gemm_fusion(i)]
    if not fusions:
        return False
    level = module.config.debug_options.xla_gpu_autotune_level
    measured = []
    if session is not None and session.config.enabled and level > 0:
        measured = [f for f in fusions if session.kind_of(f) == "fusion"]
    changed = False
    for f in fusions:
        if f not in measured and "triton_gemm_config" not in f.attrs.get("backend_config", ""):
            changed |= set_tile_config(f, DEFAULT_TILE)
    if measured:
        session.begin(measured)
    for f in measured:
        try:
            result = session.autotune(f)
        except NoUsableCandidate as e:
            session.warn(f"No tile configuration of %{f.name} passed: {e}")
            changed |= set_tile_config(f, DEFAULT_TILE)
            continue
        tile = _tile_of(result.key.get("name", "") if result.key is not None else "")
        if tile is not None:
            changed |= set_tile_config(f, tile)
    return changed


def _tile_of(name: str) -> TileConfig | None:
    """The tile configuration a candidate named ``triton:block_m=...`` stands for."""
    if not name.startswith(TRITON_PREFIX):
        return None
    fields = dict(item.split("=") for item in name[len(TRITON_PREFIX):].split(",") if item)
    return TileConfig(**{k: int(v) for k, v in fields.items()})


class GemmAlgorithmPicker(_AlgorithmPicker):
    name = "gemm-algorithm-picker"
    kind = "gemm"

    def run(self, module) -> bool:
        changed = _tune_gemm_fusions(module, session_for(module))
        return super().run(module) or changed

    def skip(self, inst) -> bool:
        cfg = read_config(inst).get("gemm_backend_config", {})
        return (float(cfg.get("alpha_real", 1.0)) == 0 and float(cfg.get("alpha_imag", 0.0)) == 0
                and float(cfg.get("beta", 0.0)) == 0)   # degenerate: a memzero

    def on_all_failed(self, module, session, inst, error) -> None:
        session.warn(f"Failed to find best cuBLAS algorithm for %{inst.name}, GEMM "
                     f"performance might be suboptimal: {error}")

    def apply(self, inst, result) -> bool:
        from hlo_opt.backends.cuda.gemm_emitter import CONFIG_FIELD
        algorithm = DEFAULT_ALGORITHM
        tile = None
        if result is not None and result.key is not None and result.key.kind == "gemm":
            algorithm = int(result.key.get("algorithm"))
        elif result is not None and result.key is not None and result.key.kind == "other":
            tile = _tile_of(result.key.get("name", ""))
        config = read_config(inst)
        gemm = config.setdefault("gemm_backend_config", {})
        want = tile.to_json() if tile is not None else None
        if gemm.get("selected_algorithm") is not None and \
                int(gemm["selected_algorithm"]) == algorithm and config.get(CONFIG_FIELD) == want:
            return False
        gemm["selected_algorithm"] = str(algorithm)   # int64 in proto JSON: a string
        if want is None:
            config.pop(CONFIG_FIELD, None)
        else:
            config[CONFIG_FIELD] = want
        write_config(inst, config)
        return True


class GpuConvAlgorithmPicker(_AlgorithmPicker):
    name = "gpu-conv-algorithm-picker"
    kind = "conv"

    def on_all_failed(self, module, session, inst, error) -> None:
        strict = module.config.debug_options.xla_gpu_strict_conv_algorithm_picker
        msg = f"Failed to determine best cudnn convolution algorithm for %{inst.name}. " \
              f"Original error: {error}"
        if strict:
            raise AutotuneError(
                f"{msg}. To ignore this failure and try to use a fallback algorithm (which "
                "may have suboptimal performance), use "
                "XLA_FLAGS=--xla_gpu_strict_conv_algorithm_picker=false.")
        session.warn(msg + ". As a result, convolution performance may be suboptimal.")

    def apply(self, inst, result) -> bool:
        if result is None or result.key is None or result.key.kind != "algorithm":
            return False
        config = read_config(inst)
        conv = config.setdefault("cudnn_conv_backend_config", {})
        algo = {"algo_id": str(result.key.get("algo_id", 0)),
                "math_type": result.key.get("math_type", "DEFAULT_MATH"),
                "tuning_knobs": {str(k): str(v) for k, v in result.key.get("tuning_knobs", ())},
                "is_cudnn_frontend": bool(result.key.get("is_cudnn_frontend",
                                                                               False)),
                "workspace_size": str(result.scratch_bytes)}
        if conv.get("algorithm") == algo and self._scratch(inst) == result.scratch_bytes:
            return False
        conv["algorithm"] = algo
        text = json.dumps(config, separators=(",", ":"))
        if self._scratch(inst) == result.scratch_bytes:
            write_config(inst, config)
            return True
        self._rebuild(inst, text, result.scratch_bytes)
        return True

    @staticmethod
    def _scratch(inst) -> int:
        return inst.shape.tuple_shapes[-1].dims[0] if inst.shape.is_tuple() else 0

    @staticmethod
    def _rebuild(inst, config_text: str, scratch: int) -> None:
        """XLA: a new call whose last tuple element is ``u8[scratch]``, repackaged so
        that users still see ``(results..., u8[0])``."""
        from hlo_opt.rewrite.builder import Builder
        from ._conv_util import replace_call
        comp = inst.parent
        shapes = list(inst.shape.tuple_shapes)
        attrs = dict(inst.attrs)
        attrs["backend_config"] = config_text
        new = comp.add("custom-call", Shape.tuple(shapes[:-1] + [Shape.array("u8", (scratch,))]),
                       list(inst.operands), attrs=attrs)
        b = Builder(comp)
        parts = [b.gte(new, i) for i in range(len(shapes) - 1)]
        parts.append(b.constant_array(np.zeros((0,), np.uint8), "u8"))
        repack = b.tuple(parts)
        name = inst.name
        replace_call(comp, inst, repack)
        new.name = name
