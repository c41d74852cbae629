"""XLA DebugOptions and the parsing of ``--xla_*`` flags and ``XLA_FLAGS`` (XLA's rules).

Precedence: command line > ``XLA_FLAGS`` > ``--debug_options_file`` > defaults.  Scalar
flags given again replace the earlier value; list flags (``xla_disable_hlo_passes``,
``xla_enable_hlo_passes_only``) append, as XLA's ``add_*`` setters do, also across sources.
Field names and defaults are XLA's (``xla/debug_options_flags.cc``).
"""
import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hlo_opt.errors import FlagError

__all__ = [
    "DebugOptions", "PassFilterEntry", "known_flag_names", "parse_flag_tokens",
    "parse_xla_flags_env", "split_xla_flags", "parse_pass_filter", "matches_any",
    "parse_debug_options_text",
]


@dataclass
class DebugOptions:
    """XLA's DebugOptions, restricted to the flags hlo-opt knows."""

    # -- dumping --
    xla_dump_to: str = ""
    xla_dump_hlo_as_text: bool = False
    xla_dump_hlo_as_long_text: bool = True
    xla_dump_hlo_as_proto: bool = False
    xla_dump_hlo_as_dot: bool = False
    xla_dump_hlo_as_html: bool = False
    xla_dump_hlo_as_url: bool = False
    xla_dump_compress_protos: bool = False
    xla_dump_fusion_visualization: bool = False
    xla_dump_hlo_snapshots: bool = False
    xla_dump_hlo_module_re: str = ""
    xla_dump_hlo_pass_re: str = ""
    xla_dump_hlo_pipeline_re: str = ""
    xla_dump_emitter_re: str = ""
    xla_dump_include_timestamp: bool = False
    xla_dump_max_hlo_modules: int = -1
    xla_dump_module_metadata: bool = False
    xla_dump_large_constants: bool = False
    xla_dump_disable_metadata: bool = False
    xla_dump_enable_mlir_pretty_form: bool = True
    xla_dump_full_hlo_config: bool = True
    xla_dump_latency_hiding_schedule: bool = False
    xla_enable_dumping: bool = True
    xla_detailed_logging: bool = True
    xla_hlo_graph_addresses: bool = False
    xla_hlo_graph_sharding_color: bool = False
    xla_syntax_sugar_async_ops: bool = False
    xla_debug_buffer_assignment_show_max: int = 15
    # -- pass control --
    xla_disable_hlo_passes: list[str] = field(default_factory=list)
    xla_enable_hlo_passes_only: list[str] = field(default_factory=list)
    xla_disable_all_hlo_passes: bool = False
    xla_hlo_pass_fix_detect_cycles: bool = False
    xla_unsupported_crash_on_hlo_pass_fix_max_iterations: bool = False
    xla_unsupported_crash_on_hlo_pass_silent_hlo_change: bool = False
    xla_unsupported_crash_on_hlo_pass_noop_change: bool = False
    xla_fuel: dict[str, int] = field(default_factory=dict)  # a flag only, not a proto field
    # -- backend-agnostic --
    xla_backend_optimization_level: int = 3
    xla_backend_extra_options: dict[str, str] = field(default_factory=dict)
    xla_allow_excess_precision: bool = True
    xla_enable_fast_math: bool = False
    xla_eliminate_hlo_implicit_broadcast: bool = True
    xla_force_host_platform_device_count: int = 1
    xla_ignore_channel_id: bool = False
    xla_llvm_disable_expensive_passes: bool = False
    xla_hlo_profile: bool = False
    xla_embed_ir_in_executable: bool = False
    # -- CPU --
    xla_cpu_use_thunk_runtime: bool = True
    xla_cpu_use_fusion_emitters: bool = True
    xla_cpu_use_new_xtile_lowering: bool = False
    xla_cpu_multi_thread_eigen: bool = True
    xla_cpu_enable_fast_math: bool = False
    xla_cpu_fast_math_honor_nans: bool = True
    xla_cpu_fast_math_honor_infs: bool = True
    xla_cpu_fast_math_honor_division: bool = True
    xla_cpu_fast_math_honor_functions: bool = True
    xla_cpu_enable_fast_min_max: bool = True
    xla_cpu_parallel_codegen_split_count: int = 32
    xla_cpu_prefer_vector_width: int = 256
    xla_cpu_max_isa: str = ""  # XLA uses "NEON" on AArch64 hosts
    # -- GPU --
    xla_gpu_autotune_level: int = 4
    xla_gpu_autotune_max_solutions: int = 0
    xla_gpu_autotune_gemm_rtol: float = 0.1
    xla_gpu_dump_autotune_results_to: str = ""
    xla_gpu_load_autotune_results_from: str = ""
    xla_gpu_dump_autotune_logs_to: str = ""
    xla_gpu_dump_autotuned_gemm_fusions: bool = False
    xla_gpu_per_fusion_autotune_cache_dir: str = ""
    xla_gpu_strict_conv_algorithm_picker: bool = True
    xla_gpu_crash_on_verification_failures: bool = False
    xla_gpu_experimental_autotune_cache_mode: str = "AUTOTUNE_CACHE_MODE_UPDATE"  # an enum
    xla_gpu_require_complete_aot_autotune_results: bool = False
    xla_gpu_algorithm_denylist_path: str = ""
    xla_gpu_target_config_filename: str = ""
    xla_gpu_cuda_data_dir: str = "./cuda_sdk_lib"
    xla_gpu_dump_llvmir: bool = False
    xla_gpu_ftz: bool = False
    xla_gpu_enable_fast_min_max: bool = False
    xla_gpu_deterministic_ops: bool = False
    xla_gpu_enable_triton_gemm: bool = True
    xla_gpu_triton_gemm_any: bool = False
    xla_gpu_enable_cublaslt: bool = True
    xla_gpu_cublas_fallback: bool = True
    xla_gpu_enable_split_k_autotuning: bool = True
    xla_gpu_exhaustive_tiling_search: bool = False
    xla_gpu_gemm_rewrite_size_threshold: int = 100
    xla_gpu_dot_merger_threshold_mb: int = 32
    xla_gpu_all_reduce_combine_threshold_bytes: int = 30 * 1024 * 1024 + 7
    xla_gpu_all_gather_combine_threshold_bytes: int = 30 * 1024 * 1024 + 7
    xla_gpu_reduce_scatter_combine_threshold_bytes: int = 30 * 1024 * 1024 + 7
    xla_gpu_enable_all_gather_combine_by_dim: bool = False
    xla_gpu_enable_reduce_scatter_combine_by_dim: bool = False
    xla_gpu_enable_priority_fusion: bool = True
    xla_gpu_enable_reduction_epilogue_fusion: bool = True
    xla_gpu_enable_latency_hiding_scheduler: bool = False
    xla_gpu_enable_while_loop_double_buffering: bool = False
    xla_gpu_experimental_collective_cse_distance_threshold: int = 0
    xla_gpu_experimental_enable_tiling_propagation: bool = False
    xla_gpu_llvm_verification_level: int = 0
    xla_gpu_enable_llvm_module_compilation_parallelism: bool = False
    xla_gpu_force_compilation_parallelism: int = 0
    xla_gpu_memory_limit_slop_factor: int = 95
    xla_gpu_redzone_scratch_max_megabytes: int = 4096
    xla_gpu_redzone_padding_bytes: int = 8 * 1024 * 1024

    @classmethod
    def from_sources(cls, cli_flags: "list[str] | Mapping | None" = None,
                     env: "Mapping[str, str] | None" = os.environ, *,
                     debug_options_file: "str | None" = None) -> "DebugOptions":
        """Defaults, then the debug-options file, then ``XLA_FLAGS``, then ``cli_flags``."""
        merged: dict = {}
        if debug_options_file:
            text = _read_file(debug_options_file, "--debug_options_file")
            _merge(merged, parse_debug_options_text(text, debug_options_file))
        if env is not None and (env.get("XLA_FLAGS") or "").strip():
            _merge(merged, parse_xla_flags_env(env["XLA_FLAGS"]))
        if isinstance(cli_flags, Mapping):
            for key, value in cli_flags.items():
                name = str(key).removeprefix("--")
                _merge(merged, {name: _coerce_value(name, value, "the command line")})
        elif cli_flags:
            _merge(merged, parse_flag_tokens(list(cli_flags), "the command line"))
        opts = cls(**merged)
        opts.validate()
        return opts

    def validate(self) -> None:
        """Checks that hold across flags (XLA CHECKs the pass-list exclusion)."""
        if self.xla_disable_hlo_passes and self.xla_enable_hlo_passes_only:
            raise FlagError(
                "--xla_disable_hlo_passes and --xla_enable_hlo_passes_only are mutually "
                f"exclusive (got --xla_disable_hlo_passes={','.join(self.xla_disable_hlo_passes)}"
                f" and --xla_enable_hlo_passes_only={','.join(self.xla_enable_hlo_passes_only)})")
        for name in _PASS_FILTER_FLAGS:
            parse_pass_filter(getattr(self, name), flag=name)
        for name, allowed in _ENUMS.items():
            if getattr(self, name) not in allowed:
                raise FlagError(f"Invalid value for --{name}: {getattr(self, name)!r} "
                                f"(expected one of {', '.join(allowed)})")
        for name, (lo, hi) in _RANGES.items():
            v = getattr(self, name)
            if not lo <= v <= hi:
                raise FlagError(f"Invalid value for --{name}: {v} (expected {lo} to {hi})")

    def non_default(self) -> dict:
        """Fields whose value differs from XLA's default, in declaration order."""
        default = DebugOptions()
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v != getattr(default, f.name):
                out[f.name] = list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v
        return out

    def to_debug_options_text(self) -> str:
        """The ``.debug_options`` dump: non-default fields as textproto lines."""
        lines = []
        for name, v in self.non_default().items():
            if name in _NOT_IN_PROTO:
                continue
            if isinstance(v, list):
                lines += [f"{name}: {_quote(e)}" for e in v]
            elif isinstance(v, dict):
                lines += [f"{name} {{ key: {_quote(k)} value: {_quote(str(x))} }}" for k, x in v.items()]
            else:
                lines.append(f"{name}: {v if name in _ENUMS else _scalar_text(v)}")
        return "".join(line + "\n" for line in lines)


