"""Data movement opcodes; expectations built with explicit index loops."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np

from .interp_util import run


def test_broadcast_maps_operand_dims_including_unsorted():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = run("""HloModule t
ENTRY e {
  p = f32[2,3] parameter(0)
  ROOT r = f32[3,4,2] broadcast(p), dimensions={2,0}
}""", x)
    for i, j, k in itertools.product(range(3), range(4), range(2)):
        assert r[i, j, k] == x[k, i]
    s = run("""HloModule t
ENTRY e {
  p = s32[] parameter(0)
  ROOT r = s32[2,2] broadcast(p), dimensions={}
}""", np.int32(7))
    assert s.tolist() == [[7, 7], [7, 7]]


def test_reshape_transpose_slice():
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    r = run("""HloModule t
ENTRY e {
  p = s32[2,3,4] parameter(0)
  t = s32[4,2,3] transpose(p), dimensions={2,0,1}
  ROOT s = s32[2,1,2] slice(t), slice={[1:4:2], [1:2], [0:3:2]}
}""", x)
    flat = list(range(24))
    for a, b, c in itertools.product(range(2), range(1), range(2)):
        i, j, k = 1 + 2 * a, 1 + b, 2 * c  # index into t[4,2,3]
        assert r[a, b, c] == flat[j * 12 + k * 4 + i]  # t[i,j,k] = x[j,k,i]
    rs = run("""HloModule t
ENTRY e {
  p = s32[2,3,4] parameter(0)
  ROOT r = s32[6,4] reshape(p)
}""", x)
    assert rs.reshape(-1).tolist() == flat


DS = """HloModule t
ENTRY e {
  p = s32[5,4] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT r = s32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}
}"""


def test_dynamic_slice_clamps_start_indices():
    x = np.arange(20, dtype=np.int32).reshape(5, 4)

    def expect(i, j):
        i = min(max(i, 0), 5 - 2)
        j = min(max(j, 0), 4 - 3)
        return [[x[i + a][j + b] for b in range(3)] for a in range(2)]
    for i, j in [(0, 0), (-5, 7), (4, 1), (100, -100), (2, 1)]:
        assert run(DS, x, np.int32(i), np.int32(j)).tolist() == expect(i, j)
    unsigned = DS.replace("s32[] parameter(1)", "u32[] parameter(1)")
    assert run(unsigned, x, np.uint32(0xFFFFFFFF), np.int32(0)).tolist() == expect(3, 0)


def test_dynamic_update_slice_clamps_and_leaves_operand_alone():
    x = np.zeros((4, 4), np.float32)
    u = np.ones((2, 3), np.float32)
    text = """HloModule t
ENTRY e {
  p = f32[4,4] parameter(0)
  u = f32[2,3] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT r = f32[4,4] dynamic-update-slice(p, u, i, j)
}"""
    r = run(text, x, u, np.int32(3), np.int32(-2))
    expected = np.zeros((4, 4), np.float32)
    for a in range(2):
        for b in range(3):
            expected[2 + a][0 + b] = 1.0  # row start clamped to 4-2, column to 0
    assert r.tolist() == expected.tolist()
    assert not x.any()


def test_pad_negative_and_interior():
    x = np.array([1, 2, 3], np.int32)
    r = run("""HloModule t
ENTRY e {
  p = s32[3] parameter(0)
  v = s32[] constant(0)
  ROOT r = s32[6] pad(p, v), padding=-1_2_1
}""", x)
    # interior: 1 0 2 0 3 ; low -1 drops the 1 ; high +2 zeros
    assert r.tolist() == [0, 2, 0, 3, 0, 0]
    m = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    r2 = run("""HloModule t
ENTRY e {
  p = f32[2,3] parameter(0)
  v = f32[] constant(-1)
  ROOT r = f32[4,2] pad(p, v), padding=1_0_1x-2_1
}""", m)
    assert r2.tolist() == [[-1, -1], [3, -1], [-1, -1], [6, -1]]


def test_pad_all_negative_crops():
    x = np.arange(10, dtype=np.int32)
    r = run("""HloModule t
ENTRY e {
  p = s32[10] parameter(0)
  v = s32[] constant(0)
  ROOT r = s32[5] pad(p, v), padding=-2_-3
}""", x)
    assert r.tolist() == [2, 3, 4, 5, 6]


def test_concatenate_reverse_iota():
    a = np.array([[1, 2]], np.int32)
    b = np.array([[3, 4], [5, 6]], np.int32)
    r = run("""HloModule t
ENTRY e {
  a = s32[1,2] parameter(0)
  b = s32[2,2] parameter(1)
  c = s32[3,2] concatenate(a, b), dimensions={0}
  ROOT r = s32[3,2] reverse(c), dimensions={0,1}
}""", a, b)
    assert r.tolist() == [[6, 5], [4, 3], [2, 1]]
    io = run("""HloModule t
ENTRY e {
  ROOT r = s32[2,3] iota(), iota_dimension=1
}""")
    assert io.tolist() == [[0, 1, 2], [0, 1, 2]]
    bf = run("""HloModule t
ENTRY e {
  ROOT r = bf16[300] iota(), iota_dimension=0
}""")
    assert bf.dtype == ml_dtypes.bfloat16
    assert float(bf[257]) == 256.0 and float(bf[259]) == 260.0  # rounded like a convert


def test_bitcast_reinterprets_physical_layout():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # f32[2,3]{0,1} is column major: physical order x00 x10 x01 x11 x02 x12
    physical = [x[i][j] for j in range(3) for i in range(2)]
    flat = run("""HloModule t
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[6]{0} bitcast(p)
}""", x)
    assert flat.tolist() == physical
    t = run("""HloModule t
ENTRY e {
  p = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[3,2]{1,0} bitcast(p)
}""", x)
    assert t.tolist() == [[physical[2 * a + b] for b in range(2)] for a in range(3)]
    same = run("""HloModule t
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  ROOT r = f32[3,2]{0,1} bitcast(p)
}""", x)
    # row-major physical 0..5 read back as a column-major [3,2]
    assert same.tolist() == [[0, 3], [1, 4], [2, 5]]


def test_get_dimension_size_and_copy():
    x = np.zeros((3, 7), np.float32)
    r = run("""HloModule t
ENTRY e {
  p = f32[3,7] parameter(0)
  c = f32[3,7] copy(p)
  ROOT r = s32[] get-dimension-size(c), dimensions={1}
}""", x)
    assert int(r) == 7 and r.dtype == np.int32
