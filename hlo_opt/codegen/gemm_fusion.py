"""Gemm fusions (XLA's "Triton gemm": a ``kCustom`` fusion whose backend_config says
``"fusion_backend_config":{"kind":"__triton_gemm"}``, formed by ``triton-gemm-rewriter``)
as the backends see them.

* :func:`is_triton_gemm_fusion` -- the one test of the kind;
* :func:`analyze` -> :class:`GemmFusionSpec`: the dot hero, its batch / M / N / K sizes and
  which operand dimension plays which role, and the epilogue (the fused users between the
  dot and the root, elementwise on the dot's index space); None when a generated kernel
  cannot take the fusion (then it runs as a library/host step);
* :class:`TileConfig` -- the tile parameters of the generated kernel: XLA's
  ``triton_gemm_config`` (``block_m``, ``block_n``, ``block_k``, ``num_warps``; ``split_k``
  and ``num_stages`` are read and must be 1) mapped onto a SIMT tiling of ``threads``
  threads each computing ``thread_m x thread_n`` outputs; :data:`DEFAULT_TILE` is XLA's
  default config (32x32x32, 4 warps), :data:`TILE_CANDIDATES` what the autotuner tries.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

TRITON_GEMM_KIND = "__triton_gemm"


def _backend_config(inst) -> dict:
    raw = inst.attrs.get("backend_config", "")
    if not raw or not raw.lstrip().startswith("{"):
        return {}
    try:
        cfg = json.loads(raw)
    except ValueError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def fusion_backend_config(inst) -> dict:
    """``backend_config.fusion_backend_config`` of a fusion ({} when absent or not a JSON
    object)."""
    fbc = _backend_config(inst).get("fusion_backend_config", {})
    return fbc if isinstance(fbc, dict) else {}


def is_triton_gemm_fusion(inst) -> bool:
    if inst.opcode != "fusion" or inst.attrs.get("kind") != "kCustom":
        return False
    if TRITON_GEMM_KIND not in inst.attrs.get("backend_config", ""):
        return False
    return fusion_backend_config(inst).get("kind") == TRITON_GEMM_KIND


@dataclass(frozen=True)
class TileConfig:
    block_m: int = 32
    block_n: int = 32
    block_k: int = 32
    num_warps: int = 4

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    def thread_tile(self) -> tuple[int, int] | None:
        """(thread_m, thread_n): each thread's share of the block_m x block_n tile, or
        None when the threads do not divide it."""
        per, rem = divmod(self.block_m * self.block_n, self.threads)
        if per < 1 or rem:
            return None
        tm = 1
        while tm * tm < per and self.block_m % (tm * 2) == 0 and per % (tm * 2) == 0:
            tm *= 2
        tn = per // tm
        if self.block_m % tm or self.block_n % tn:
            return None
        return tm, tn

    def to_json(self) -> dict:
        """XLA's TritonGemmConfig JSON (int64 fields as strings)."""
        return {"block_m": str(self.block_m), "block_n": str(self.block_n),
                "block_k": str(self.block_k), "split_k": "1", "num_stages": "1",
                "num_warps": str(self.num_warps), "num_ctas": "1"}


DEFAULT_TILE = TileConfig(32, 32, 32, 4)   # XLA's default gemm tiling (autotune level 0)
TILE_CANDIDATES = (DEFAULT_TILE, TileConfig(16, 16, 32, 2), TileConfig(32, 64, 32, 4),
                   TileConfig(64, 64, 16, 4), TileConfig(64, 32, 32, 2),
                   TileConfig(128, 64, 16, 8))


def tile_config_of(inst) -> TileConfig | None:
    """The ``triton_gemm_config`` in the fusion's backend_config, if any we can run."""
    raw = fusion_backend_config(inst).get("triton_gemm_config")
    if not isinstance(raw, dict):
        return None
    try:
        if int(raw.get("split_k", 1)) != 1:
            return None
        tc = TileConfig(int(raw["block_m"]), int(raw["block_n"]), int(raw["block_k"]),
                        int(raw.get("num_warps", 4)))
    except (KeyError, ValueError, TypeError):
        return None
    return tc if tc.thread_tile() is not None else None


