"""Running a module on several replicas / partitions at once.

    outs = execute_replicated(module, [args_dev0, args_dev1, ...], num_replicas=4)
    outs[d]  # the result leaves of device d

Each device (``d = replica_id * num_partitions + partition_id``, XLA's flattened id) runs
the entry computation in its own thread with its own :class:`Evaluator`; ``replica-id``
and ``partition-id`` read the device's ids.  A collective deposits its operands in a
:class:`Rendezvous` under (instruction, how many times this device has executed it,
participating devices), waits until every participant has deposited, then computes its
own result from all of them (``collectives.py``).

Nothing can hang: when no device is running any more but some wait (replicas that took
different branches, a replica that finished while others wait for it) the run stops at
once with a :class:`CollectiveDeadlockError` that says where every device is; a wait
longer than ``timeout`` seconds (a device computing forever) stops it with a
:class:`CollectiveTimeoutError`.  The first real error of any device is the one raised;
devices that stopped because of it are reported as aborted, never as the cause.
"""
from __future__ import annotations

import threading
import time

from ...errors import HloError
from ...ir.replica_groups import module_device_counts
from .evaluator import Evaluator
from .executable import _own, check_arguments
from .values import leaves

DEFAULT_TIMEOUT = 120.0  # seconds one device may wait for its peers


class CollectiveError(HloError):
    """A collective that cannot run: bad groups, mismatched operands, a deadlock."""


class ReplicaGroupError(CollectiveError):
    """replica_groups / source_target_pairs that do not fit the run's devices."""


class CollectiveDeadlockError(CollectiveError):
    """Every device still alive waits in a collective that can never complete."""


class CollectiveTimeoutError(CollectiveError):
    """A device waited longer than the timeout for its peers."""


class CollectiveAbortedError(CollectiveError):
    """Raised in a device because another device failed (never the reported cause)."""


class DeviceContext:
    """What one device's evaluator knows about the run (``evaluator.device``)."""

    __slots__ = ("device_id", "replica_id", "partition_id", "num_replicas",
                 "num_partitions", "rendezvous", "_counts", "origin")

    def __init__(self, device_id: int, num_replicas: int, num_partitions: int,
                 rendezvous: "Rendezvous"):
        self.device_id = device_id
        self.replica_id, self.partition_id = divmod(device_id, num_partitions)
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.rendezvous = rendezvous
        self._counts: dict = {}
        self.origin: BaseException | None = None  # the collective error raised here

    def error(self, error: CollectiveError) -> CollectiveError:
        """Remember ``error`` (the evaluator re-wraps what handlers raise, keeping only
        the message) and return it for raising: ``raise dev.error(ReplicaGroupError(..))``."""
        if self.origin is None:
            self.origin = error
        return error

    def exchange(self, inst, participants: tuple[int, ...], value) -> list:
        """Deposit ``value`` for ``inst`` and return every participant's value, in the
        order of ``participants``."""
        n = self._counts.get(inst, 0)
        self._counts[inst] = n + 1
        return self.rendezvous.exchange(self.device_id, inst, n, participants, value)


class _Slot:
    __slots__ = ("inst", "occurrence", "participants", "values", "done", "taken")

    def __init__(self, inst, occurrence, participants):
        self.inst = inst
        self.occurrence = occurrence
        self.participants = participants
        self.values: dict[int, object] = {}
        self.done = False
        self.taken = 0


_RUNNING, _FINISHED, _FAILED = "running", "finished", "failed"


