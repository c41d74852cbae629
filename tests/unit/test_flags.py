"""hlo_opt.flags: DebugOptions, XLA_FLAGS / --xla_* parsing, pass filters, .debug_options."""
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hlo_opt.errors import FlagError, HloError
from hlo_opt.flags import (
    DebugOptions,
    PassFilterEntry,
    known_flag_names,
    matches_any,
    parse_debug_options_text,
    parse_flag_tokens,
    parse_pass_filter,
    parse_xla_flags_env,
    split_xla_flags,
)

ENV = "XLA_FLAGS"


def env_opts(value, cli=None):
    return DebugOptions.from_sources(cli, env={ENV: value})


# ---- defaults and the flag table ----------------------------------------------------

def test_xla_defaults():
    o = DebugOptions()
    assert o.xla_dump_to == ""
    assert o.xla_dump_hlo_as_text is False
    assert o.xla_dump_hlo_as_html is False
    assert o.xla_dump_hlo_as_dot is False
    assert o.xla_dump_hlo_as_proto is False
    assert o.xla_dump_hlo_as_long_text is True
    assert o.xla_dump_hlo_pass_re == o.xla_dump_hlo_module_re == o.xla_dump_hlo_pipeline_re == ""
    assert o.xla_dump_include_timestamp is False
    assert o.xla_dump_max_hlo_modules == -1
    assert o.xla_dump_large_constants is False
    assert o.xla_dump_disable_metadata is False
    assert o.xla_dump_module_metadata is False
    assert o.xla_disable_hlo_passes == [] and o.xla_enable_hlo_passes_only == []
    assert o.xla_disable_all_hlo_passes is False
    assert o.xla_gpu_autotune_level == 4
    assert o.xla_hlo_pass_fix_detect_cycles is False
    assert o.xla_unsupported_crash_on_hlo_pass_fix_max_iterations is False
    assert o.xla_gpu_dump_autotune_results_to == o.xla_gpu_load_autotune_results_from == ""
    assert o.xla_gpu_per_fusion_autotune_cache_dir == o.xla_gpu_target_config_filename == ""
    assert o.xla_gpu_enable_triton_gemm is True
    assert o.xla_gpu_dot_merger_threshold_mb == 32
    assert o.xla_gpu_enable_priority_fusion is True
    assert o.xla_fuel == {}
    assert o.xla_enable_dumping is True
    assert o.xla_cpu_use_new_xtile_lowering is False
    assert o.xla_gpu_experimental_enable_tiling_propagation is False
    assert o.xla_backend_optimization_level == 3


def test_default_lists_are_not_shared():
    a, b = DebugOptions(), DebugOptions()
    a.xla_disable_hlo_passes.append("dce")
    assert b.xla_disable_hlo_passes == []


def test_known_flag_names():
    names = known_flag_names()
    assert names == sorted(names)
    for n in ("xla_dump_to", "xla_fuel", "xla_gpu_autotune_level", "xla_enable_hlo_passes_only",
              "xla_cpu_use_new_xtile_lowering", "xla_gpu_experimental_enable_tiling_propagation"):
        assert n in names
    assert not any(n.startswith("-") for n in names)


def test_flag_error_is_hlo_error():
    with pytest.raises(HloError) as e:
        parse_flag_tokens(["--nope"], "the command line")
    assert isinstance(e.value, FlagError)
    assert str(e.value) == e.value.message


