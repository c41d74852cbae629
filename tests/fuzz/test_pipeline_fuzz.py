"""A short run of the mutation fuzzer (tests/fuzz/harness.py): a few hundred mutated
modules through parse -> verify -> optimization and gpu pipelines -> print -> parse.

The long run is ``scripts/fuzz.py --seed N --cases 10000``; every finding it made is fixed
and kept below as a regression case.
"""
from __future__ import annotations

import pytest

from tests.fuzz.harness import BAD, check, run_cases, sources

SEED = 20261126


def test_short_campaign_finds_nothing():
    srcs = sources(max_chars=8_000)
    if len(srcs) < 20:
        pytest.skip("the corpus is absent: too few sources for a campaign")
    outcomes = run_cases(SEED, 300, srcs, time_limit=30)
    bad = [f"{o.kind}: {o.source}: {o.detail}" for o in outcomes if o.kind in BAD]
    assert bad == [], "\n".join(bad)
    kinds = {o.kind for o in outcomes}
    assert {"ok", "parse", "verify"} <= kinds  # the mutations reach every stage


_ADD = "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b)\n}\n"
REGRESSIONS = {
    "iota without iota_dimension": "ENTRY e {\n ROOT i = f32[4,4]{1,0} iota()\n}\n",
    "layout out of range": "ENTRY e {\n p = f32[64,64]{143,0} parameter(0)\n"
                           " ROOT n = f32[64,64]{1,0} negate(p)\n}\n",
    "layout on a reduce": _ADD + "ENTRY e {\n p = f32[4,8] parameter(0)\n z = f32[] constant(0)\n"
                                 " ROOT r = f32[4]{0,5} reduce(p, z), dimensions={1}, to_apply=add\n}\n",
    "deep tuple": "ENTRY e {\n ROOT p = " + "(" * 250 + "f32[]" + ")" * 250 + " parameter(0)\n}\n",
    "rank 100": "ENTRY e {\n ROOT p = f32[" + ",".join(["1"] * 100) + "] parameter(0)\n}\n",
    "huge element count": "ENTRY e {\n ROOT c = f32[99999999999,99999999999,99999999999] "
                          "constant(0)\n}\n",
    "parameter number of 5000 digits": "ENTRY e {\n ROOT p = f32[] parameter(" + "9" * 5000 + ")\n}\n",
    "replica groups beyond the devices": "HloModule m, replica_count=2\n" + _ADD +
        "ENTRY e {\n p = f32[4] parameter(0)\n ROOT r = f32[4] all-reduce(p), "
        "replica_groups=[3,4]<=[12], to_apply=add\n}\n",
    "bad replica groups": _ADD + "ENTRY e {\n p = f32[4] parameter(0)\n ROOT r = f32[4] "
                                 "all-reduce(p), replica_groups=\"x\", to_apply=add\n}\n",
    "cublas gemm with one operand": "ENTRY e {\n p = f32[4,4] parameter(0)\n ROOT r = "
        "(f32[4,4], s8[0]) custom-call(p), custom_call_target=\"__cublas$gemm\"\n}\n",
    "cudnn conv with one operand": "ENTRY e {\n p = f32[1,4,4,1] parameter(0)\n ROOT r = "
        "(f32[1,4,4,1], u8[0]) custom-call(p), custom_call_target=\"__cudnn$convForward\"\n}\n",
    "gemm config not JSON": "ENTRY e {\n a = f32[4,4] parameter(0)\n b = f32[4,4] parameter(1)\n"
        " ROOT r = (f32[4,4], s8[0]) custom-call(a, b), custom_call_target=\"__cublas$gemm\", "
        "backend_config=\"x\"\n}\n",
    "backend_config nested 100,000 levels": "ENTRY e {\n p = f32[4] parameter(0)\n ROOT r = "
        "f32[4] negate(p), backend_config=" + '{"a":' * 100_000 + "1" + "}" * 100_000 + "\n}\n",
    "tuple(t, t) 40 times": "ENTRY e {\n p = f32[] parameter(0)\n" + "".join(
        f" t{i} = tuple({'p' if i == 0 else f't{i - 1}'}, {'p' if i == 0 else f't{i - 1}'})\n"
        for i in range(40)) + " ROOT r = tuple(t39)\n}\n",
    "to_apply naming nothing": _ADD + "f {\n p0 = f32[16,784]{0,1} parameter(0)\n c0 = f32[] "
        "constant(0)\n ROOT r = f32[16] reduce(p0, c0), dimensions={1}, to_apply={}\n}\n"
        "ENTRY main {\n p0 = f32[16,784]{0,1} parameter(0)\n ROOT f = f32[16] fusion(p0), "
        "kind=kInput, calls=f\n}\n",
    "layout tail with a bracket": "ENTRY e {\n p = s4[400]{0:E([4)} parameter(0)\n"
                                  " ROOT n = s4[400] negate(p)\n}\n",
    "control bytes": "ENTRY e {\n p = f32[4] parameter(0)\x1b[31m\x07\n}\n",
    # the nesting check built the 137-billion-character brace skeleton it compares with
    "one value for 2**37 elements": "ENTRY e {\n ROOT c = s4[2147483648,64]{1,0:E(4)} "
                                    "constant(0)\n}\n",
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions_are_rejected_with_a_located_error(name):
    outcome = check(REGRESSIONS[name], name, time_limit=60)
    assert outcome.kind in ("parse", "verify"), f"{outcome.kind}: {outcome.detail}"


def test_error_messages_are_bounded_and_located():
    from hlo_opt.errors import HloError
    from hlo_opt.text.parser import parse_hlo
    from hlo_opt.verifier import verify_module
    for name in ("backend_config nested 100,000 levels", "control bytes", "deep tuple",
                 "iota without iota_dimension"):
        with pytest.raises(HloError) as info:
            verify_module(parse_hlo(REGRESSIONS[name], "case.hlo"))
        message = str(info.value)
        assert len(message) < 2_000, name
        assert "case.hlo:" in message and "\x1b" not in message and "\x07" not in message


@pytest.mark.parametrize("dims", ["24,2048,2048,3,0", "24,2048,2048,3,0,4096", "0,5,7",
                                  "24,0,2048,3,4096"])
def test_a_constant_of_300_million_empty_rows_prints_at_once(dims):
    """zero-sized-hlo-elimination made it; printing nested one {} per empty row."""
    text = (f"bcast {{\n one = bf16[] constant(1)\n ROOT b = bf16[{dims}] "
            "broadcast(one), dimensions={}\n}\n")
    outcome = check(text, "empty rows", time_limit=60)
    assert outcome.kind == "ok", f"{outcome.kind}: {outcome.detail}"