class Rendezvous:
    """Where the devices of one run meet; see the module docstring."""

    def __init__(self, num_replicas: int, num_partitions: int,
                 timeout: float = DEFAULT_TIMEOUT):
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.timeout = timeout
        self._cond = threading.Condition()
        self._slots: dict[tuple, _Slot] = {}
        self._state: list = [_RUNNING] * (num_replicas * num_partitions)
        self.error: BaseException | None = None  # the first real failure
        self.error_device: int | None = None
        self.aborted: set[int] = set()

    # ---- names ------------------------------------------------------------------------
    def device_name(self, d: int) -> str:
        r, p = divmod(d, self.num_partitions)
        if self.num_partitions == 1:
            return f"replica {r}"
        if self.num_replicas == 1:
            return f"partition {p}"
        return f"device {d} (replica {r}, partition {p})"

    def _where(self) -> str:
        lines = []
        for d, s in enumerate(self._state):
            if isinstance(s, _Slot):
                missing = [m for m in s.participants if m not in s.values]
                lines.append(f"{self.device_name(d)} waits in %{s.inst.name} (execution "
                             f"#{s.occurrence + 1}) for "
                             + ", ".join(self.device_name(m) for m in missing))
            else:
                lines.append(f"{self.device_name(d)} {s}")
        return "\n  " + "\n  ".join(lines)

    # ---- the meeting ------------------------------------------------------------------
    def exchange(self, device: int, inst, occurrence: int, participants, value) -> list:
        key = (inst, occurrence, participants)
        with self._cond:
            self._raise_if_stopped(device)
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot(inst, occurrence, participants)
            slot.values[device] = value
            if len(slot.values) == len(participants):
                slot.done = True
                for d in participants:
                    if self._state[d] is slot:
                        self._state[d] = _RUNNING
                self._cond.notify_all()
            else:
                self._state[device] = slot
                self._check_deadlock()
                deadline = time.monotonic() + self.timeout
                while not slot.done and self.error is None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        self._stop(device, CollectiveTimeoutError(
                            f"{self.device_name(device)} waited more than {self.timeout:g}s "
                            f"in %{inst.name}; where the devices are:{self._where()}"))
                        break
                    self._cond.wait(left)
                if not slot.done:
                    self._raise_if_stopped(device)
            values = [slot.values[d] for d in participants]
            slot.taken += 1
            if slot.taken == len(participants):
                del self._slots[key]
            return values

    def _check_deadlock(self) -> None:
        """Called with the lock held after a device stopped running."""
        if self.error is not None or _RUNNING in self._state:
            return
        waiting = [d for d, s in enumerate(self._state) if isinstance(s, _Slot)]
        if waiting:
            self._stop(waiting[0], CollectiveDeadlockError(
                "collective deadlock: the devices can never meet (they executed "
                f"different collectives, or some finished early):{self._where()}"))

    def _stop(self, device: int, error: BaseException) -> None:
        if self.error is None:
            self.error = error
            self.error_device = device
        self._cond.notify_all()

    def _raise_if_stopped(self, device: int) -> None:
        if self.error is None:
            return
        if device == self.error_device:
            self._state[device] = _FAILED
            raise self.error
        self.aborted.add(device)
        self._state[device] = _FAILED
        raise CollectiveAbortedError(
            f"{self.device_name(device)} stopped: {self.device_name(self.error_device)} "
            "failed")

    # ---- the end of a device ----------------------------------------------------------
    def finish(self, device: int) -> None:
        with self._cond:
            self._state[device] = _FINISHED
            self._check_deadlock()

    def fail(self, device: int, error: BaseException) -> None:
        with self._cond:
            self._state[device] = _FAILED
            if device not in self.aborted:
                self._stop(device, error)
            self._check_deadlock()

    def stop_all(self, error: BaseException) -> None:
        with self._cond:
            self._stop(-1, error)


def device_counts(module, num_replicas: int | None = None,
                  num_partitions: int | None = None) -> tuple[int, int]:
    """(replicas, partitions): the module header's ``replica_count=`` /
    ``num_partitions=`` when present (an argument that disagrees is an error), else the
    arguments, else 1."""
    out = []
    for name, header, arg in zip(("replica_count", "num_partitions"),
                                 module_device_counts(module), (num_replicas, num_partitions)):
        if header is not None and arg is not None and header != arg:
            raise HloError(f"module {module.name} says {name}={header} but the run asks "
                           f"for {arg}")
        value = header if header is not None else (arg if arg is not None else 1)
        if value < 1:
            raise HloError(f"{name} must be at least 1, got {value}")
        out.append(value)
    return out[0], out[1]