# ---- flag table ---------------------------------------------------------------------

_KIND_OF_TYPE = {bool: "bool", int: "int", float: "float", str: "str", list[str]: "list",
                 dict[str, int]: "fuel", dict[str, str]: "map"}
_KINDS = {f.name: _KIND_OF_TYPE[f.type] for f in dataclasses.fields(DebugOptions)}
_PASS_FILTER_FLAGS = ("xla_disable_hlo_passes", "xla_enable_hlo_passes_only")
_RANGES = {"xla_gpu_autotune_level": (0, 5),
           # int32 fields of DebugOptions that users set by hand
           "xla_dump_max_hlo_modules": (-(2**31), 2**31 - 1)}
_INT64 = (-(2**63), 2**63 - 1)  # every other integer flag is an int64 field
# enum flags: proto enum names (XLA's setter); READ / UPDATE are accepted as short forms
_ENUMS = {"xla_gpu_experimental_autotune_cache_mode": (
    "AUTOTUNE_CACHE_MODE_UNSPECIFIED", "AUTOTUNE_CACHE_MODE_UPDATE", "AUTOTUNE_CACHE_MODE_READ",
    "UPDATE", "READ")}
_NOT_IN_PROTO = {"xla_fuel"}
_WS = " \t\r\n"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_FLOAT_RE = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)",
                       re.IGNORECASE)


