"""XLA's collective passes (all-reduce folding and reassociation, reduce-scatter creation,
all-gather/broadcast reordering, the all-gather / all-reduce / reduce-scatter combiners)
and what they share (``_util.py``, ``_combine.py``).  Each has its line in
``passes/registry.py``."""
