"""JAX-generated benchmark modules: the functions, and their HLO text at a given size.

    python benchmarks/jax_modules/generate.py OUT_DIR [--scale small|large]

``small`` modules are checked into this folder (cuda-sim and the interpreter run them in
the tests); ``scripts/device_check.sh`` regenerates ``large`` ones with the device's JAX
and times XLA:GPU on the very same functions.
"""
from __future__ import annotations

import os
import sys

SIZES = {"small": (64, 256), "large": (8192, 4096)}


def functions(jnp, jax):
    def gelu_bias(x, b):
        return jax.nn.gelu(x + b, approximate=True)

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def layernorm(x, g, b):
        m = jnp.mean(x, axis=-1, keepdims=True)
        v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

    def rowsum(x):
        return jnp.sum(x, axis=1)

    def colsum(x):
        return jnp.sum(x, axis=0)

    def adam(p, g, m, v):
        m2 = 0.9 * m + 0.1 * g
        v2 = 0.999 * v + 0.001 * g * g
        return p - 1e-3 * m2 / (jnp.sqrt(v2) + 1e-8), m2, v2

    def bf16_residual(x, r, s):
        y = x.astype(jnp.float32) * s
        return (jax.nn.relu(y) + r.astype(jnp.float32)).astype(jnp.bfloat16)

    def transpose_add(x, y):
        return x.T + y

    def mlp_bf16(x, w, b):
        y = jnp.dot(x, w, preferred_element_type=jnp.float32) + b
        return jax.nn.gelu(y, approximate=True).astype(jnp.bfloat16)

    return {"gelu_bias": (gelu_bias, "x,b"), "softmax": (softmax, "x"),
            "layernorm": (layernorm, "x,g,b"), "rowsum": (rowsum, "x"),
            "colsum": (colsum, "x"), "adam": (adam, "x,x,x,x"),
            "bf16_residual": (bf16_residual, "h,h,b"), "transpose_add": (transpose_add, "x,t"),
            "mlp_bf16": (mlp_bf16, "h,w,b")}


def arguments(jnp, spec: str, n: int, d: int):
    out = []
    for s in spec.split(","):
        if s == "x":
            out.append(jnp.zeros((n, d), jnp.float32))
        elif s == "h":
            out.append(jnp.zeros((n, d), jnp.bfloat16))
        elif s == "t":
            out.append(jnp.zeros((d, n), jnp.float32))
        elif s == "w":
            out.append(jnp.zeros((d, d), jnp.bfloat16))
        else:  # a row vector
            out.append(jnp.zeros((d,), jnp.float32))
    return out


def hlo_text(fn, args, jax) -> str:
    return jax.jit(fn).lower(*args).as_text(dialect="hlo")


def main(argv):
    import jax
    import jax.numpy as jnp
    out = argv[1]
    scale = argv[argv.index("--scale") + 1] if "--scale" in argv else "small"
    n, d = SIZES[scale]
    os.makedirs(out, exist_ok=True)
    for name, (fn, spec) in functions(jnp, jax).items():
        text = hlo_text(fn, arguments(jnp, spec, n, d), jax)
        with open(os.path.join(out, f"{name}.hlo"), "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main(sys.argv)