def known_flag_names() -> list[str]:
    """Every accepted flag name, without the leading ``--``, sorted."""
    return sorted(_KINDS)


def _check_name(name, source: str) -> str:
    if name not in _KINDS:
        shown = name if isinstance(name, str) and name.startswith("-") else f"--{name}"
        msg = f"Unknown flag in {source}: {shown}."
        close = difflib.get_close_matches(str(name).lstrip("-"), _KINDS, n=1, cutoff=0.6)
        if close:
            msg += f" Did you mean --{close[0]}?"
        raise FlagError(msg)
    return name


def _coerce(name: str, raw: "str | None", source: str):
    """Parses the text after ``--name=`` (None: no ``=``) into the field's type."""
    kind = _KINDS[name]
    if kind == "bool":
        if raw is None or raw == "true":
            return True
        if raw == "false":
            return False
        raise FlagError(f"Invalid value for --{name} in {source}: {raw!r} (a boolean flag "
                        f"takes only --{name}, --{name}=true or --{name}=false)")
    if raw is None:
        raise FlagError(f"Flag --{name} in {source} needs a value: write --{name}=VALUE")
    if kind == "int":
        if not _INT_RE.fullmatch(raw):
            raise FlagError(f"Invalid value for --{name} in {source}: {raw[:40]!r} "
                            "(expected an integer)")
        lo, hi = _RANGES.get(name, _INT64)
        value = int(raw) if len(raw) <= 21 else None
        if value is None or not lo <= value <= hi:
            shown = raw if len(raw) <= 30 else f"{raw[:24]}... ({len(raw)} digits)"
            raise FlagError(f"Invalid value for --{name} in {source}: {shown} "
                            f"(expected {lo} to {hi})")
        return value
    if kind == "float":
        if not _FLOAT_RE.fullmatch(raw):
            raise FlagError(f"Invalid value for --{name} in {source}: {raw!r} (expected a number)")
        return float(raw)
    if kind == "list":
        entries = [e for e in raw.split(",") if e]
        if name in _PASS_FILTER_FLAGS:
            parse_pass_filter(entries, flag=name, source=source)
        return entries
    if kind == "fuel":
        fuel = {}
        for item in raw.split(","):
            pass_name, eq, n = item.partition("=")
            if not eq or not pass_name or not _INT_RE.fullmatch(n) or len(n) > 19:
                raise FlagError(f"Illegal value for --xla_fuel in {source}: saw {raw!r}, but "
                                f"expected token {item!r} to have format PASS=INTEGER")
            fuel[pass_name] = int(n)
        return fuel
    if kind == "map":
        return {k: v for k, _, v in (item.partition("=") for item in raw.split(",") if item)}
    return raw


