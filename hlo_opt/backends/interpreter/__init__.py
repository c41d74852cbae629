"""The numpy reference interpreter: the oracle every pass and backend is judged against.

    exe = Interpreter(module)          # plans are cached per computation
    leaves = exe.run([x, w])           # list of numpy arrays: the result's leaves in order

    # several replicas / partitions, one thread each (replicas.py):
    per_device = execute_replicated(module, [args_dev0, args_dev1], num_replicas=2)

Handlers live in ``ops_<family>.py`` modules and register themselves in ``registry``;
each is imported below by name (a new family is one new file and one line there), and an
import error is an error, never a silently missing opcode.
"""
from __future__ import annotations

# Every handler family, imported for its registrations (one line per ops_*.py).
from . import (ops_batchnorm, ops_collectives, ops_control, ops_convert,  # noqa: F401
               ops_convolution, ops_custom_call, ops_dot, ops_elementwise, ops_fft,
               ops_gather_scatter, ops_gemm, ops_linalg, ops_movement, ops_reduction,
               ops_rng, ops_solver, ops_sort, ops_window)
from .evaluator import Evaluator, InterpreterError
from .executable import Interpreter, check_arguments, execute
from .registry import FAST, HANDLERS, register, register_fast
from .replicas import (CollectiveAbortedError, CollectiveDeadlockError, CollectiveError,
                       CollectiveTimeoutError, ReplicaGroupError, ReplicatedInterpreter,
                       execute_replicated)
from .values import TOKEN

__all__ = ["CollectiveAbortedError", "CollectiveDeadlockError", "CollectiveError",
           "CollectiveTimeoutError", "Evaluator", "FAST", "HANDLERS", "Interpreter",
           "InterpreterError", "ReplicaGroupError", "ReplicatedInterpreter", "TOKEN",
           "check_arguments", "execute", "execute_replicated", "register", "register_fast"]
