"""``sanitize-constant-names``: XLA's SanitizeConstantNames (GPU).

Constant names become valid identifiers for the PTX backend: ``.`` and ``-`` turn into
``_``; a name that then collides with another instruction's name gets a ``_N`` suffix.
Non-constant names never change.
"""
from __future__ import annotations

import re


_SUFFIX = re.compile(r"^(.*)_(\d+)$")


class SanitizeConstantNames:
    name = "sanitize-constant-names"

    def run(self, module) -> bool:
        taken = {i.name for comp in module.computations for i in comp.instructions
                 if i.opcode != "constant"}
        changed = False
        for comp in module.computations:
            for inst in comp.instructions:
                if inst.opcode != "constant":
                    continue
                name = re.sub(r"[.\-]", "_", inst.name)
                if not re.match(r"[A-Za-z_]", name):
                    name = "_" + name
                if name in taken:
                    m = _SUFFIX.match(name)
                    stem, n = (m.group(1), int(m.group(2)) + 1) if m else (name, 1)
                    while f"{stem}_{n}" in taken:
                        n += 1
                    name = f"{stem}_{n}"
                taken.add(name)
                if name != inst.name:
                    module.release_name(inst.name)
                    module.reserve_name(name)
                    inst.name = name
                    changed = True
        return changed
