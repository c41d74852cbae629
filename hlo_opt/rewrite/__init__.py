"""The rewrite framework passes share: rule tables over instruction patterns
(:mod:`.rules`), shape-correct instruction building (:mod:`.builder`), graph edits
(:mod:`.graph`) and building / growing fusion instructions (:mod:`.fusion`).

Part of the core: it never imports ``passes/``."""
