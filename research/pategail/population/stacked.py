"""N personal discriminators as stacked parameter arrays: the bundle's MLP, loss and optimiser, batched.

One row of ``params`` (float32 (n, P)) is one device's flat parameter vector in the bundle manifest's
``parameters`` order (the order ``TrainingSession.get_flat_parameters`` uses), so a row can be compared with,
or loaded into, an SDK device's ONNX Runtime session. The optimiser is the bundle's: torch's AdamW (decoupled
decay before the update, bias correction on both moments; the optimizer model's ``adam_mode=0``) after the
global gradient norm of each device is clipped to ``max_grad_norm`` (``clip_grad_norm_``), and the loss the
training model's stable BCE on logits with the manifest's (smoothed) labels.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.optim.adamw import adamw

from pategail.sdk.bundle import Bundle

CLIP_EPS = 1e-6
"""torch's clip_grad_norm_ divides by (norm + 1e-6); the conformance suite holds the bundle's ORT optimizer
model to torch's AdamW after clip_grad_norm_ (1e-5), so the stacked step follows torch."""


@dataclass(frozen=True)
class OptimiserSettings:
    """The devices' discriminator optimiser as the bundle manifest declares it."""

    learning_rate: float
    """AdamW step size (the manifest's recommended rate, which SDK devices set)."""
    weight_decay: float
    """Decoupled weight decay."""
    max_grad_norm: float
    """Each device's global gradient norm is clipped to this before the update."""
    beta1: float
    """First-moment decay."""
    beta2: float
    """Second-moment decay."""
    eps: float
    """Adam's denominator epsilon."""
    expert_label: float
    """Target of the owner's real pairs (1 − label smoothing)."""
    generated_label: float
    """Target of generated pairs."""

    @classmethod
    def of(cls, bundle: Bundle) -> "OptimiserSettings":
        disc = bundle.manifest["discriminator"]
        opt = disc["optimizer"]
        return cls(float(bundle.learning_rate), float(opt["weight_decay"]), float(opt["max_grad_norm"]),
                   float(opt["betas"][0]), float(opt["betas"][1]), float(opt["eps"]),
                   float(disc["labels"]["expert"]), float(disc["labels"]["generated"]))


@dataclass(frozen=True)
class Layout:
    """Where each layer's tensors sit in the flat parameter vector (the manifest's names and shapes)."""

    slices: dict
    """name -> (start, stop, shape)."""
    n_parameters: int

    @classmethod
    def of(cls, bundle: Bundle) -> "Layout":
        slices, at = {}, 0
        for name, shape in bundle.parameters:
            size = int(np.prod(shape, dtype=np.int64))
            slices[name] = (at, at + size, tuple(int(s) for s in shape))
            at += size
        expected = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"}
        if set(slices) != expected:
            raise ValueError(f"the population fleet knows the 15-64-64-1 MLP ({sorted(expected)}); the bundle's "
                             f"discriminator has parameters {sorted(slices)}")
        return cls(slices, at)

    def view(self, flat: torch.Tensor, name: str) -> torch.Tensor:
        """(c, *shape) view of parameter ``name`` in the stacked flat vectors ``flat`` (c, P)."""
        start, stop, shape = self.slices[name]
        return flat[:, start:stop].reshape(flat.shape[0], *shape)

    def arrays(self, flat: np.ndarray) -> tuple[np.ndarray, ...]:
        """(w1, b1, w2, b2, w3, b3): views of the stacked flat vectors ``flat`` (c, P) as (c, *shape) arrays."""
        out = []
        for name in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "out.weight", "out.bias"):
            start, stop, shape = self.slices[name]
            # copy=False: a view or an error, never a silent copy (gradients are written through these)
            out.append(np.reshape(flat[:, start:stop], (flat.shape[0], *shape), copy=False))
        return tuple(out)


