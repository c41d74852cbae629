"""XLA's GPU compiler passes (fusion, library-call rewriters, layout, copies) and the
helpers they share.  Each pass lives in its own module and registers itself under XLA's
``name()``; ``passes/gpu_passes.py`` imports them so the registry finds them."""
