"""``rename_fusions``: XLA's RenameFusions (post-fusion optimization).

Fusions get descriptive names from their kind and heroes: ``<kind>_<heroes>_fusion``
(``loop_add_fusion``, ``input_reduce_fusion``), fused computations ``fused_<heroes>``;
with several roots the hero opcodes are sorted and joined with ``_`` (``-`` becomes
``_``).  Custom fusions keep their names.  Always reports a change, as XLA does.
"""
from __future__ import annotations

from hlo_opt.analysis.gpu.fusible import concatenate_hero, find_non_trivial_hero
from hlo_opt.rewrite.graph import fusible_computations, rename_computation

_KIND = {"kLoop": "loop", "kInput": "input", "kOutput": "output", "kCustom": "custom"}


def _hero(root):
    """XLA's FindNonTrivialHero: a reduction or tiled transpose, else a concatenate."""
    hero = find_non_trivial_hero(root)
    return hero if hero is not root else concatenate_hero(root) or root


def hero_names(fusion) -> str:
    heroes = sorted({_hero(r).opcode for r in fusion.fusion_outputs()})
    return "_".join(heroes).replace("-", "_")


class RenameFusions:
    name = "rename_fusions"

    def run(self, module) -> bool:
        changed = False
        for comp in fusible_computations(module):
            for inst in comp.instructions:
                if inst.opcode != "fusion" or inst.fusion_kind == "kCustom":
                    continue
                heroes = hero_names(inst)
                kind = _KIND.get(inst.fusion_kind, "loop")
                new_name = f"{kind}_{heroes}_fusion"
                if not inst.name.startswith(new_name):
                    module.release_name(inst.name)
                    inst.name = module.unique_name(new_name)
                fused = inst.called[0]
                comp_name = f"fused_{heroes}"
                if not fused.name.startswith(comp_name):
                    rename_computation(module, fused, comp_name)
                changed = True
        return changed