def logits(layout: Layout, flat: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """(c, B) logits of the stacked discriminators ``flat`` (c, P) on ``pairs``: (c, B, 15) per device or
    (B, 15) shared by all — the forward graph tanh(fc1) → tanh(fc2) → out, differentiable (the reference the
    hand-written gradient of :func:`gradients` is tested against)."""
    w1, b1 = layout.view(flat, "fc1.weight"), layout.view(flat, "fc1.bias")
    w2, b2 = layout.view(flat, "fc2.weight"), layout.view(flat, "fc2.bias")
    w3, b3 = layout.view(flat, "out.weight"), layout.view(flat, "out.bias")
    h = torch.tanh(torch.matmul(pairs, w1.transpose(1, 2)) + b1[:, None, :])
    h = torch.tanh(torch.matmul(h, w2.transpose(1, 2)) + b2[:, None, :])
    return torch.matmul(h, w3.transpose(1, 2))[..., 0] + b3


def stable_bce(logit: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(c,) each device's mean relu(x) − x·t + log(1 + exp(−|x|)) (the training model's loss block)."""
    return (torch.relu(logit) - logit * labels + torch.log(1 + torch.exp(-torch.abs(logit)))).mean(-1)


# The hot paths below are numpy: on the development machine (AMD EPYC) numpy's BLAS ran the devices' small
# matrix products (64 × 64 × 64, 564 × 64 × 64) 2–3× faster than torch's, and numpy's vectorised tanh was
# 5–8× faster than torch's (BENCHMARKS.md "The population fleet"); the arrays are shared with torch, not copied.

def _tanh_(a: np.ndarray) -> np.ndarray:
    return np.tanh(a, out=a)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    """σ(z) = (1 + tanh(z / 2)) / 2: no overflow for large |z|."""
    return 0.5 + 0.5 * np.tanh(0.5 * z)


def gradients(layout: Layout, flat: np.ndarray, pairs: np.ndarray, labels: np.ndarray, out: np.ndarray) -> None:
    """Each device's gradient of its mean :func:`stable_bce` loss on its minibatch into ``out`` (c, P):
    ``flat`` float32 (c, P) parameters, ``pairs`` float32 (c, B, 15), ``labels`` (B,). Back-propagation by
    hand through the three layers (d loss / d logit = (σ(x) − t) / B, tanh' = 1 − tanh²)."""
    w1, b1, w2, b2, w3, b3 = layout.arrays(flat)
    # products with a transposed right operand are ~40% slower in the BLAS at these sizes than a copy + plain
    h1 = np.matmul(pairs, np.ascontiguousarray(w1.transpose(0, 2, 1)))
    h1 += b1[:, None, :]
    _tanh_(h1)
    h2 = np.matmul(h1, np.ascontiguousarray(w2.transpose(0, 2, 1)))
    h2 += b2[:, None, :]
    _tanh_(h2)
    z = np.matmul(h2, w3.transpose(0, 2, 1))[..., 0]
    z += b3
    dz = (_sigmoid(z) - labels) / np.float32(z.shape[1])                   # (c, B)
    g1w, g1b, g2w, g2b, g3w, g3b = layout.arrays(out)
    np.sum(dz, axis=1, keepdims=True, out=g3b)
    np.matmul(dz[:, None, :], h2, out=g3w)
    da = dz[:, :, None] * w3                                               # (c, B, 64): d loss / d h2
    h2 *= h2
    np.subtract(1, h2, out=h2)
    da *= h2                                                               # d loss / d (pre-tanh of layer 2)
    np.sum(da, axis=1, out=g2b)
    np.matmul(da.transpose(0, 2, 1), h1, out=g2w)
    da = np.matmul(da, w2)                                                 # d loss / d h1
    h1 *= h1
    np.subtract(1, h1, out=h1)
    da *= h1
    np.sum(da, axis=1, out=g1b)
    np.matmul(da.transpose(0, 2, 1), pairs, out=g1w)


def adamw_step(layout: Layout, opt: OptimiserSettings, params: torch.Tensor, exp_avg: torch.Tensor,
               exp_avg_sq: torch.Tensor, step: int, pairs, labels, grad: torch.Tensor | None = None) -> None:
    """One training step of every device in place: loss on its minibatch ``pairs`` (c, B, 15), gradient,
    per-device clipping of the global norm, AdamW update (``step`` counts from 1). ``params`` and both moments
    are float32 (c, P) CPU tensors; ``grad``: a (c, P) scratch tensor to reuse."""
    grad = torch.empty_like(params) if grad is None else grad
    gradients(layout, params.numpy(), np.asarray(pairs, dtype=np.float32), np.asarray(labels, dtype=np.float32),
              grad.numpy())
    norm = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
    grad.mul_(torch.clamp(opt.max_grad_norm / (norm + CLIP_EPS), max=1.0))
    # torch's own AdamW (the bundle's optimiser is held to it), fused: one pass over the parameters
    adamw([params], [grad], [exp_avg], [exp_avg_sq], [], [torch.tensor(float(step - 1))], fused=True,
          amsgrad=False, beta1=opt.beta1, beta2=opt.beta2, lr=opt.learning_rate, weight_decay=opt.weight_decay,
          eps=opt.eps, maximize=False)


SCORE_GROUP = 16
"""Devices scored together, on blocks of :data:`SCORE_BLOCK` pairs."""
SCORE_BLOCK = 564
"""Pairs scored together (4,512 / 8): a group's hidden activations (16 × 564 × 64 floats, 2.3 MB) stay in the
caches."""


def probabilities(layout: Layout, params, pairs) -> np.ndarray:
    """float32 (c, B): D(s, a) = sigmoid(logit) of every device (``params`` float32 (c, P)) on the shared
    ``pairs`` (B, 15) — the forward graph of :func:`logits`, in place, :data:`SCORE_GROUP` devices and
    :data:`SCORE_BLOCK` pairs at a time (scoring is half of a round's work). Each device's scores depend on
    its own parameters only, bit for bit (tested)."""
    params = np.asarray(params, dtype=np.float32)
    pairs = np.ascontiguousarray(pairs, dtype=np.float32)
    # a round's generated days repeat (state, action) pairs (days resting at home: ~14% of real days' pairs):
    # each distinct pair is scored once and its score copied to its repeats
    distinct, where = np.unique(pairs, axis=0, return_inverse=True)
    if len(distinct) < len(pairs):
        return _distinct_probabilities(layout, params, distinct)[:, where.reshape(-1)]
    return _distinct_probabilities(layout, params, pairs)


def _distinct_probabilities(layout: Layout, params: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    c, b = params.shape[0], pairs.shape[0]
    out = np.empty((c, b), dtype=np.float32)
    g_max, p_max = min(SCORE_GROUP, c), min(SCORE_BLOCK, b)
    h1 = np.empty((g_max, p_max, layout.slices["fc1.bias"][2][0]), dtype=np.float32)
    h2 = np.empty_like(h1)
    z = np.empty((g_max, p_max, 1), dtype=np.float32)
    for g in range(0, c, SCORE_GROUP):
        w1, b1, w2, b2, w3, b3 = layout.arrays(params[g:g + SCORE_GROUP])
        n = w1.shape[0]
        for p in range(0, b, SCORE_BLOCK):
            q = min(b, p + SCORE_BLOCK) - p
            a1, a2, zz = h1[:n, :q], h2[:n, :q], z[:n, :q]
            np.matmul(pairs[p:p + q], w1.transpose(0, 2, 1), out=a1)
            a1 += b1[:, None, :]
            np.matmul(_tanh_(a1), w2.transpose(0, 2, 1), out=a2)
            a2 += b2[:, None, :]
            np.matmul(_tanh_(a2), w3.transpose(0, 2, 1), out=zz)
            np.add(zz[..., 0], b3, out=out[g:g + n, p:p + q])
    # σ in place as (1 + tanh(z / 2)) / 2: numpy's SIMD tanh gives an element the same bits wherever it sits
    # (torch's sigmoid rounds the tail of an array differently), so a device scores alike in any group
    out *= 0.5
    np.tanh(out, out=out)
    out *= 0.5
    out += 0.5
    return out
