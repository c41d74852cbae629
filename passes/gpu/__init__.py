"""XLA's GPU compiler passes (fusion, library-call rewriters, layout, copies) and the
helpers private to them.  Each pass lives in its own module, named after XLA's
``name()``, and has its line in ``passes/registry.py``."""
