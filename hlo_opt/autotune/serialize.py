"""AutotuneResult <-> the proto-shaped dicts of :mod:`.proto`; whole results files."""
from __future__ import annotations

from .config import AutotuneError
from .proto import from_binary, from_text, to_binary, to_text
from .results import AutotuneResult, CandidateKey, Failure, FailureKind

VERSION = 3          # XLA's kVersion of AutotuneResults
TEXT_SUFFIXES = (".txt", ".textproto", ".prototxt", ".pbtxt")

_KEY_FIELDS = {"gemm": "gemm", "algorithm": "algorithm", "other": "other"}
_REF_FIELDS = {"gemm": "reference_gemm", "algorithm": "reference_algorithm"}


def _key_to_msg(key: CandidateKey) -> dict:
    d = dict(key.fields)
    if key.kind == "algorithm" and "workspace_size" in d:
        d["workspace_size"] = {"value": int(d["workspace_size"])}
    if key.kind == "algorithm" and "tuning_knobs" in d:
        d["tuning_knobs"] = [{"key": k, "value": v} for k, v in d["tuning_knobs"]]
    return d


def _key_from_msg(kind: str, msg: dict) -> CandidateKey:
    d = dict(msg)
    if kind == "algorithm" and "workspace_size" in d:
        d["workspace_size"] = d["workspace_size"].get("value", 0)
    if kind == "algorithm" and "tuning_knobs" in d:   # a map: (key, value) pairs, sorted
        d["tuning_knobs"] = tuple(sorted((e.get("key", 0), e.get("value", 0))
                                         for e in d["tuning_knobs"]))
    if kind == "gemm":
        d.setdefault("algorithm", 0)
    if kind == "algorithm":
        d.setdefault("algo_id", 0)
    return CandidateKey(kind, tuple(sorted(d.items())))


def _duration(seconds: float) -> dict:
    total_ns = round(seconds * 1e9)
    s, ns = divmod(total_ns, 1_000_000_000)
    return {"seconds": s, "nanos": ns}


def result_to_msg(r: AutotuneResult) -> dict:
    m: dict = {}
    if r.key is not None:
        m[_KEY_FIELDS[r.key.kind]] = _key_to_msg(r.key)
    if r.run_time_s is not None:
        m["run_time"] = _duration(r.run_time_s)
    if r.scratch_bytes:
        m["scratch_bytes"] = r.scratch_bytes
    if r.failure is not None:
        f: dict = {"kind": r.failure.kind.name}
        msg = r.failure.msg
        ref = r.failure.reference
        if ref is not None and ref.kind in _REF_FIELDS:
            f[_REF_FIELDS[ref.kind]] = _key_to_msg(ref)
        elif ref is not None:  # XLA's FailureResult has no slot for BackendConfigKey
            msg = f"{msg} (reference: {ref.get('name')})"
        if msg:
            f["msg"] = msg
        if r.failure.buffer_address:
            f["buffer_address"] = r.failure.buffer_address
        m["failure"] = f
    return m


def result_from_msg(m: dict) -> AutotuneResult:
    key = None
    for kind, fname in _KEY_FIELDS.items():
        if fname in m:
            key = _key_from_msg(kind, m[fname])
    if key is None and "conv" in m:  # legacy ConvKey
        key = CandidateKey.cudnn(m["conv"].get("algorithm", 0))
    run_time = None
    if "run_time" in m:
        d = m["run_time"]
        run_time = d.get("seconds", 0) + d.get("nanos", 0) / 1e9
    failure = None
    if "failure" in m:
        f = m["failure"]
        ref = None
        for kind, fname in _REF_FIELDS.items():
            if fname in f:
                ref = _key_from_msg(kind, f[fname])
        failure = Failure(FailureKind[f.get("kind", "UNKNOWN")], f.get("msg", ""), ref,
                          f.get("buffer_address", 0))
    return AutotuneResult(key, run_time, m.get("scratch_bytes", 0), failure)


def is_text_path(path: str) -> bool:
    return path.endswith(TEXT_SUFFIXES)


def encode_results(entries: list[tuple[str, str, AutotuneResult]], as_text: bool) -> bytes:
    """``AutotuneResults{version: 3, results: [...]}``, entries sorted by (device, hlo)."""
    msg = {"version": VERSION,
           "results": [{"device": d, "hlo": h, "result": result_to_msg(r)}
                       for d, h, r in sorted(entries, key=lambda e: (e[0], e[1]))]}
    return to_text("AutotuneResults", msg).encode() if as_text else \
        to_binary("AutotuneResults", msg)


def decode_results(data: bytes, as_text: bool, filename: str) -> list[tuple[str, str, AutotuneResult]]:
    if as_text:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise AutotuneError(f"{filename}: error: not UTF-8 text ({e.reason} at byte "
                                f"{e.start}); name a binary file without a .txt/.textproto "
                                "suffix") from None
        msg = from_text("AutotuneResults", text, filename)
    else:
        msg = from_binary("AutotuneResults", data, filename)
    version = msg.get("version", 0)
    if version != VERSION:
        raise AutotuneError(f"{filename}: error: Version mismatch in autotune results. "
                            f"Expected {VERSION} but was {version}")
    out = []
    for field in ("dots", "convs", "results"):
        for e in msg.get(field, []):
            out.append((e.get("device", ""), e.get("hlo", ""),
                        result_from_msg(e.get("result", {}))))
    return out


def result_to_text(r: AutotuneResult) -> str:
    return to_text("AutotuneResult", result_to_msg(r))


def result_from_text(text: str, filename: str) -> AutotuneResult:
    return result_from_msg(from_text("AutotuneResult", text, filename))


def encode_logs(records, as_text: bool) -> bytes:
    """XLA's ``AutotuningLogs``: per tuned instruction, every candidate's result (with its
    failure) and the chosen one's name (``selected_backend``) -- ``instr`` (an ``Any``
    holding the instruction proto) is left out."""
    from .proto import to_binary, to_text
    logs = []
    for rec in records:
        log = {"results": [result_to_msg(r) for r in rec.results], "fusion_name": rec.name}
        if rec.best is not None and rec.best.key is not None:
            log["selected_backend"] = str(rec.best.key)
        logs.append(log)
    msg = {"logs": logs}
    return to_text("AutotuningLogs", msg).encode() if as_text else \
        to_binary("AutotuningLogs", msg)