def _coerce_value(name, value, source: str):
    """Coerces a Python value (from a dict of flags) into the field's type."""
    _check_name(name, source)
    kind = _KINDS[name]
    if value is None or isinstance(value, str):
        return _coerce(name, value, source)
    ok = {"bool": isinstance(value, bool),
          "int": isinstance(value, int) and not isinstance(value, bool),
          "float": isinstance(value, (int, float)) and not isinstance(value, bool),
          "list": isinstance(value, (list, tuple)) and all(isinstance(e, str) for e in value),
          "fuel": isinstance(value, Mapping) and all(type(x) is int for x in value.values()),
          "map": isinstance(value, Mapping)}.get(kind, False)
    if not ok:
        raise FlagError(f"Invalid value for --{name} in {source}: {value!r} (wrong type)")
    if kind == "list":
        if name in _PASS_FILTER_FLAGS:
            parse_pass_filter(value, flag=name, source=source)
        return [e for e in value if e]
    if kind in ("fuel", "map"):
        return {str(k): (v if kind == "fuel" else str(v)) for k, v in value.items()}
    if kind == "int" and name in _RANGES:
        return _coerce(name, str(value), source)
    return float(value) if kind == "float" else value


def _merge(into: dict, updates: dict) -> None:
    for name, value in updates.items():
        if _KINDS[name] == "list":
            into[name] = into.get(name, []) + list(value)
        elif _KINDS[name] == "map":  # XLA inserts into the existing map
            into[name] = {**into.get(name, {}), **value}
        else:
            into[name] = value


def parse_flag_tokens(tokens: "list[str]", source: str) -> dict:
    """Parses ``--name[=value]`` tokens (no quote handling: a shell already did it)."""
    out: dict = {}
    for tok in tokens:
        if not tok.startswith("-"):
            raise FlagError(f"Unexpected {tok!r} in {source}: expected a --name=value flag")
        if not tok.startswith("--"):
            raise FlagError(f"Flags need two dashes: {tok.partition('=')[0]} in {source}; "
                            f"write -{tok.partition('=')[0]}")
        name, eq, raw = tok[2:].partition("=")
        _check_name(name, source)
        _merge(out, {name: _coerce(name, raw if eq else None, source)})
    return out


