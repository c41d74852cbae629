"""A seeded mutation fuzzer over real HLO text: parse -> verify -> pipelines -> print -> parse.

Each case mutates one source module (the corpus and the sample modules) a few times, at
the character, token and meaning level (shapes, layouts, attribute values, opcodes, deep
tuples, huge numbers: what broke the tool before), then runs it through the steps a user
runs.  The outcome of a case is one of

- ``parse``/``verify``/``pipeline``: rejected there with an :class:`HloError` (fine);
- ``ok``: went through both pipelines and the printed result parsed back and verified;
- ``crash``: an exception that is not an ``HloError`` (a bug);
- ``reparse``: a pipeline's output did not parse back or verify (a bug);
- ``timeout``: one case ran past its time limit (a bug or a missing verifier limit).

``run_cases(seed, n)`` is deterministic for a seed: case ``i`` uses ``Random(seed * 1e6 + i)``.
``tests/fuzz/test_pipeline_fuzz.py`` runs a short campaign; ``scripts/fuzz.py`` a long one.
"""
from __future__ import annotations

import dataclasses
import random
import re
import signal
import traceback
from pathlib import Path

from hlo_opt.errors import HloError

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = ("optimization", "gpu")
_TOKEN_RE = re.compile(r'"(?:[^"\\\n]|\\.)*"|[%\w.\-$]+|\S')
_SHAPE_RE = re.compile(r"\b(pred|s8|s16|s32|s64|u8|u32|u64|f16|bf16|f32|f64|c64)\[([^\]]*)\]"
                       r"(\{[^}]*\})?")
_ATTR_RE = re.compile(r"\b(dimensions|iota_dimension|index_vector_dim|slice_sizes|"
                      r"replica_groups|channel_id|feature_group_count|batch_group_count|"
                      r"lhs_contracting_dims|rhs_contracting_dims|lhs_batch_dims|"
                      r"rhs_batch_dims|offset_dims|collapsed_slice_dims|start_index_map|"
                      r"update_window_dims|inserted_window_dims|"
                      r"scatter_dims_to_operand_dims|slice|window|dim_labels|"
                      r"backend_config|custom_call_target|to_apply|direction|"
                      r"padding|tuple_index)=")
_OPCODES = ["add", "multiply", "tuple", "get-tuple-element", "broadcast", "reshape",
            "transpose", "reduce", "iota", "constant", "slice", "concatenate", "dot",
            "convert", "bitcast", "copy", "select", "compare", "pad", "dynamic-slice",
            "all-reduce", "custom-call", "fusion", "while", "call", "sort", "rng",
            "reduce-window", "gather", "scatter", "exponential", "negate", "abs"]
_NASTY_VALUES = ["0", "1", "-1", "2", "7", "64", "65", "143", "256", "2147483648",
                 "9" * 25, "9" * 5000, "{}", "{0}", "{1,0}", "{0,5}", "{143,0}", "{2,1,128}",
                 "[2,4]<=[8]", "[1,3]<=[3]T(0)", "{{0,1},{2}}", "{{0,0}}", '""', '"x"',
                 '"__cublas$gemm"', '"__cudnn$convForward"', '"__cublas$lt$matmul"',
                 "{" * 300, "\x1b[31m", "\x07", "\x00", "f32[]", "f32[1,1]",
                 "%p", "-0.0", "nan", "inf"]
_NASTY_TEXT = ["(", ")", "{", "}", "[", "]", '"', "/*", "//", "%", "=", ",", ":", "\n",
               " ", "ROOT ", "ENTRY ", "// -----\n", "\x1b[2J", "\x07", "\x00", "é"]


def sources(max_chars: int = 20_000, corpus_step: int = 1) -> list[tuple[str, str]]:
    """(name, text) of the sample modules and the corpus (when present), small ones only."""
    from tests.conftest import corpus_files, sample_files
    out = [(p.name, p.read_text()) for p in sample_files()]
    out += [(p.name, p.read_text()) for p in corpus_files()[::corpus_step]]
    return [(n, t) for n, t in out if len(t) <= max_chars]


def _deep_tuple(depth: int) -> str:
    return "(" * depth + "f32[]" + ")" * depth


