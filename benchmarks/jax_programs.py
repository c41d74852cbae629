"""The JAX programs the XLA comparisons lower (cpu_vs_xla.py, gpu_vs_xla_fusion.py): one
definition of each.  Every maker returns ``(f, args)``: a function to ``jax.jit`` and its
seeded arguments.  Needs JAX (the ``bench`` / ``bench-xla-gpu`` extras)."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def rng(seed: int = 0):
    return np.random.default_rng(seed)


def mlp_train_step():
    r = rng(1)
    sizes = [784, 512, 256, 10]
    params = [(r.standard_normal((a, b)).astype(np.float32) * 0.05,
               np.zeros(b, np.float32)) for a, b in zip(sizes, sizes[1:])]
    x = r.standard_normal((128, 784)).astype(np.float32)
    y = r.integers(0, 10, 128).astype(np.int32)

    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jax.nn.relu(h @ w + b)
        w, b = params[-1]
        return -jnp.mean(jax.nn.log_softmax(h @ w + b)[jnp.arange(128), y])

    def step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree_util.tree_map(lambda p, d: p - 0.01 * d, params, g)
    return step, (params, x, y)


def attention(dtype=jnp.float32):
    r = rng(2)
    q, k, v = (jnp.asarray(r.standard_normal((4, 8, 128, 64)), dtype) for _ in range(3))

    def f(q, k, v):
        s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
        return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, axis=-1), v)
    return f, (q, k, v)


def layer_norm():
    r = rng(3)
    x = r.standard_normal((256, 1024)).astype(np.float32)
    g, b = np.ones(1024, np.float32), np.zeros(1024, np.float32)

    def f(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-5) * g + b
    return f, (x, g, b)


def softmax():
    x = rng(4).standard_normal((256, 1024)).astype(np.float32)
    return (lambda x: jax.nn.softmax(x, axis=-1)), (x,)


def conv_block():
    r = rng(5)
    x = r.standard_normal((8, 32, 32, 32)).astype(np.float32)
    w = r.standard_normal((3, 3, 32, 32)).astype(np.float32) * 0.1
    b = np.zeros(32, np.float32)

    def f(x, w, b):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y + b)
        return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return f, (x, w, b)


def scan():
    r = rng(6)
    w = r.standard_normal((128, 128)).astype(np.float32) * 0.05
    xs = r.standard_normal((100, 128)).astype(np.float32)

    def f(w, xs):
        def cell(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum()
        return lax.scan(cell, jnp.zeros(128, jnp.float32), xs)
    return f, (w, xs)


def transformer_step(layers: int = 10):
    r = rng(7)
    d, s, bsz, heads = 128, 64, 4, 4

    def init(shape, scale=0.05):
        return r.standard_normal(shape).astype(np.float32) * scale
    params = [dict(wq=init((d, d)), wk=init((d, d)), wv=init((d, d)), wo=init((d, d)),
                   w1=init((d, 4 * d)), w2=init((4 * d, d)), g1=np.ones(d, np.float32),
                   g2=np.ones(d, np.float32)) for _ in range(layers)]
    x = r.standard_normal((bsz, s, d)).astype(np.float32)

    def ln(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-5) * g

    def block(x, p):
        h = ln(x, p["g1"])
        q, k, v = (jnp.reshape(h @ p[n], (bsz, s, heads, d // heads)) for n in ("wq", "wk", "wv"))
        a = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d // heads), -1)
        o = jnp.reshape(jnp.einsum("bhqk,bkhd->bqhd", a, v), (bsz, s, d))
        x = x + o @ p["wo"]
        h = ln(x, p["g2"])
        return x + jax.nn.gelu(h @ p["w1"]) @ p["w2"]

    def loss(params, x):
        for p in params:
            x = block(x, p)
        return jnp.mean(x ** 2)

    def step(params, x):
        g = jax.grad(loss)(params, x)
        return jax.tree_util.tree_map(lambda p, d: p - 1e-3 * d, params, g)
    return step, (params, x)


def rng_normal_uniform():
    def f(key):
        k1, k2 = jax.random.split(key)
        return jax.random.normal(k1, (512, 512)) + jax.random.uniform(k2, (512, 512))
    return f, (jax.random.PRNGKey(0),)


def rng_dropout():
    def f(key, x):
        k1, k2, k3 = jax.random.split(key, 3)
        keep = jax.random.bernoulli(k1, 0.9, x.shape)
        y = jnp.where(keep, x / 0.9, 0.0)
        return (y + jax.random.normal(k2, x.shape) * 0.01,
                jax.random.uniform(k3, (512, 512)))
    x = rng(9).standard_normal((512, 512)).astype(np.float32)
    return f, (jax.random.PRNGKey(0), x)


def sort_topk():
    x = rng(8).standard_normal((64, 1000)).astype(np.float32)

    def f(x):
        vals, idx = lax.top_k(x, 8)
        order = jnp.argsort(x, axis=-1)
        return vals, idx, order[:, :16], jnp.sort(x, axis=0)[:4]
    return f, (x,)


def conditional():
    x = rng(10).standard_normal((256, 256)).astype(np.float32)

    def f(p, i, x):
        a = lax.cond(p, lambda x: jnp.tanh(x) * 2.0, lambda x: x * x + 1.0, x)
        b = lax.switch(i, [lambda x: x + 1.0, lambda x: x * 3.0, lambda x: jnp.exp(x)], x)
        return a + b
    return f, (np.bool_(True), np.int32(1), x)


def makers() -> dict:
    """{name: maker} for the programs the XLA comparisons run, in their order."""
    return {"mlp_train_step": mlp_train_step,
            "attention_f32": lambda: attention(jnp.float32),
            "attention_bf16": lambda: attention(jnp.bfloat16), "layer_norm": layer_norm,
            "softmax": softmax, "conv_block": conv_block, "scan": scan,
            "sort_topk": sort_topk, "rng": rng_dropout,
            "transformer_step": transformer_step, "conditional": conditional}


def hlo_text(make) -> str:
    """The HLO text JAX lowers ``make``'s program to (before XLA's passes)."""
    f, args = make()
    return jax.jit(f).lower(*args).compiler_ir("hlo").as_hlo_text()
