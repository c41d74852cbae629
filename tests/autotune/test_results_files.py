"""Results files (text and binary AutotuneResults), the per-process cache, the per-fusion
cache directory, deviceless compilation."""
from __future__ import annotations

import os

import pytest

from hlo_opt.autotune import (CACHE_MODE_READ, AutotuneConfig, AutotuneError, AutotuneSession,
                              ResultCache)
from hlo_opt.autotune.proto import from_binary, from_text, to_binary, to_text
from hlo_opt.autotune.results import AutotuneResult, CandidateKey, Failure, FailureKind
from hlo_opt.autotune.serialize import decode_results, encode_results

from .util import (OOB_PLANT, PlantedProvider, gemm_module, pick, selected, session)


def tuned_cache(level=4):
    cache = ResultCache()
    provider = PlantedProvider([OOB_PLANT], costs={"host-gemm-split-k-4": 2.0})
    m = gemm_module()
    pick(m, session(provider, level=level, cache=cache))
    return cache, selected(m), provider


def test_textproto_is_shaped_like_xlas():
    cache, choice, _ = tuned_cache()
    assert choice == ["2", "2"]
    text = cache.serialize(as_text=True).decode()
    assert text.startswith("version: 3\nresults {\n  device: \"Host: ")
    assert "\n  hlo: \"(f32[64,48]{1,0}, s8[" in text
    assert "\n  result {\n    gemm {\n      algorithm: 2\n    }\n    run_time {\n" in text
    assert text.count("results {") == 2 and "nanos: 2000000" in text


def test_results_file_round_trip_gives_the_same_choices_without_measuring(tmp_path):
    for name in ("results.textproto", "results.txt", "results.pb"):
        cache, choice, _ = tuned_cache()
        path = tmp_path / name
        cache.dump_to_file(str(path))
        raw = path.read_bytes()
        assert raw.startswith(b"version: 3") == name.endswith((".txt", ".textproto"))
        fresh = ResultCache()
        provider = PlantedProvider([OOB_PLANT])
        m = gemm_module()
        sess = AutotuneSession(AutotuneConfig(level=4, redzone_padding_bytes=256,
                                              load_results_from=str(path)),
                               provider, cache=fresh)
        pick(m, sess)
        assert selected(m) == choice
        assert provider.runs == 0 and provider.measured == 0
        assert sess.stats.cache_hits == 2 and sess.stats.tuned == 0


def test_dump_rewrites_and_sorts(tmp_path):
    path = tmp_path / "out.textproto"
    cache = ResultCache()
    m = gemm_module()
    sess = AutotuneSession(AutotuneConfig(level=1, dump_results_to=str(path)),
                           PlantedProvider(), cache=cache)
    pick(m, sess)
    sess.finish()
    entries = decode_results(path.read_bytes(), True, str(path))
    assert [e[1] for e in entries] == sorted(e[1] for e in entries) and len(entries) == 2


def test_proto_codecs_round_trip_every_field():
    r = AutotuneResult(CandidateKey.cudnn(5, math_type="TENSOR_OP_MATH", workspace_size=1024),
                       run_time_s=1.5e-5, scratch_bytes=1024,
                       failure=Failure(FailureKind.WRONG_RESULT, 'bad "x"\n\u00e9',
                                       CandidateKey.cudnn(0), 0xdeadbeef))
    entries = [("CUDA: 9.0, Cores: 132", "f32[2]{0} custom-call()", r),
               ("CUDA: 9.0, Cores: 132", "a\tb", AutotuneResult(CandidateKey.other("tile:64x64x16"),
                                                                 2e-6))]
    for as_text in (True, False):
        back = decode_results(encode_results(entries, as_text), as_text, "x")
        assert back == sorted(entries, key=lambda e: (e[0], e[1]))


def test_binary_is_protobuf_wire_format():
    msg = {"version": 3, "results": [{"device": "d", "hlo": "h",
                                      "result": {"gemm": {"algorithm": 7}, "scratch_bytes": 1}}]}
    data = to_binary("AutotuneResults", msg)
    # version=3 (field 1 varint), results (field 4, length-delimited)
    assert data[:2] == b"\x08\x03" and data[2] == (4 << 3 | 2)
    assert from_binary("AutotuneResults", data) == msg
    # unknown fields are skipped, as protobuf does
    assert from_binary("AutotuneResults", b"\x78\x01" + data) == msg
    assert from_text("AutotuneResults", to_text("AutotuneResults", msg)) == msg


def test_bad_files_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.textproto"
    bad.write_text("version: 3\nresults {\n  devise: \"x\"\n}\n")
    with pytest.raises(AutotuneError) as e:
        ResultCache().load_from_file(str(bad))
    assert str(e.value).startswith(f"{bad}:3:3: error: message Entry has no field named "
                                   "\"devise\"\n  devise: \"x\"\n  ^")
    old = tmp_path / "old.textproto"
    old.write_text("version: 2\n")
    with pytest.raises(AutotuneError, match="Version mismatch in autotune results. Expected 3 "
                                            "but was 2"):
        ResultCache().load_from_file(str(old))
    with pytest.raises(AutotuneError, match="does not exist"):
        ResultCache().load_from_file(str(tmp_path / "nope.pb"))
    junk = tmp_path / "junk.pb"
    junk.write_bytes(b"\x0a\xff")
    with pytest.raises(AutotuneError, match="not a binary AutotuneResults proto"):
        ResultCache().load_from_file(str(junk))