def split_xla_flags(text: str, source: str = "XLA_FLAGS") -> "list[str]":
    """Tokenizes flags text as ``parse_flags_from_env.cc`` does (quotes stripped)."""
    tokens, i, n = [], 0, len(text)
    while True:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return tokens
        if text[i] != "-":
            rest = re.split(f"[{_WS}]", text[i:], maxsplit=1)[0]
            raise FlagError(f"Unexpected {rest!r} in {source}: every entry must be a "
                            "--name=value flag (XLA stops parsing here)")
        j = i
        while j < n and text[j] in _NAME_CHARS:
            j += 1
        if j + 1 < n and text[j] == "=" and text[j + 1] in "\"'":
            quote, k, value = text[j + 1], j + 2, []
            while k < n and text[k] != quote:
                if quote == '"' and text[k] == "\\" and k + 1 < n:
                    k += 1
                value.append(text[k])
                k += 1
            if k >= n:
                raise FlagError(f"Unterminated {quote} quote in {source}: {text[i:]}")
            tokens.append(text[i:j + 1] + "".join(value))
            i = k + 1
        else:
            k = j
            while k < n and text[k] not in _WS:
                k += 1
            tokens.append(text[i:k])
            i = k


def parse_xla_flags_env(value: str, source: str = "XLA_FLAGS") -> dict:
    """Parses an ``XLA_FLAGS`` value: flags, or (if it does not start with ``-``) a file path."""
    stripped = value.strip(_WS)
    if not stripped:
        return {}
    if stripped[0] != "-":
        content = _read_file(stripped, source)
        source = f"{source} (file {stripped})"
        return parse_flag_tokens(split_xla_flags(content, source), source)
    return parse_flag_tokens(split_xla_flags(value, source), source)