def set_tile_config(inst, tile: TileConfig) -> bool:
    """Write ``tile`` as the fusion's ``triton_gemm_config``; False (nothing written) when
    it is already the fusion's."""
    cfg = _backend_config(inst)
    fbc = cfg.setdefault("fusion_backend_config", {})
    tile_json = tile.to_json()
    if fbc.get("triton_gemm_config") == tile_json:
        return False
    fbc["triton_gemm_config"] = tile_json
    inst.attrs["backend_config"] = json.dumps(cfg, separators=(",", ":"))
    return True


@dataclass
class GemmFusionSpec:
    dot: object
    batch: int
    m: int
    n: int
    k: int
    lhs_roles: dict        # lhs dim -> "b" | "m" | "k"
    rhs_roles: dict        # rhs dim -> "b" | "n" | "k"
    out_roles: list        # role of each dot output dim
    epilogue: list         # fused users after the dot (on its index space), in order


def _roles(shape, batch, contracting, free_role):
    roles = {}
    for d in range(shape.rank):
        if d in batch:
            roles[d] = "b"
        elif d in contracting:
            roles[d] = "k"
        else:
            roles[d] = free_role
    return roles


def analyze(fusion) -> GemmFusionSpec | None:
    comp = fusion.called[0]
    dots = [i for i in comp.instructions if i.opcode == "dot"]
    if len(dots) != 1:
        return None
    dot = dots[0]
    lhs, rhs = dot.operands[0].shape, dot.operands[1].shape
    lb, lc, rb, rc = dot.dot_dimension_numbers.lists()
    if len(lb) > 1 or len(lc) != 1 or len(rc) != 1:
        return None
    lr, rr = _roles(lhs, lb, lc, "m"), _roles(rhs, rb, rc, "n")
    lfree = [d for d, r in lr.items() if r == "m"]
    rfree = [d for d, r in rr.items() if r == "n"]
    if len(lfree) > 1 or len(rfree) > 1:
        return None
    m = lhs.dims[lfree[0]] if lfree else 1
    n = rhs.dims[rfree[0]] if rfree else 1
    out_roles = ["b"] * len(lb) + ["m"] * len(lfree) + ["n"] * len(rfree)
    # the epilogue: a chain of users of one index space (the dot's dims; each value is
    # computed per index, so its layout does not matter: the store goes by the layout of
    # the chain's last value), then bitcasts (the same bytes) up to the root
    chain, x, tail = [], dot, False
    while x is not comp.root:
        if x.user_count != 1:
            return None
        u = x.users[0]
        if u.shape.is_tuple():
            return None
        if _is_bitcast(u):
            tail = True
        elif tail or u.shape.dims != dot.shape.dims:
            return None
        else:
            chain.append(u)
        x = u
    return GemmFusionSpec(dot, lhs.dims[lb[0]] if lb else 1, m, n, lhs.dims[lc[0]], lr, rr,
                          out_roles, chain)


def _is_bitcast(inst) -> bool:
    """A bitcast, or a reshape between row-major shapes: the same bytes in the same order."""
    a, b = inst.operands[0].shape, inst.shape
    if a.element_type != b.element_type or a.num_elements() != b.num_elements():
        return False
    if inst.opcode == "bitcast":
        return True

    def row_major(s):
        m2m = [d for d in s.effective_layout().minor_to_major if s.dims[d] != 1]
        return m2m == sorted(m2m, reverse=True)
    return inst.opcode == "reshape" and row_major(a) and row_major(b)


def grid_of(spec: GemmFusionSpec, tile: TileConfig) -> tuple[int, int, int]:
    return (math.ceil(spec.n / tile.block_n), math.ceil(spec.m / tile.block_m), spec.batch)
