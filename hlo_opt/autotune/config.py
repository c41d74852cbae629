"""What an autotuning run is allowed to do: XLA's ``AutotuneConfig``.

``--xla_gpu_autotune_level`` (default 4) means, as in XLA's ``autotuner_util.h``:

====== ================================================================================
level  behaviour
====== ================================================================================
0      no autotuning: the pickers return at once; the backend's heuristic choice stands
1      measure every candidate, pick the fastest
2      also fill input/output buffers with random data first (``should_init_buffers``)
3      also re-initialize the output buffers before each candidate
       (``should_reinit_output_buffer``)
4      also compare each candidate's result with the reference candidate (the first that
       ran cleanly) and check the redzones around every buffer (``should_check_correctness``)
5      also drop candidates whose result is wrong (``should_skip_wrong_results``): at 4
       they are recorded as ``WRONG_RESULT`` and stay eligible, at 5 they are recorded as
       ``DISQUALIFIED``
====== ================================================================================
"""
from __future__ import annotations

from dataclasses import dataclass

from hlo_opt.errors import HloError

CACHE_MODE_UPDATE = "AUTOTUNE_CACHE_MODE_UPDATE"
CACHE_MODE_READ = "AUTOTUNE_CACHE_MODE_READ"


class AutotuneError(HloError):
    """Autotuning could not proceed for a reason the user controls (flags, files)."""


@dataclass(frozen=True)
class AutotuneConfig:
    level: int = 4
    crash_on_check_failure: bool = False      # xla_gpu_crash_on_verification_failures
    strict_conv_algorithm_picker: bool = True
    deterministic: bool = False               # xla_gpu_deterministic_ops
    require_complete_aot_results: bool = False
    max_solutions: int = 0                    # xla_gpu_autotune_max_solutions (0: all)
    rtol: float = 0.1                         # xla_gpu_autotune_gemm_rtol
    redzone_padding_bytes: int = 8 * 1024 * 1024
    cache_dir: str = ""                       # xla_gpu_per_fusion_autotune_cache_dir
    cache_mode: str = CACHE_MODE_UPDATE       # xla_gpu_experimental_autotune_cache_mode
    dump_results_to: str = ""
    load_results_from: str = ""
    dump_logs_to: str = ""                    # xla_gpu_dump_autotune_logs_to
    deviceless: bool = False

    @classmethod
    def from_options(cls, options, deviceless: bool = False) -> "AutotuneConfig":
        """From a :class:`hlo_opt.flags.DebugOptions` (fields it lacks keep defaults)."""
        get = lambda name, default: getattr(options, name, default)  # noqa: E731
        return cls(
            level=get("xla_gpu_autotune_level", 4),
            crash_on_check_failure=get("xla_gpu_crash_on_verification_failures", False),
            strict_conv_algorithm_picker=get("xla_gpu_strict_conv_algorithm_picker", True),
            deterministic=get("xla_gpu_deterministic_ops", False)
            or get("xla_gpu_exclude_nondeterministic_ops", False),
            require_complete_aot_results=get(
                "xla_gpu_require_complete_aot_autotune_results", False),
            max_solutions=get("xla_gpu_autotune_max_solutions", 0),
            rtol=get("xla_gpu_autotune_gemm_rtol", 0.1),
            redzone_padding_bytes=get("xla_gpu_redzone_padding_bytes", 8 * 1024 * 1024),
            cache_dir=get("xla_gpu_per_fusion_autotune_cache_dir", ""),
            cache_mode=normalize_cache_mode(
                get("xla_gpu_experimental_autotune_cache_mode", CACHE_MODE_UPDATE)),
            dump_results_to=get("xla_gpu_dump_autotune_results_to", ""),
            load_results_from=get("xla_gpu_load_autotune_results_from", ""),
            dump_logs_to=get("xla_gpu_dump_autotune_logs_to", ""),
            deviceless=deviceless)

    # XLA's AutotuneConfig predicates, one per level
    @property
    def enabled(self) -> bool:
        return self.level > 0

    @property
    def should_init_buffers(self) -> bool:
        return self.level >= 2

    @property
    def should_reinit_output_buffer(self) -> bool:
        return self.level >= 3

    @property
    def should_check_correctness(self) -> bool:
        return self.level >= 4

    @property
    def should_skip_wrong_results(self) -> bool:
        return self.level >= 5

    @property
    def redzone_size(self) -> int:
        """Redzone bytes on each side of a buffer: XLA pads only when checking."""
        return self.redzone_padding_bytes if self.should_check_correctness else 0


def normalize_cache_mode(value: str) -> str:
    """``AUTOTUNE_CACHE_MODE_READ``/``_UPDATE`` (XLA's enum names); ``READ``/``UPDATE``
    are accepted as short forms."""
    v = str(value).strip().upper()
    if v in ("READ", CACHE_MODE_READ):
        return CACHE_MODE_READ
    if v in ("UPDATE", CACHE_MODE_UPDATE, "", "AUTOTUNE_CACHE_MODE_UNSPECIFIED"):
        return CACHE_MODE_UPDATE
    raise AutotuneError(
        f"Invalid value for --xla_gpu_experimental_autotune_cache_mode: {value!r} (expected "
        f"{CACHE_MODE_UPDATE} or {CACHE_MODE_READ})")