def test_per_fusion_cache_dir_update_then_read(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    m = gemm_module()
    sess = session(PlantedProvider([OOB_PLANT]), cache=ResultCache(), cache_dir=str(d))
    pick(m, sess)
    files = sorted(p.name for p in d.iterdir() if p.is_file())
    assert len(files) == 2 and all(f.endswith(".textproto") for f in files)
    assert os.listdir(d / "tmp") == []          # written through tmp/ and renamed
    assert (d / files[0]).read_text().startswith("gemm {\n")   # algorithm 0: proto3 default
    choice = selected(m)

    # another process (a fresh in-memory cache) reads the directory and measures nothing
    provider = PlantedProvider([OOB_PLANT])
    m2 = gemm_module()
    sess2 = session(provider, cache=ResultCache(), cache_dir=str(d), cache_mode=CACHE_MODE_READ)
    pick(m2, sess2)
    assert selected(m2) == choice and provider.runs == 0
    assert sess2.cache.stats.file_hits == 2


def test_read_mode_never_writes(tmp_path):
    d = tmp_path / "cache"
    d.mkdir()
    sess = session(PlantedProvider(), cache=ResultCache(), cache_dir=str(d),
                   cache_mode=CACHE_MODE_READ)
    pick(gemm_module(), sess)
    assert sess.stats.tuned == 2 and list(d.iterdir()) == []


def test_in_memory_cache_spans_modules():
    cache = ResultCache()
    provider = PlantedProvider()
    sess = session(provider, cache=cache)
    pick(gemm_module(), sess)
    runs = provider.runs
    pick(gemm_module(), sess)
    assert provider.runs == runs and sess.stats.cache_hits == 2 and sess.stats.tuned == 2


def test_deviceless(tmp_path):
    m = gemm_module()
    devless = AutotuneSession(AutotuneConfig(level=4, deviceless=True), None,
                              device_key="CUDA: 9.0", cache=ResultCache())
    with pytest.raises(AutotuneError, match=r"deviceless compilation cannot autotune "
                                            r"%cublas-(lt-matmul|gemm).* --xla_gpu_autotune_level=0"):
        pick(m, devless)
    # level 0: nothing to do
    off = AutotuneSession(AutotuneConfig(level=0, deviceless=True), None, cache=ResultCache())
    assert not pick(gemm_module(), off)
    # results from a machine with "the device" make it work
    cache = ResultCache()
    provider = PlantedProvider(costs={"host-gemm-split-k-2": 1.0})
    provider.device_key = lambda: "CUDA: 9.0"
    ref = gemm_module()
    pick(ref, session(provider, cache=cache))
    path = tmp_path / "r.pb"
    cache.dump_to_file(str(path))
    loaded = AutotuneSession(AutotuneConfig(level=4, deviceless=True,
                                            load_results_from=str(path)),
                             None, device_key="CUDA: 9.0", cache=ResultCache())
    m = gemm_module()
    assert pick(m, loaded) and selected(m) == selected(ref) == ["1", "1"]


def test_require_complete_aot_results():
    sess = session(PlantedProvider(), require_complete_aot_results=True)
    with pytest.raises(AutotuneError, match="Complete XLA AOT autotuning results are required"):
        pick(gemm_module(), sess)


def test_autotune_logs_record_every_candidate(tmp_path):
    from hlo_opt.autotune.proto import from_text
    path = tmp_path / "logs.textproto"
    sess = session(PlantedProvider([OOB_PLANT]), dump_logs_to=str(path))
    pick(gemm_module(), sess)
    sess.finish()
    logs = from_text("AutotuningLogs", path.read_text())["logs"]
    m_names = [log["fusion_name"] for log in logs]
    assert len(m_names) == 2 and all(n.startswith(("cublas-gemm", "cublas-lt-matmul")) for n in m_names)
    kinds = [r.get("failure", {}).get("kind") for r in logs[0]["results"]]
    assert kinds == [None, None, None, "REDZONE_MODIFIED"]
    assert logs[0]["selected_backend"] == "gemm(algorithm=0)"


def test_reads_xla_cudnn_results_with_tuning_knobs():
    text = b'''version: 3
results {
  device: "CUDA: 9.0, Cores: 132"
  hlo: "x"
  result {
    run_time { nanos: 31744 }
    algorithm {
      algo_id: 28
      math_type: TENSOR_OP_MATH
      tuning_knobs { key: 3 value: 1 }
      tuning_knobs { key: 2 value: 0 }
      is_cudnn_frontend: true
      workspace_size { value: 4096 }
    }
  }
}
'''
    (entry,) = decode_results(text, True, "xla.textproto")
    key = entry[2].key
    assert key.get("algo_id") == 28 and key.get("tuning_knobs") == ((2, 0), (3, 1))
    assert key.get("workspace_size") == 4096 and hash(key)
    again = decode_results(encode_results([entry], False), False, "x")
    assert again == [entry]


def test_concurrent_writers_never_leave_a_partial_entry(tmp_path):
    """Several processes (here: caches in threads) writing the same key: every read sees
    one whole result (write to DIR/tmp, then rename)."""
    import threading
    from hlo_opt.autotune.cache import AutotuneCacheKey
    from hlo_opt.autotune.serialize import result_from_text
    key = AutotuneCacheKey("dev", "hlo")
    results = [AutotuneResult(CandidateKey.gemm(i), run_time_s=i / 1000,
                              failure=Failure(FailureKind.WRONG_RESULT, "x" * 5000))
               for i in range(8)]
    seen = []

    def writer(r):
        for _ in range(20):
            ResultCache().add(key, r, str(tmp_path), "")

    def reader():
        path = tmp_path / key.file_name()
        for _ in range(200):
            if path.exists():
                seen.append(result_from_text(path.read_text(), str(path)))
    threads = [threading.Thread(target=writer, args=(r,)) for r in results]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(s in results for s in seen)
    assert os.listdir(tmp_path / "tmp") == []
    assert result_from_text((tmp_path / key.file_name()).read_text(), "f") in results