class ReplicatedInterpreter:
    """The interpreter over ``num_replicas x num_partitions`` devices (one thread each)."""

    name = "interpreter"

    def __init__(self, module, num_replicas: int | None = None,
                 num_partitions: int | None = None, timeout: float = DEFAULT_TIMEOUT):
        if module.entry is None:
            raise HloError(f"module {module.name} has no entry computation")
        self.module = module
        self.num_replicas, self.num_partitions = device_counts(module, num_replicas,
                                                               num_partitions)
        self.timeout = timeout

    @property
    def num_devices(self) -> int:
        return self.num_replicas * self.num_partitions

    def run(self, args_per_device) -> list[list]:
        """Run the entry on every device; ``args_per_device[d]`` are device ``d``'s
        arguments.  Returns each device's result leaves."""
        n = self.num_devices
        args_per_device = list(args_per_device)
        if len(args_per_device) != n:
            raise HloError(f"{n} device(s) ({self.num_replicas} replica(s) x "
                           f"{self.num_partitions} partition(s)) need {n} argument lists, "
                           f"got {len(args_per_device)}")
        entry = self.module.entry
        rendezvous = Rendezvous(self.num_replicas, self.num_partitions, self.timeout)
        checked = []
        for d, args in enumerate(args_per_device):
            try:
                checked.append(check_arguments(entry, args))
            except HloError as e:
                raise type(e)(f"{rendezvous.device_name(d)}: {e}") from None
        borrowed = {id(a) for args in checked for a in leaves(tuple(args))}
        results: list = [None] * n
        errors: list = [None] * n
        contexts = [DeviceContext(d, self.num_replicas, self.num_partitions, rendezvous)
                    for d in range(n)]

        def device_main(d: int) -> None:
            ev = Evaluator(always_check=True)  # no compiled re-runs: a collective must
            ev.device = contexts[d]            # run exactly once per execution
            try:
                value = ev.call(entry, checked[d])
                results[d] = list(leaves(_own(value, borrowed)))
            except BaseException as e:  # noqa: BLE001 - reported by the caller
                errors[d] = e
                rendezvous.fail(d, e)
            else:
                rendezvous.finish(d)

        threads = [threading.Thread(target=device_main, args=(d,), daemon=True,
                                    name=f"hlo-opt {rendezvous.device_name(d)}")
                   for d in range(n)]
        for t in threads:
            t.start()
        self._join(threads, rendezvous)
        if rendezvous.error is not None or any(e is not None for e in errors):
            raise self._error(rendezvous, errors, threads, contexts)
        return results

    def _join(self, threads, rendezvous: Rendezvous) -> None:
        """Wait for every device; once the run has failed, give the devices still
        computing (they cannot be interrupted) one timeout, then stop waiting."""
        give_up = None
        for t in threads:
            while t.is_alive():
                t.join(0.5)
                if rendezvous.error is not None and give_up is None:
                    give_up = time.monotonic() + rendezvous.timeout
                if give_up is not None and time.monotonic() > give_up:
                    return

    def _error(self, rendezvous: Rendezvous, errors, threads, contexts) -> BaseException:
        # A deadlock / timeout is reported by the device that saw it; otherwise the
        # lowest-numbered device that failed on its own (so the report is reproducible).
        d = rendezvous.error_device
        if not isinstance(rendezvous.error, (CollectiveDeadlockError,
                                             CollectiveTimeoutError)) or d is None or d < 0:
            d = next((i for i, e in enumerate(errors) if e is not None
                      and i not in rendezvous.aborted), d)
        if d is None:
            return rendezvous.error or HloError("replicated run failed")
        shown = errors[d] if errors[d] is not None else rendezvous.error
        if not isinstance(shown, HloError):
            return shown  # an internal bug: raise it as it is
        origin = contexts[d].origin
        if origin is None and rendezvous.error_device == d:
            origin = rendezvous.error
        cls = type(origin) if isinstance(origin, HloError) else type(shown)
        others = [i for i, e in enumerate(errors) if e is not None and i != d]
        tail = ""
        for label, devices in (("failed too", [i for i in others
                                               if i not in rendezvous.aborted]),
                               ("stopped because of it", [i for i in others
                                                          if i in rendezvous.aborted])):
            if devices:
                tail += (f"\n  ({len(devices)} other device(s) {label}: "
                         + ", ".join(rendezvous.device_name(i) for i in devices[:8])
                         + (", ..." if len(devices) > 8 else "") + ")")
        alive = [i for i, t in enumerate(threads) if t.is_alive()]
        if alive:
            tail += ("\n  (still computing, abandoned: "
                     + ", ".join(rendezvous.device_name(i) for i in alive) + ")")
        err = cls(f"{rendezvous.device_name(d)}: {shown}{tail}")
        err.instruction = getattr(shown, "instruction", None)
        err.device = d
        return err


def execute_replicated(module, args_per_device, num_replicas: int | None = None,
                       num_partitions: int | None = None,
                       timeout: float = DEFAULT_TIMEOUT) -> list[list]:
    """Run ``module`` on every device; see :class:`ReplicatedInterpreter`."""
    return ReplicatedInterpreter(module, num_replicas, num_partitions, timeout).run(
        args_per_device)
