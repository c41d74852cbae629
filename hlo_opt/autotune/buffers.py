"""The buffers a candidate runs on: one per operand and per output, each in redzones
(XLA's ``RedzoneBuffers::FromInstruction``, all inputs and all outputs), filled as the
level says, and the host-side conversions between HLO values and buffer bytes."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from hlo_opt.ir.types import numpy_dtype

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
    _reinit: list | None = field(default=None, repr=False)  # reinit_outputs' contents

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
                    buf.write(to_physical(s, random_fill(s, rng_state)))
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
        """Level 3: the outputs get the same random contents before every candidate
        (made once, written again for each)."""
        if self._reinit is None:
            rng_state = [0]
            self._reinit = [to_physical(s, random_fill(s, rng_state)) if s.byte_size() else None
                            for s in self.output_shapes]
        for data, buf in zip(self._reinit, self.outputs):
            if data is not None:
                buf.write(data)

    def read_output(self, i: int) -> np.ndarray:
        return from_physical(self.output_shapes[i], self.outputs[i].read())

    def read_input(self, i: int) -> np.ndarray:
        return from_physical(self.input_shapes[i], self.inputs[i].read())