def _read_file(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise FlagError(f"Cannot read the {what} file {path!r}: {reason}") from None


# ---- pass filters (xla/hlo/pass/hlo_pass_filter.cc) -----------------------------------

@dataclass(frozen=True)
class PassFilterEntry:
    """One ``--xla_{disable,enable}_hlo_passes*`` entry: name[:N], pipeline/name[:N] or @ID."""

    pipeline: "str | None" = None
    name: "str | None" = None
    occurrence: "int | None" = None
    pass_id: "int | None" = None

    def matches(self, pipeline_path: "list[str]", pass_name: str,
                global_occurrence: "int | None" = None,
                pipeline_occurrence: "int | None" = None,
                pass_id: "int | None" = None) -> bool:
        """``pipeline_path``: enclosing pipeline names, outermost first (last = parent)."""
        if self.pass_id is not None:
            return pass_id == self.pass_id
        if self.pipeline is None and self.occurrence is None:
            # A bare name also matches every pass inside a pipeline of that name.
            return self.name == pass_name or self.name in pipeline_path
        if self.name != pass_name:
            return False
        if self.pipeline is not None and (not pipeline_path or pipeline_path[-1] != self.pipeline):
            return False
        if self.occurrence is not None:
            seen = pipeline_occurrence if self.pipeline is not None else global_occurrence
            return seen == self.occurrence
        return True

    def __str__(self) -> str:
        if self.pass_id is not None:
            return f"@{self.pass_id}"
        text = f"{self.pipeline}/{self.name}" if self.pipeline is not None else str(self.name)
        return text if self.occurrence is None else f"{text}:{self.occurrence}"


_FILTER_RE = re.compile(r"(?:(?P<pipeline>[^/:,@]+)/)?(?P<name>[^/:,@]+)(?::(?P<occ>[0-9]+))?")


def parse_pass_filter(entries: "Iterable[str] | str", flag: "str | None" = None,
                      source: "str | None" = None) -> "list[PassFilterEntry]":
    """Parses filter entries (a list, or one comma-separated string); empty entries are skipped."""
    if isinstance(entries, str):
        entries = entries.split(",")
    where = "".join([f" in --{flag}" if flag else "", f" ({source})" if source else ""])
    out = []
    for entry in entries:
        if not entry:
            continue
        if any(c.isspace() for c in entry):
            raise FlagError(f"Invalid pass filter entry {entry!r}{where}: whitespace is not "
                            "allowed inside an entry")
        if entry.startswith("@"):
            if not entry[1:].isdigit() or not entry[1:].isascii():
                raise FlagError(f"Invalid pass filter entry {entry!r}{where}: expected an "
                                "integer pass id after '@'")
            out.append(PassFilterEntry(pass_id=int(entry[1:])))
            continue
        m = _FILTER_RE.fullmatch(entry)
        if not m:
            raise FlagError(f"Invalid pass filter entry {entry!r}{where}: expected name, "
                            "name:N, pipeline/name, pipeline/name:N or @ID")
        occ = m.group("occ")
        out.append(PassFilterEntry(m.group("pipeline"), m.group("name"),
                                   int(occ) if occ is not None else None))
    return out


def matches_any(entries: "Iterable[PassFilterEntry]", pipeline_path: "list[str]",
                pass_name: str, global_occurrence: "int | None" = None,
                pipeline_occurrence: "int | None" = None, pass_id: "int | None" = None) -> bool:
    """True if any entry matches this pass invocation (XLA's ``HloPassFilter::Matches``)."""
    return any(e.matches(pipeline_path, pass_name, global_occurrence, pipeline_occurrence,
                         pass_id) for e in entries)


# ---- textproto (the .debug_options file) ---------------------------------------------

_ESCAPES = {"\\": "\\\\", '"': '\\"', "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _quote(s: str) -> str:
    out = []
    for ch in s:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def _scalar_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        text = repr(v)
        return text[:-2] if text.endswith(".0") else text
    if isinstance(v, str):
        return _quote(v)
    return str(v)


_UNESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", '"': b'"', "'": b"'",
              "a": b"\a", "b": b"\b", "f": b"\f", "v": b"\v", "?": b"?"}
_TP_TOKEN = re.compile(r"""\s*(?:(#[^\n]*)|("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')|"""
                       r"""([{}:])|([A-Za-z0-9_.+-]+))""")


def _unquote(tok: str) -> str:
    body, out, i = tok[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
        elif body[i + 1] in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(int(m.group(), 8) & 0xFF)
            i += 1 + len(m.group())
        elif body[i + 1] == "x":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            out.append(int(m.group(), 16) if m else 0)
            i += 2 + (len(m.group()) if m else 0)
        else:
            out += _UNESCAPES.get(body[i + 1], body[i + 1].encode("utf-8"))
            i += 2
    return out.decode("utf-8", errors="replace")


def parse_debug_options_text(text: str, source: str = "debug options file") -> dict:
    """Parses a DebugOptions textproto (``field: value`` and map ``field { key value }``)."""
    toks, pos = [], 0
    while pos < len(text):
        m = _TP_TOKEN.match(text, pos)
        if not m:
            if text[pos:].strip():
                raise FlagError(f"Cannot parse {source} near {text[pos:pos + 20]!r}")
            break
        pos = m.end()
        if not m.group(1):
            toks.append(m.group(2) or m.group(3) or m.group(4))
    out: dict = {}
    i = 0

    def bad(what: str):
        raise FlagError(f"Cannot parse {source}: {what}")

    while i < len(toks):
        name = toks[i]
        _check_name(name, source)
        if name in _NOT_IN_PROTO:
            bad(f"{name} is not a DebugOptions field")
        kind = _KINDS[name]
        i += 1
        if kind in ("map", "fuel"):
            if toks[i:i + 1] == [":"]:
                i += 1
            if toks[i:i + 1] != ["{"]:
                bad(f"expected '{{' after {name}")
            entry = {}
            i += 1
            while i < len(toks) and toks[i] != "}":
                if toks[i] not in ("key", "value") or toks[i + 1:i + 2] != [":"] or i + 2 >= len(toks):
                    bad(f"expected key: or value: in {name}")
                entry[toks[i]] = _unquote(toks[i + 2]) if toks[i + 2][0] in "\"'" else toks[i + 2]
                i += 3
            if i >= len(toks):
                bad(f"missing '}}' after {name}")
            i += 1
            _merge(out, {name: {entry.get("key", ""): entry.get("value", "")}})
            continue
        if toks[i:i + 1] != [":"] or i + 1 >= len(toks):
            bad(f"expected ': value' after {name}")
        tok = toks[i + 1]
        i += 2
        quoted = tok[0] in "\"'"
        if (kind in ("str", "list")) != quoted:
            bad(f"wrong value {tok} for {name}")
        if kind == "bool" and tok in ("1", "0", "True", "False", "t", "f"):
            tok = "true" if tok in ("1", "True", "t") else "false"
        _merge(out, {name: _coerce(name, _unquote(tok) if quoted else tok, source)
                     if kind != "list" else _coerce_value(name, [_unquote(tok)], source)})
    return out
