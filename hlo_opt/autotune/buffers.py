"""The buffers a candidate runs on: one per operand and per output, each in redzones
(XLA's ``RedzoneBuffers::FromInstruction``, all inputs and all outputs), filled as the
level says, and the host-side conversions between HLO values and buffer bytes."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlo_opt.ir.types import BIT_WIDTH, numpy_dtype

from .redzone import Buffer, Memory, RedzoneAllocator

_RING = 10069        # XLA's InitializeBuffer: a ring of random values of this prime size
_tables: dict[str, np.ndarray] = {}


def _low_range(element_type: str) -> bool:
    return element_type in ("f16",) or element_type.startswith(("f8", "f4", "f6"))


def _table(element_type: str) -> np.ndarray:
    """XLA's ring of values: integers 0/1, floats in [0, 1], narrow floats in [0, 0.1]."""
    t = _tables.get(element_type)
    if t is None:
        dtype = numpy_dtype(element_type)
        rng = np.random.default_rng(0)
        if element_type == "pred":
            t = rng.integers(0, 2, _RING).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            t = np.floor(rng.uniform(0, 1, _RING) + 0.5).astype(dtype)
        else:
            hi = 0.1 if _low_range(element_type) else 1.0
            vals = rng.uniform(0, hi, _RING)
            t = vals.astype(np.float64 if element_type == "f64" else np.float32)
            if np.issubdtype(dtype, np.complexfloating):
                t = (t + 0j).astype(dtype)
            else:
                t = t.astype(dtype)
        _tables[element_type] = t
    return t


_COMPONENT = {"c64": "f32", "c128": "f64"}


def ring_head(element_type: str, count: int, rng_state: list[int]) -> np.ndarray | None:
    """XLA's ``InitializeBuffer`` of a buffer of ``count`` elements, as the bytes of its
    first ring (at most 10069 values from ``rng_state[0]`` on) that repeat over the
    buffer's memory (complex numbers: real and imaginary parts are values of the ring of
    their component type, as in XLA); None for types of no whole byte."""
    t = _COMPONENT.get(element_type)
    if t is not None:
        count *= 2
    table = _table(t or element_type)
    if table.dtype.itemsize * 8 != BIT_WIDTH[t or element_type]:
        return None
    start = rng_state[0]
    rng_state[0] = (start + count) % _RING
    return np.roll(table, -start)[:min(count, _RING)].view(np.uint8)


def random_fill(shape, rng_state: list[int]) -> np.ndarray:
    """The next ``shape.num_elements()`` values of the ring from ``rng_state[0]`` on."""
    table = _table(shape.element_type)
    n = shape.num_elements()
    start = rng_state[0]
    rng_state[0] = (start + n) % _RING
    return np.resize(np.roll(table, -start), n)  # the ring from ``start``, repeated


def to_physical(shape, logical: np.ndarray) -> np.ndarray:
    """Logical array -> the bytes in memory order (``minor_to_major`` layout)."""
    arr = np.asarray(logical, dtype=shape.dtype).reshape(shape.dims)
    m2m = shape.effective_layout().minor_to_major
    return np.ascontiguousarray(np.transpose(arr, tuple(reversed(m2m)))) if arr.ndim else arr


def from_physical(shape, data: np.ndarray) -> np.ndarray:
    """Bytes in memory order -> the logical array."""
    arr = np.asarray(data).view(shape.dtype)
    if not shape.dims:
        return arr.reshape(())
    order = tuple(reversed(shape.effective_layout().minor_to_major))
    phys = arr.reshape([shape.dims[d] for d in order])
    return np.transpose(phys, np.argsort(order))


def array_shapes(shape) -> list:
    return list(shape.tuple_shapes) if shape.is_tuple() else [shape]


@dataclass
class RedzoneBuffers:
    allocator: RedzoneAllocator
    input_shapes: list
    output_shapes: list
    inputs: list[Buffer] = field(default_factory=list)
    outputs: list[Buffer] = field(default_factory=list)
    compared: list[int] | None = None   # outputs checked against the reference (None: all)
    _reference: dict = field(default_factory=dict, repr=False)  # output -> allocation

    @classmethod
    def for_shapes(cls, memory: Memory, input_shapes, output_shapes, config,
                   rng_state: list[int] | None = None) -> "RedzoneBuffers":
        allocator = RedzoneAllocator(memory, config.redzone_size)
        self = cls(allocator, list(input_shapes), list(output_shapes))
        rng_state = rng_state if rng_state is not None else [0]
        for shapes, out in ((self.input_shapes, self.inputs), (self.output_shapes, self.outputs)):
            for s in shapes:
                buf = allocator.allocate_bytes(s.byte_size())
                if config.should_init_buffers and s.byte_size():
                    _fill_random(buf, s, rng_state)
                elif s.byte_size():
                    buf.write(np.zeros(s.byte_size(), np.uint8))
                out.append(buf)
        return self

    @classmethod
    def for_instruction(cls, memory: Memory, inst, config,
                        kind: str | None = None) -> "RedzoneBuffers":
        from .kinds import compared_outputs
        self = cls.for_shapes(memory, [o.shape for o in inst.operands],
                              array_shapes(inst.shape), config)
        self.compared = compared_outputs(inst, kind)
        return self

    def compared_outputs(self) -> list[int]:
        return list(range(len(self.outputs))) if self.compared is None else self.compared

    def reinit_outputs(self) -> None:
        """Level 3: the outputs get the same random contents before every candidate."""
        rng_state = [0]
        for s, buf in zip(self.output_shapes, self.outputs):
            if s.byte_size():
                _fill_random(buf, s, rng_state)

    def keep_reference(self) -> None:
        """The compared outputs as they are now become the reference (copied in memory
        of their own, where the candidates' buffers live)."""
        for i in self.compared_outputs():
            buf = self.outputs[i]
            if buf.nbytes:
                ref = buf.memory.allocate(buf.nbytes)
                buf.memory.copy(ref, 0, buf.alloc, buf.offset, buf.nbytes)
                self._reference[i] = ref

    def release(self) -> None:
        """Free the buffers, their redzones and the reference copies."""
        self.allocator.release()
        for i, ref in self._reference.items():
            self.outputs[i].memory.free(ref)
        self._reference.clear()

    def mismatches(self, i: int, rtol: float) -> int:
        """Elements of output ``i`` beyond ``rtol`` of the reference (XLA's
        BufferComparator, on the device where the memory has its kernels)."""
        buf = self.outputs[i]
        if i not in self._reference:
            return 0
        return buf.memory.mismatches(self.output_shapes[i].element_type, buf.alloc,
                                     buf.offset, self._reference[i], 0, buf.nbytes, rtol)

    def read_output(self, i: int) -> np.ndarray:
        return from_physical(self.output_shapes[i], self.outputs[i].read())

    def read_input(self, i: int) -> np.ndarray:
        return from_physical(self.input_shapes[i], self.inputs[i].read())


def _fill_random(buf: Buffer, shape, rng_state: list[int]) -> None:
    """The buffer's memory from XLA's ring, in memory order (as XLA fills it, whatever
    the layout); types of no whole byte through the host."""
    head = ring_head(shape.element_type, shape.num_elements(), rng_state)
    if head is None:
        buf.write(to_physical(shape, random_fill(shape, rng_state)))
    else:
        buf.memory.repeat(buf.alloc, buf.offset, head, buf.nbytes)
