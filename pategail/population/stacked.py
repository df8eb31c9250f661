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


def logits(layout: Layout, flat: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """(c, B) logits of the stacked discriminators ``flat`` (c, P) on ``pairs``: (c, B, 15) per device or
    (B, 15) shared by all — the forward graph tanh(fc1) → tanh(fc2) → out."""
    w1, b1 = layout.view(flat, "fc1.weight"), layout.view(flat, "fc1.bias")
    w2, b2 = layout.view(flat, "fc2.weight"), layout.view(flat, "fc2.bias")
    w3, b3 = layout.view(flat, "out.weight"), layout.view(flat, "out.bias")
    h = torch.tanh(torch.matmul(pairs, w1.transpose(1, 2)) + b1[:, None, :])
    h = torch.tanh(torch.matmul(h, w2.transpose(1, 2)) + b2[:, None, :])
    return torch.matmul(h, w3.transpose(1, 2))[..., 0] + b3


def stable_bce(logit: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(c,) each device's mean relu(x) − x·t + log(1 + exp(−|x|)) (the training model's loss block)."""
    return (torch.relu(logit) - logit * labels + torch.log(1 + torch.exp(-torch.abs(logit)))).mean(-1)


def adamw_step(layout: Layout, opt: OptimiserSettings, params: torch.Tensor, exp_avg: torch.Tensor,
               exp_avg_sq: torch.Tensor, step: int, pairs: torch.Tensor, labels: torch.Tensor) -> None:
    """One training step of every device in place: loss on its minibatch ``pairs`` (c, B, 15), gradient,
    per-device clipping of the global norm, AdamW update (``step`` counts from 1)."""
    flat = params.detach().requires_grad_(True)
    loss = stable_bce(logits(layout, flat, pairs), labels).sum()      # devices are independent: Σ of their losses
    (grad,) = torch.autograd.grad(loss, flat)
    with torch.no_grad():
        norm = torch.linalg.vector_norm(grad, dim=1, keepdim=True)
        grad = grad * torch.clamp(opt.max_grad_norm / (norm + CLIP_EPS), max=1.0)
        params.mul_(1 - opt.learning_rate * opt.weight_decay)
        exp_avg.lerp_(grad, 1 - opt.beta1)
        exp_avg_sq.mul_(opt.beta2).addcmul_(grad, grad, value=1 - opt.beta2)
        bias1, bias2 = 1 - opt.beta1 ** step, 1 - opt.beta2 ** step
        denom = (exp_avg_sq.sqrt() / np.sqrt(bias2)).add_(opt.eps)
        params.addcdiv_(exp_avg, denom, value=-opt.learning_rate / bias1)


SCORE_GROUP = 8
"""Devices scored together: their hidden activations (8 × B × 64 floats, 9 MB for B = 4,512) stay in cache."""


def probabilities(layout: Layout, params: torch.Tensor, pairs: torch.Tensor) -> np.ndarray:
    """float32 (c, B): D(s, a) = sigmoid(logit) of every device on the shared ``pairs`` (B, 15) — the
    forward graph of :func:`logits`, in place and in groups of :data:`SCORE_GROUP` devices (scoring is most
    of a round's work)."""
    out = np.empty((params.shape[0], pairs.shape[0]), dtype=np.float32)
    with torch.no_grad():
        for g in range(0, params.shape[0], SCORE_GROUP):
            flat = params[g:g + SCORE_GROUP]
            w1, b1 = layout.view(flat, "fc1.weight"), layout.view(flat, "fc1.bias")
            w2, b2 = layout.view(flat, "fc2.weight"), layout.view(flat, "fc2.bias")
            w3, b3 = layout.view(flat, "out.weight"), layout.view(flat, "out.bias")
            h = torch.matmul(pairs, w1.transpose(1, 2)).add_(b1[:, None, :]).tanh_()
            h = torch.matmul(h, w2.transpose(1, 2)).add_(b2[:, None, :]).tanh_()
            logit = torch.matmul(h, w3.transpose(1, 2))[..., 0].add_(b3)
            out[g:g + SCORE_GROUP] = logit.sigmoid_().numpy()
    return out
