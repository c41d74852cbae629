"""An ``fft`` instruction as one cuFFT call (``cufftMakePlanMany64`` + ``cufftExec*``):
the transform type, the lengths, the batch and the distances between batch elements,
read off the operand's and the result's layouts.

XLA's fft transforms the minor ``len(fft_length)`` logical dimensions (1 to 3); the
leading ones are the batch.  cuFFT's advanced layout with ``inembed = onembed = NULL``
is the contiguous row-major block of each batch element, ``idist`` / ``odist`` elements
apart, so a plan exists when the transformed dimensions are the minor-most physical ones,
in order, and the operand and the result order their batch dimensions alike (batch
element ``b`` of the input then lands on batch element ``b`` of the output).  Other
layouts keep the host path (``fft_plan`` returns None).

cuFFT's inverse transforms are unnormalized; XLA's IFFT / IRFFT are scaled by
``1 / prod(fft_length)``, which XLA's FftThunk applies to the output after the
transform (a cuBLAS scal): ``FftPlan.scale``.  cuFFT's C2R overwrites its input, so
IRFFT reads a copy (``FftPlan.copies_input``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...codegen.index import physical_strides, row_major_strides

# (fft_type, operand type) -> (cuFFT transform, result type)
TRANSFORMS = {
    ("FFT", "c64"): ("C2C", "c64"), ("IFFT", "c64"): ("C2C", "c64"),
    ("FFT", "c128"): ("Z2Z", "c128"), ("IFFT", "c128"): ("Z2Z", "c128"),
    ("RFFT", "f32"): ("R2C", "c64"), ("RFFT", "f64"): ("D2Z", "c128"),
    ("IRFFT", "c64"): ("C2R", "f32"), ("IRFFT", "c128"): ("Z2D", "f64"),
}
# cufftType_t
CUFFT_TYPE = {"R2C": 0x2A, "C2R": 0x2C, "C2C": 0x29, "D2Z": 0x6A, "Z2D": 0x6C, "Z2Z": 0x69}
FORWARD, INVERSE = -1, 1          # CUFFT_FORWARD / CUFFT_INVERSE


@dataclass(frozen=True)
class FftPlan:
    fft_type: str                 # XLA's FFT | IFFT | RFFT | IRFFT
    transform: str                # cuFFT's C2C | Z2Z | R2C | D2Z | C2R | Z2D
    lengths: tuple                # the logical transform sizes (fft_length)
    batch: int
    idist: int                    # elements between batch elements of the input
    odist: int                    # ... and of the output
    in_dtype: str
    out_dtype: str

    @property
    def direction(self) -> int:
        return INVERSE if self.fft_type in ("IFFT", "IRFFT") else FORWARD

    @property
    def scale(self) -> float:
        """What the output is multiplied by after the transform (1: nothing to do)."""
        return 1.0 / math.prod(self.lengths) if self.direction == INVERSE else 1.0

    @property
    def copies_input(self) -> bool:
        return self.transform in ("C2R", "Z2D")

    @property
    def cufft_type(self) -> int:
        return CUFFT_TYPE[self.transform]


def fft_plan(inst) -> FftPlan | None:
    """The cuFFT call of an ``fft`` instruction, or None (it then runs on the host)."""
    if inst.opcode != "fft" or len(inst.operands) != 1:
        return None
    x, out = inst.operands[0].shape, inst.shape
    if not (x.is_array() and out.is_array()) or x.rank != out.rank:
        return None
    fft_type = inst.attrs.get("fft_type", "FFT").strip().upper()
    hit = TRANSFORMS.get((fft_type, x.element_type))
    if hit is None or hit[1] != out.element_type:
        return None
    lengths = tuple(int(v) for v in inst.attr("fft_length", ()))
    r = len(lengths)
    if not 1 <= r <= 3 or r > x.rank or math.prod(lengths) == 0:
        return None
    in_fft, out_fft = tuple(x.dims[-r:]), tuple(out.dims[-r:])
    half = lengths[:-1] + (lengths[-1] // 2 + 1,)
    want_in = half if fft_type == "IRFFT" else lengths
    want_out = half if fft_type == "RFFT" else lengths
    if in_fft != want_in or out_fft != want_out or x.dims[:-r] != out.dims[:-r]:
        return None
    m2m_in = tuple(x.effective_layout().minor_to_major)
    m2m_out = tuple(out.effective_layout().minor_to_major)
    minor = tuple(range(x.rank - 1, x.rank - 1 - r, -1))
    if m2m_in != m2m_out or m2m_in[:r] != minor:
        return None
    # the transformed block of each shape is contiguous row-major (checked above), so the
    # batch elements sit at multiples of its size in the same order for both shapes
    assert physical_strides(x)[x.rank - r:] == row_major_strides(in_fft)
    batch = math.prod(x.dims[:-r])
    if batch == 0:        # nothing to transform: no cuFFT plan takes a batch of 0
        return None
    return FftPlan(fft_type, hit[0], lengths, batch, math.prod(in_fft), math.prod(out_fft),
                   x.element_type, out.element_type)