def mutate(text: str, rng: random.Random) -> str:
    for _ in range(rng.randint(1, 3)):
        n = len(text)
        if n == 0:
            return text
        kind = rng.choice(["shape_dim", "shape_dim", "layout", "attr", "attr", "opcode",
                           "del_tok", "dup_tok", "ins_text", "nest", "truncate_line",
                           "del_line", "dup_line", "number"])
        if kind in ("shape_dim", "layout", "nest"):
            found = list(_SHAPE_RE.finditer(text))
            if not found:
                continue
            m = rng.choice(found)
            if kind == "shape_dim":
                dims = [d for d in m.group(2).split(",") if d]
                choice = rng.choice(["drop", "add", "change", "rank"])
                if choice == "drop" and dims:
                    dims.pop(rng.randrange(len(dims)))
                elif choice == "add":
                    dims.insert(rng.randint(0, len(dims)), rng.choice(["1", "2", "3", "0"]))
                elif choice == "change" and dims:
                    dims[rng.randrange(len(dims))] = rng.choice(
                        ["0", "1", "5", "4096", "1000000", "99999999999", "<=4"])
                else:
                    dims = ["1"] * rng.choice([63, 64, 65, 100])
                new = f"{m.group(1)}[{','.join(dims)}]"
                if m.group(3) and choice == "change":
                    new += m.group(3)
            elif kind == "layout":
                new = f"{m.group(1)}[{m.group(2)}]" + rng.choice(
                    ["{143,0}", "{1,256}", "{0,5}", "{0,0}", "{}", "{2,1,128}", "{0}",
                     "{-1}", "{1,0:T(8,128)}"])
            else:
                new = _deep_tuple(rng.choice([2, 10, 100, 260, 1000]))
            text = text[:m.start()] + new + text[m.end():]
        elif kind == "attr":
            found = list(_ATTR_RE.finditer(text))
            if not found:
                continue
            m = rng.choice(found)
            end = _value_end(text, m.end())
            text = text[:m.end()] + rng.choice(_NASTY_VALUES) + text[end:]
        elif kind == "opcode":
            ops = [m for m in re.finditer(r"\s([a-z][a-z\-]*)\(", text)]
            if not ops:
                continue
            m = rng.choice(ops)
            text = text[:m.start(1)] + rng.choice(_OPCODES) + text[m.end(1):]
        elif kind == "number":
            found = list(re.finditer(r"\b\d+\b", text))
            if not found:
                continue
            m = rng.choice(found)
            text = text[:m.start()] + rng.choice(_NASTY_VALUES[:13]) + text[m.end():]
        elif kind in ("del_line", "dup_line", "truncate_line"):
            lines = text.split("\n")
            k = rng.randrange(len(lines))
            if kind == "del_line":
                del lines[k]
            elif kind == "dup_line":
                lines.insert(k, lines[k])
            else:
                lines[k] = lines[k][:rng.randint(0, len(lines[k]))]
            text = "\n".join(lines)
        else:
            tokens = [m.span() for m in _TOKEN_RE.finditer(text)]
            if not tokens:
                continue
            a, b = rng.choice(tokens)
            if kind == "del_tok":
                text = text[:a] + text[b:]
            elif kind == "dup_tok":
                text = text[:b] + " " + text[a:b] + text[b:]
            else:
                text = text[:a] + rng.choice(_NASTY_TEXT) + text[a:]
    return text


def _value_end(text: str, pos: int) -> int:
    """End of an attribute value starting at ``pos`` (balanced brackets and quotes)."""
    depth = 0
    i = pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = text.find('"', i + 1)
            while j > 0 and text[j - 1] == "\\":
                j = text.find('"', j + 1)
            i = n if j < 0 else j + 1
            continue
        if c in "{([":
            depth += 1
        elif c in "})]":
            if depth == 0:
                return i
            depth -= 1
        elif depth == 0 and c in ",\n":
            return i
        i += 1
    return n


@dataclasses.dataclass
class Outcome:
    kind: str
    source: str
    detail: str = ""
    text: str = ""


class _CaseTimeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _CaseTimeout()


def check(text: str, source: str = "?", time_limit: float = 0.0) -> Outcome:
    """Run one text through the steps; classify what happened (never raises)."""
    from hlo_opt import passes_api
    from hlo_opt.flags import DebugOptions
    from hlo_opt.text.parser import parse_hlo
    from hlo_opt.verifier import verify_module
    step = "parse"
    if time_limit:
        old = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, time_limit)
    try:
        try:
            module = parse_hlo(text, "fuzz.hlo")
            message = str(module.name)
            step = "verify"
            verify_module(module)
            for pipeline in PIPELINES:
                step = f"pipeline {pipeline}"
                m = module.clone()
                passes_api.optimize(m, DebugOptions(), pipeline=pipeline)
                step = f"print after {pipeline}"
                printed = m.to_text()
                step = f"re-parse after {pipeline}"
                try:
                    again = parse_hlo(printed, "printed.hlo")
                    verify_module(again)
                except HloError as e:
                    return Outcome("reparse", source, f"{step}: {_short(str(e))}", text)
            return Outcome("ok", source)
        except HloError as e:
            message = str(e)
            if len(message) > 20_000:
                return Outcome("crash", source, f"{step}: message of {len(message)} chars",
                               text)
            if step.startswith(("print", "re-parse")):
                return Outcome("crash", source, f"{step}: {_short(message)}", text)
            return Outcome("parse" if step == "parse" else
                           "verify" if step == "verify" else "pipeline", source)
        except _CaseTimeout:
            return Outcome("timeout", source, f"{step}: over {time_limit:.0f} s", text)
        except (Exception, RecursionError, MemoryError) as e:  # noqa: BLE001 - the finding
            tb = traceback.extract_tb(e.__traceback__)
            where = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in tb[::-1][:4])
            return Outcome("crash", source,
                           f"{step}: {type(e).__name__}: {_short(str(e))} at {where}", text)
    finally:
        if time_limit:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def _short(s: str, limit: int = 300) -> str:
    s = s.replace("\n", " | ")
    return s if len(s) <= limit else s[:limit] + "..."


def run_cases(seed: int, count: int, srcs=None, time_limit: float = 0.0, on_case=None):
    """Run ``count`` cases from ``seed``; returns the list of :class:`Outcome`."""
    srcs = srcs if srcs is not None else sources()
    outcomes = []
    for i in range(count):
        rng = random.Random(seed * 1_000_000 + i)
        name, text = srcs[rng.randrange(len(srcs))]
        outcome = check(mutate(text, rng), f"case {i} ({name})", time_limit)
        outcomes.append(outcome)
        if on_case is not None:
            on_case(i, outcome)
    return outcomes


BAD = ("crash", "reparse", "timeout")