def test_imports_no_heavy_modules():
    code = ("import sys, hlo_opt.flags; bad = {'click', 'rich', 'numpy'} & set(sys.modules);"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- tokenizing XLA_FLAGS --------------------------------------------------------------

def test_split_on_all_whitespace():
    assert split_xla_flags(" --a=1\t--b\n--c=x\r\n") == ["--a=1", "--b", "--c=x"]


def test_split_double_quotes_stripped_with_escapes():
    assert split_xla_flags(r'--f="a b" --g="x\"y\\z"') == ["--f=a b", r'--g=x"y\z']


def test_split_single_quotes_backslash_literal():
    assert split_xla_flags(r"--f='a b\n' --g=1") == [r"--f=a b\n", "--g=1"]


def test_split_unquoted_quote_char_inside_value_kept():
    # a quote that does not directly follow '=' is ordinary text; the rest is not a flag
    with pytest.raises(FlagError, match="Unexpected 'c\"'"):
        split_xla_flags('--f=a"b c"')


def test_split_unterminated_quote():
    with pytest.raises(FlagError, match="Unterminated"):
        split_xla_flags('--f="abc')


def test_split_stops_at_non_flag_token():
    with pytest.raises(FlagError) as e:
        split_xla_flags("--xla_dump_to=/tmp foo --xla_dump_hlo_as_text")
    assert "'foo'" in str(e.value) and "XLA_FLAGS" in str(e.value)


def test_env_quoted_value_with_space():
    o = env_opts('--xla_dump_to="/tmp/my dir" --xla_dump_hlo_pass_re=\'a|b c\'')
    assert o.xla_dump_to == "/tmp/my dir"
    assert o.xla_dump_hlo_pass_re == "a|b c"


def test_env_blank_and_absent():
    assert DebugOptions.from_sources(env={ENV: "  \n"}) == DebugOptions()
    assert DebugOptions.from_sources(env={}) == DebugOptions()
    assert DebugOptions.from_sources(env=None) == DebugOptions()
    assert parse_xla_flags_env("") == {}


# ---- flags-file mode -------------------------------------------------------------------

def test_flags_file(tmp_path):
    p = tmp_path / "flags.txt"
    p.write_text('--xla_dump_to="/tmp/a b"\n--xla_gpu_autotune_level=0\n')
    assert parse_xla_flags_env(str(p)) == {"xla_dump_to": "/tmp/a b", "xla_gpu_autotune_level": 0}
    o = env_opts(f"  {p}  ")
    assert o.xla_dump_to == "/tmp/a b" and o.xla_gpu_autotune_level == 0


def test_flags_file_unreadable_names_it(tmp_path):
    missing = tmp_path / "nope.flags"
    with pytest.raises(FlagError) as e:
        parse_xla_flags_env(str(missing))
    assert str(missing) in str(e.value)


def test_flags_file_errors_name_the_file(tmp_path):
    p = tmp_path / "f"
    p.write_text("--xla_dump_too=/x")
    with pytest.raises(FlagError) as e:
        parse_xla_flags_env(str(p))
    assert str(p) in str(e.value) and "--xla_dump_too" in str(e.value)


# ---- value rules -----------------------------------------------------------------------

@pytest.mark.parametrize("tok,val", [("--xla_dump_hlo_as_text", True),
                                     ("--xla_dump_hlo_as_text=true", True),
                                     ("--xla_dump_hlo_as_text=false", False)])
def test_bool_forms(tok, val):
    assert parse_flag_tokens([tok], "the command line") == {"xla_dump_hlo_as_text": val}


@pytest.mark.parametrize("bad", ["yes", "1", "0", "True", "FALSE", ""])
def test_bad_bool(bad):
    with pytest.raises(FlagError) as e:
        parse_flag_tokens([f"--xla_dump_hlo_as_text={bad}"], "XLA_FLAGS")
    msg = str(e.value)
    assert "--xla_dump_hlo_as_text" in msg and repr(bad) in msg and "XLA_FLAGS" in msg


def test_ints():
    assert parse_flag_tokens(["--xla_dump_max_hlo_modules=-1", "--xla_gpu_dot_merger_threshold_mb=+64"],
                             "x") == {"xla_dump_max_hlo_modules": -1, "xla_gpu_dot_merger_threshold_mb": 64}


@pytest.mark.parametrize("bad", ["abc", "1.5", "", " 3", "0x10", "1_0"])
def test_bad_int(bad):
    with pytest.raises(FlagError, match="expected an integer"):
        parse_flag_tokens([f"--xla_dump_max_hlo_modules={bad}"], "x")


@pytest.mark.parametrize("level", range(6))
def test_autotune_levels_valid(level):
    assert env_opts(f"--xla_gpu_autotune_level={level}").xla_gpu_autotune_level == level


@pytest.mark.parametrize("level", ["6", "-1"])
def test_autotune_level_out_of_range(level):
    with pytest.raises(FlagError, match="0 to 5"):
        env_opts(f"--xla_gpu_autotune_level={level}")


def test_floats():
    assert parse_flag_tokens(["--xla_gpu_autotune_gemm_rtol=1e-3"], "x") == {"xla_gpu_autotune_gemm_rtol": 1e-3}
    assert parse_flag_tokens(["--xla_gpu_autotune_gemm_rtol=.5"], "x") == {"xla_gpu_autotune_gemm_rtol": 0.5}
    with pytest.raises(FlagError, match="expected a number"):
        parse_flag_tokens(["--xla_gpu_autotune_gemm_rtol=fast"], "x")


def test_value_flag_needs_equals():
    with pytest.raises(FlagError, match=r"needs a value: write --xla_dump_to=VALUE"):
        parse_flag_tokens(["--xla_dump_to"], "x")


def test_empty_string_value_allowed():
    assert parse_flag_tokens(["--xla_dump_to="], "x") == {"xla_dump_to": ""}


def test_value_may_contain_equals():
    assert parse_flag_tokens(["--xla_dump_hlo_module_re=a=b"], "x") == {"xla_dump_hlo_module_re": "a=b"}


def test_single_dash_rejected():
    with pytest.raises(FlagError, match="two dashes: -xla_dump_to .*--xla_dump_to"):
        parse_flag_tokens(["-xla_dump_to=/tmp"], "XLA_FLAGS")
    with pytest.raises(FlagError, match="two dashes"):
        env_opts("-xla_dump_hlo_as_text")


def test_non_flag_token_rejected():
    with pytest.raises(FlagError, match="Unexpected 'foo.hlo'"):
        parse_flag_tokens(["foo.hlo"], "the command line")


def test_unknown_flag_suggestion_exact():
    with pytest.raises(FlagError) as e:
        env_opts("--xla_dump_too=/tmp/x")
    assert str(e.value) == "Unknown flag in XLA_FLAGS: --xla_dump_too. Did you mean --xla_dump_to?"


def test_unknown_flag_without_close_match():
    with pytest.raises(FlagError) as e:
        parse_flag_tokens(["--completely_bogus"], "the command line")
    assert str(e.value) == "Unknown flag in the command line: --completely_bogus."


def test_unknown_bool_flag_without_value_still_reported():
    with pytest.raises(FlagError, match=r"--xla_dump_hlo_as_txt\. Did you mean --xla_dump_hlo_as_text\?"):
        parse_flag_tokens(["--xla_dump_hlo_as_txt"], "XLA_FLAGS")


def test_scalar_repeated_last_wins():
    assert parse_flag_tokens(["--xla_dump_to=a", "--xla_dump_to=b"], "x") == {"xla_dump_to": "b"}


def test_lists_comma_separated_and_appending():
    got = parse_flag_tokens(["--xla_disable_hlo_passes=dce,algsimp", "--xla_disable_hlo_passes=cse"], "x")
    assert got == {"xla_disable_hlo_passes": ["dce", "algsimp", "cse"]}
    assert parse_flag_tokens(["--xla_disable_hlo_passes="], "x") == {"xla_disable_hlo_passes": []}


def test_fuel_map():
    assert parse_flag_tokens(["--xla_fuel=algsimp=3,dce=0"], "x") == {"xla_fuel": {"algsimp": 3, "dce": 0}}
    for bad in ("algsimp", "algsimp=x", "=3", "a=1=2"):
        with pytest.raises(FlagError, match="--xla_fuel"):
            parse_flag_tokens([f"--xla_fuel={bad}"], "x")


def test_backend_extra_options_map():
    got = parse_flag_tokens(["--xla_backend_extra_options=a=1,flag"], "x")
    assert got == {"xla_backend_extra_options": {"a": "1", "flag": ""}}


# ---- precedence ------------------------------------------------------------------------

def test_precedence_cli_over_env_over_default():
    o = env_opts("--xla_dump_to=/env --xla_gpu_autotune_level=2 --xla_dump_hlo_as_text",
                 cli=["--xla_dump_to=/cli"])
    assert o.xla_dump_to == "/cli"
    assert o.xla_gpu_autotune_level == 2
    assert o.xla_dump_hlo_as_text is True
    assert o.xla_dump_max_hlo_modules == -1


def test_precedence_cli_can_turn_bool_back_off():
    o = env_opts("--xla_dump_hlo_as_text", cli=["--xla_dump_hlo_as_text=false"])
    assert o.xla_dump_hlo_as_text is False


def test_precedence_with_flags_file(tmp_path):
    p = tmp_path / "flags"
    p.write_text("--xla_dump_to=/file --xla_dump_hlo_as_dot")
    o = env_opts(str(p), cli=["--xla_dump_to=/cli"])
    assert (o.xla_dump_to, o.xla_dump_hlo_as_dot) == ("/cli", True)


def test_precedence_debug_options_file_lowest(tmp_path):
    p = tmp_path / "m.debug_options"
    p.write_text('xla_dump_to: "/file"\nxla_dump_max_hlo_modules: 7\nxla_gpu_autotune_level: 1\n')
    o = DebugOptions.from_sources(["--xla_gpu_autotune_level=3"],
                                  env={ENV: "--xla_dump_to=/env"}, debug_options_file=str(p))
    assert (o.xla_dump_to, o.xla_dump_max_hlo_modules, o.xla_gpu_autotune_level) == ("/env", 7, 3)


def test_lists_accumulate_across_sources():
    o = env_opts("--xla_disable_hlo_passes=dce", cli=["--xla_disable_hlo_passes=algsimp"])
    assert o.xla_disable_hlo_passes == ["dce", "algsimp"]


def test_env_defaults_to_os_environ(monkeypatch):
    monkeypatch.setenv(ENV, "--xla_dump_to=/from_environ")
    assert DebugOptions.from_sources().xla_dump_to == "/from_environ"
    monkeypatch.delenv(ENV)
    assert DebugOptions.from_sources().xla_dump_to == ""


def test_cli_dict_form():
    o = DebugOptions.from_sources({"xla_dump_to": "/d", "--xla_gpu_autotune_level": 0,
                                   "xla_dump_hlo_as_text": "true", "xla_dump_hlo_as_dot": None,
                                   "xla_disable_hlo_passes": ["dce"], "xla_fuel": {"dce": 2},
                                   "xla_gpu_autotune_gemm_rtol": 1}, env={})
    assert (o.xla_dump_to, o.xla_gpu_autotune_level, o.xla_dump_hlo_as_text) == ("/d", 0, True)
    assert o.xla_dump_hlo_as_dot is True
    assert o.xla_disable_hlo_passes == ["dce"] and o.xla_fuel == {"dce": 2}
    assert o.xla_gpu_autotune_gemm_rtol == 1.0 and isinstance(o.xla_gpu_autotune_gemm_rtol, float)


@pytest.mark.parametrize("flags,match", [
    ({"xla_dump_too": "/x"}, "Did you mean --xla_dump_to"),
    ({"xla_dump_hlo_as_text": 1}, "wrong type"),
    ({"xla_gpu_autotune_level": True}, "wrong type"),
    ({"xla_gpu_autotune_level": 9}, "0 to 5"),
    ({"xla_disable_hlo_passes": ["a b"]}, "'a b'"),
])
def test_cli_dict_errors(flags, match):
    with pytest.raises(FlagError, match=match):
        DebugOptions.from_sources(flags, env={})


# ---- mutual exclusion ------------------------------------------------------------------

def test_disable_and_enable_only_exclusive_same_source():
    with pytest.raises(FlagError, match="mutually exclusive"):
        env_opts("--xla_disable_hlo_passes=dce --xla_enable_hlo_passes_only=algsimp")


def test_disable_and_enable_only_exclusive_across_sources():
    with pytest.raises(FlagError) as e:
        env_opts("--xla_disable_hlo_passes=dce", cli=["--xla_enable_hlo_passes_only=algsimp"])
    assert "--xla_disable_hlo_passes=dce" in str(e.value)
    assert "--xla_enable_hlo_passes_only=algsimp" in str(e.value)


def test_empty_list_does_not_conflict():
    o = env_opts("--xla_disable_hlo_passes= --xla_enable_hlo_passes_only=dce")
    assert o.xla_enable_hlo_passes_only == ["dce"]


# ---- pass filter grammar and matching ---------------------------------------------------

def test_filter_grammar_valid():
    assert parse_pass_filter(["algsimp", "algsimp:0", "simplification/algsimp:2", "@42",
                              "simplification/algsimp", "float-normalization-bf16"]) == [
        PassFilterEntry(None, "algsimp", None, None),
        PassFilterEntry(None, "algsimp", 0, None),
        PassFilterEntry("simplification", "algsimp", 2, None),
        PassFilterEntry(None, None, None, 42),
        PassFilterEntry("simplification", "algsimp", None, None),
        PassFilterEntry(None, "float-normalization-bf16", None, None),
    ]


def test_filter_string_form_and_empty_entries():
    assert parse_pass_filter("dce,,@1") == [PassFilterEntry(name="dce"), PassFilterEntry(pass_id=1)]
    assert parse_pass_filter("") == []


@pytest.mark.parametrize("bad", ["algsimp:", "algsimp:abc", "algsimp:1:2", "@", "@abc", "@-1",
                                 "a/b/c", "/algsimp", "pipe/", ":3", "algsimp:-1"])
def test_filter_grammar_invalid(bad):
    with pytest.raises(FlagError) as e:
        parse_pass_filter([bad])
    assert repr(bad) in str(e.value)


@pytest.mark.parametrize("bad", ["alg simp", " dce", "dce\t", "pipe/ dce"])
def test_filter_whitespace_names_entry(bad):
    with pytest.raises(FlagError) as e:
        parse_pass_filter([bad])
    assert repr(bad) in str(e.value) and "whitespace" in str(e.value)


def test_filter_error_via_flags_names_flag_and_entry():
    with pytest.raises(FlagError) as e:
        env_opts('--xla_enable_hlo_passes_only="dce,alg simp"')
    msg = str(e.value)
    assert "'alg simp'" in msg and "--xla_enable_hlo_passes_only" in msg and "XLA_FLAGS" in msg
    with pytest.raises(FlagError, match="'dce:x'"):
        parse_flag_tokens(["--xla_disable_hlo_passes=dce:x"], "the command line")


def test_filter_str_roundtrip():
    for text in ("algsimp", "algsimp:2", "simplification/algsimp", "simplification/algsimp:1", "@7"):
        assert str(parse_pass_filter([text])[0]) == text


def F(text):
    return parse_pass_filter([text])[0]


def test_matches_plain_name():  # mirrors XLA's hlo_pass_filter_test.cc
    f = F("algsimp")
    assert f.matches(["simplification"], "algsimp", 3, 1, 5)
    assert not f.matches(["simplification"], "dce", 3, 1, 5)
    assert f.matches(["algsimp"], "dce", 3, 1, 5)  # pass inside a pipeline of that name


def test_matches_plain_name_any_enclosing_pipeline():
    assert F("fusion").matches(["opt", "fusion", "inner"], "dce", 0, 0, 1)
    assert not F("fusion").matches(["opt", "inner"], "dce", 0, 0, 1)
    assert not F("algsimp").matches([], "dce", 0, 0, 1)


def test_scoped_name_does_not_match_pipeline_name():
    assert not F("opt/algsimp").matches(["algsimp"], "dce", 3, 1, 5)


def test_occurrence_does_not_match_pipeline_name():
    assert not F("algsimp:0").matches(["algsimp"], "dce", 0, 0, 5)


def test_matches_global_occurrence():
    f = F("algsimp:2")
    assert f.matches(["simplification"], "algsimp", 2, 0, 9)
    assert not f.matches(["simplification"], "algsimp", 1, 2, 9)


def test_matches_pipeline_scope_is_immediate_parent():
    f = F("simplification/algsimp")
    assert f.matches(["simplification"], "algsimp", 3, 1, 5)
    assert f.matches(["outer", "simplification"], "algsimp", 3, 1, 5)
    assert not f.matches(["other"], "algsimp", 3, 1, 5)
    assert not f.matches(["simplification", "inner"], "algsimp", 3, 1, 5)
    assert not f.matches([], "algsimp", 3, 1, 5)


def test_matches_scoped_occurrence_uses_pipeline_occurrence():
    f = F("simplification/algsimp:2")
    assert f.matches(["simplification"], "algsimp", 7, 2, 5)
    assert not f.matches(["simplification"], "algsimp", 2, 3, 5)
    assert not f.matches(["other"], "algsimp", 2, 2, 5)


def test_matches_pass_id_ignores_everything_else():
    f = F("@42")
    assert f.matches(["anywhere"], "anything", 0, 0, 42)
    assert not f.matches(["anywhere"], "anything", 0, 0, 41)
    assert not f.matches(["anywhere"], "anything", 0, 0, None)


def test_matches_any_multiple_entries():
    entries = parse_pass_filter("algsimp,dce:2,@42,simplification/reshape:1")
    assert matches_any(entries, ["any"], "algsimp", 0, 0, 1)
    assert matches_any(entries, ["any"], "dce", 2, 0, 2)
    assert matches_any(entries, ["bar"], "foo", 0, 0, 42)
    assert matches_any(entries, ["simplification"], "reshape", 0, 1, 3)
    assert not matches_any(entries, ["any"], "dce", 1, 0, 2)
    assert not matches_any(entries, ["any"], "other", 0, 0, 99)
    assert not matches_any([], ["any"], "dce", 0, 0, 0)


# ---- non_default and the .debug_options dump ------------------------------------------

def test_non_default():
    o = env_opts("--xla_dump_to=/d --xla_dump_hlo_as_long_text=true --xla_gpu_autotune_level=0")
    assert o.non_default() == {"xla_dump_to": "/d", "xla_gpu_autotune_level": 0}
    assert DebugOptions().non_default() == {}


def test_debug_options_text_exact():
    o = env_opts("--xla_dump_to=/tmp/d --xla_dump_hlo_as_text --xla_dump_hlo_as_long_text=false "
                 "--xla_disable_hlo_passes=dce,simplification/algsimp:1 --xla_dump_max_hlo_modules=3 "
                 "--xla_gpu_autotune_gemm_rtol=0.25 --xla_fuel=dce=1 "
                 "--xla_backend_extra_options=k=v")
    assert o.to_debug_options_text() == (
        'xla_dump_to: "/tmp/d"\n'
        "xla_dump_hlo_as_text: true\n"
        "xla_dump_hlo_as_long_text: false\n"
        "xla_dump_max_hlo_modules: 3\n"
        'xla_disable_hlo_passes: "dce"\n'
        'xla_disable_hlo_passes: "simplification/algsimp:1"\n'
        'xla_backend_extra_options { key: "k" value: "v" }\n'
        "xla_gpu_autotune_gemm_rtol: 0.25\n")


def test_debug_options_text_defaults_empty_and_fuel_omitted():
    assert DebugOptions().to_debug_options_text() == ""
    assert env_opts("--xla_fuel=dce=1").to_debug_options_text() == ""


def test_debug_options_text_escapes():
    o = DebugOptions(xla_dump_hlo_module_re='a"b\\c\nd\'é')
    assert o.to_debug_options_text() == 'xla_dump_hlo_module_re: "a\\"b\\\\c\\nd\\\'\\303\\251"\n'


def test_debug_options_roundtrip(tmp_path):
    o = env_opts('--xla_dump_to="/tmp/a b" --xla_gpu_autotune_level=0 '
                 "--xla_enable_hlo_passes_only=dce,@3 --xla_backend_extra_options=a=1,b "
                 "--xla_cpu_use_new_xtile_lowering --xla_enable_dumping=false")
    p = tmp_path / "module_0000.m.debug_options"
    p.write_text(o.to_debug_options_text())
    back = DebugOptions.from_sources(env={}, debug_options_file=str(p))
    assert back == o


def test_parse_debug_options_text_forms():
    text = ('# comment\nxla_dump_to: \'/x\'\nxla_dump_hlo_as_dot: 1\n'
            'xla_backend_extra_options {\n  key: "a"\n  value: "b"\n}\n'
            'xla_backend_extra_options: { key: "c" value: "d" }\n'
            'xla_dump_hlo_module_re: "\\x41\\101"\n')
    assert parse_debug_options_text(text) == {
        "xla_dump_to": "/x", "xla_dump_hlo_as_dot": True,
        "xla_backend_extra_options": {"a": "b", "c": "d"}, "xla_dump_hlo_module_re": "AA"}


@pytest.mark.parametrize("text,match", [
    ("xla_dump_too: \"x\"", "Did you mean --xla_dump_to"),
    ("xla_dump_to: 3", "wrong value"),
    ("xla_dump_max_hlo_modules: \"3\"", "wrong value"),
    ("xla_dump_to \"x\"", "expected ': value'"),
    ('xla_fuel { key: "a" value: "1" }', "not a DebugOptions field"),
    ("xla_gpu_autotune_level: 8", "0 to 5"),
    ("xla_dump_to: \"x\" %%%", "Cannot parse"),
])
def test_parse_debug_options_text_errors(text, match):
    with pytest.raises(FlagError, match=match):
        parse_debug_options_text(text, "m.debug_options")


def test_debug_options_file_unreadable_names_it(tmp_path):
    missing = str(tmp_path / "gone.debug_options")
    with pytest.raises(FlagError, match="gone.debug_options"):
        DebugOptions.from_sources(env={}, debug_options_file=missing)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.text(), st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)),
                                   min_size=0, max_size=8).filter(lambda s: "," not in s and s),
                           max_size=3))
def test_string_fields_roundtrip_through_text(s, extra_keys):
    o = DebugOptions(xla_dump_to=s, xla_backend_extra_options={k: s for k in extra_keys})
    assert DebugOptions(**parse_debug_options_text(o.to_debug_options_text())) == o
