"""Where ablation rows run: here, in local worker processes, or on a Ray cluster.

An executor has ``map(context, rows)``, an iterator of finished row documents in the
order they finish.  Rows are independent (:func:`hlo_opt.triage.ablate.run_row`); the
context (module text, pipeline factory, options, baseline outputs) goes to each worker
once.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from ..errors import HloError
from .ablate import run_row

__all__ = ["ProcessExecutor", "RayExecutor", "SerialExecutor", "make_executor"]


class SerialExecutor:
    """Rows one after the other, in this process."""

    description = "serial"

    def map(self, context, rows):
        for row in rows:
            yield run_row(context, row)


# ---- local processes ---------------------------------------------------------------------

_CONTEXT = None
_TIMING_LOCK = None


def _init_worker(context, lock) -> None:
    global _CONTEXT, _TIMING_LOCK
    _CONTEXT, _TIMING_LOCK = context, lock


def _worker_row(row) -> dict:
    return run_row(_CONTEXT, row, _TIMING_LOCK)


class ProcessExecutor:
    """``--jobs N``: N worker processes on this machine (started fresh, not forked, so a
    progress bar's thread in the parent cannot leave a lock held in a child).  Rows
    optimize and compile in parallel; their timed runs take turns (one lock), so that
    no two timed runs overlap.  The other work still shares the machine's cores."""

    def __init__(self, jobs: int):
        if jobs < 1:
            raise HloError("--jobs must be at least 1")
        self.jobs = jobs
        self.description = f"{jobs} local processes"

    def map(self, context, rows):
        rows = list(rows)
        if not rows:
            return
        spawn = multiprocessing.get_context("spawn")
        pool = ProcessPoolExecutor(max_workers=min(self.jobs, len(rows)), mp_context=spawn,
                                   initializer=_init_worker, initargs=(context, spawn.Lock()))
        try:
            futures = [pool.submit(_worker_row, row) for row in rows]
            for future in as_completed(futures):
                try:
                    yield future.result()
                except BrokenProcessPool:
                    raise HloError("a worker process died (killed, or crashed in native "
                                   "code); the rows finished so far are kept: --resume "
                                   "runs the others") from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


# ---- Ray -----------------------------------------------------------------------------------

# Set for every Ray instance hlo-opt starts: loopback only (the node address and every
# listening port on 127.0.0.1), no usage reports, no token file.
RAY_LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0",
                 "RAY_AUTH_MODE": "disabled"}
_GPU_BACKENDS = ("cuda",)


def _ray_row(context, row) -> dict:
    return run_row(context, row)


def import_ray():
    try:
        import ray
    except ImportError:
        raise HloError("--ray needs Ray: pip install 'hlo-opt[ray]'") from None
    return ray


class RayExecutor:
    """``--ray ADDRESS``: rows as Ray tasks (one CPU each; one GPU each on GPU backends,
    so a cluster runs one row per GPU; rows sharing a node's CPUs time concurrently).  ``local`` starts a private Ray instance on this
    machine (loopback only, ``jobs`` CPUs) and stops it afterwards; ``auto`` joins the
    cluster Ray finds on this machine; anything else is a cluster address
    (``HOST:PORT`` or ``ray://HOST:PORT``), where hlo-opt must be installed as here."""

    def __init__(self, address: str, jobs: int | None = None):
        self.address = address
        self.jobs = jobs
        self.description = f"Ray ({address})"

    def _start(self, ray) -> bool:
        import logging
        os.environ.update(RAY_LOCAL_ENV)
        common = dict(include_dashboard=False, logging_level=logging.WARNING,
                      log_to_driver=False, ignore_reinit_error=True)
        try:
            if self.address == "local":
                ray.init(num_cpus=self.jobs or os.cpu_count() or 1, **common)
                return True
            ray.init(address=self.address, **common)
            return False
        except ConnectionError as e:
            raise HloError(f"--ray {self.address}: cannot reach a Ray cluster ({e}); "
                           "`--ray local` starts one for this sweep") from None

    def map(self, context, rows):
        rows = list(rows)
        if not rows:
            return
        ray = import_ray()
        already = ray.is_initialized()
        started = False if already else self._start(ray)
        try:
            backend = context.settings.backend
            resources = {"num_gpus": 1} if backend in _GPU_BACKENDS else {"num_cpus": 1}
            task = ray.remote(_ray_row).options(max_retries=0, **resources)
            shared = ray.put(context)
            pending = [task.remote(shared, row) for row in rows]
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                try:
                    yield ray.get(ready[0])
                except ray.exceptions.RayError as e:
                    raise HloError(f"--ray {self.address}: a row failed in Ray: "
                                   f"{str(e).strip().splitlines()[-1]}") from None
        finally:
            if started:
                ray.shutdown()


def make_executor(jobs: int = 1, ray_address: str | None = None):
    if ray_address:
        return RayExecutor(ray_address, jobs if jobs > 1 else None)
    if jobs > 1:
        return ProcessExecutor(jobs)
    return SerialExecutor()
