"""What a diff compares: the three ``--ignore-*`` switches."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DiffOptions:
    """Switches of ``hlo-opt diff``.

    Matching never depends on instruction names, metadata or layouts: those only decide how a
    matched pair is classified.

    * ``ignore_metadata``: a ``metadata={...}`` difference is not a change.
    * ``ignore_layout``: layouts (``{1,0}``) and ``entry_computation_layout`` are not compared.
    * ``ignore_names``: names play no part at all; without it a pair that differs only by
      name is still *unchanged* (HLO names carry no semantics), but it is reported as
      renamed, and equal names break ties between structurally identical candidates.
    """

    ignore_metadata: bool = False
    ignore_layout: bool = False
    ignore_names: bool = False

    def to_dict(self) -> dict:
        return {"ignore_metadata": self.ignore_metadata, "ignore_layout": self.ignore_layout,
                "ignore_names": self.ignore_names}
