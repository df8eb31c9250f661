"""The global policy π_θ(a | s) and its value head: a causal self-attention transformer over the day so far.

Each slot t is one token: the embedding of its cell l_t, a learned embedding of the slot index t, and a
projection of the EPR state features of :func:`pategail.sdk.features.state_features` (at home, km from home,
dwell, distinct cells so far, …) — the quantities the EPR decision depends on, which attention over cell
ids alone would have to rediscover. Token t attends to tokens ≤ t only, so the outputs at slot t depend on
slots 0..t only (the original code attended over a sequence of length 1 and never saw the history).

Attention is written by hand (Linear q/k/v, softmax with an additive causal mask sliced from a constant
buffer) because that exports to ONNX as plain MatMul/Softmax ops that every runtime has, unlike
``nn.TransformerEncoder``'s fused paths. The policy returns raw logits; invalid actions
(:func:`pategail.sdk.features.action_mask`) are removed by :func:`masked_log_probs`, which the ONNX
inference model also applies, so devices and PPO sample from the same distribution.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from pategail.sdk.features import N_ACTIONS, N_STATE_FEATURES, SLOTS, STATE_FEATURES

DISTINCT_FEATURE = STATE_FEATURES.index("distinct")
"""Column of the state features that holds "distinct cells so far" / SLOTS."""

MASKED_LOGIT = -1e9
"""Logit given to impossible actions. Finite on purpose: its probability underflows to exactly 0, yet
p·log p stays 0 (not NaN) in PPO's entropy, and exported graphs carry no infinities."""


@dataclass(frozen=True)
class PolicyConfig:
    """Shape of the policy transformer. Defaults give ≈ 0.2 M parameters besides the cell table: small
    enough that a phone generates 1,000 days in seconds (BENCHMARKS.md)."""

    n_cells: int
    """Number of cells (rows of the cell table); cell ids are 0..n_cells-1."""
    d_model: int = 64
    """Token width."""
    n_heads: int = 4
    """Attention heads; must divide d_model."""
    n_layers: int = 2
    """Transformer blocks (pre-LayerNorm: attention + MLP, each residual)."""
    cell_dim: int = 32
    """Width of the cell embedding before its projection to d_model; keeps the table at n_cells × 32."""
    d_ff: int = 128
    """Hidden width of each block's MLP."""
    max_slots: int = SLOTS
    """Longest day (tokens); the slot embedding has this many rows."""
    dropout: float = 0.0
    """Dropout in attention and MLP. 0: PPO's ratio needs the same network at sampling and update time."""
    distinct_embedding: bool = False
    """Add a learned embedding of the exact number of distinct cells visited so far (0..max_slots, read from
    the "distinct" state feature) to each token, as the slot index is. The feature itself enters as count / 48
    through one linear map, so a 4th and a 5th cell differ by 0.02 at the input: the policy could not make
    "explore" depend on the count (π(explore | k) stayed flat at 0.03–0.04 for k = 3..6 on the sparse city,
    where real days never explore at k = 4). Its own row per count lets it (BENCHMARKS.md, issue 19, session
    3). Zero-initialised, so the initial policy equals the one without it. False keeps older policies'
    parameters."""

    def __post_init__(self):
        if self.n_cells < 1:
            raise ValueError("n_cells must be >= 1")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError("d_model must be a positive multiple of n_heads")
        if self.n_layers < 1 or self.cell_dim < 1 or self.d_ff < 1 or self.max_slots < 1:
            raise ValueError("n_layers, cell_dim, d_ff and max_slots must be >= 1")
        if not 0 <= self.dropout < 1:
            raise ValueError("dropout must be in [0, 1)")


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where token t sees tokens ≤ t."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.d_model = config.d_model
        self.n_heads = config.n_heads
        self.head_dim = config.d_model // config.n_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.proj = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        # additive mask: 0 on and below the diagonal, MASKED_LOGIT above; sliced to (T, T) at run time
        tril = torch.tril(torch.ones(config.max_slots, config.max_slots, dtype=torch.bool))
        self.register_buffer("causal_bias", torch.where(tril, 0.0, MASKED_LOGIT), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        return self._attend(q, k, v, self.causal_bias[:x.shape[1], :x.shape[1]])

    def forward_cached(self, x: torch.Tensor, past_key: torch.Tensor, past_value: torch.Tensor):
        """Attention of T new tokens at positions P..P+T-1 over the P cached ones and themselves.

        past_key, past_value: (B, heads, P, head_dim), P >= 0. Returns (output (B, T, D), key and value of
        positions 0..P+T-1, the cache for the next call). Equals rows P.. of :meth:`forward` on the whole
        sequence: the keys and values of earlier tokens do not depend on later ones.
        """
        P, T = past_key.shape[2], x.shape[1]
        q, k, v = self._heads(x)
        k, v = torch.cat([past_key, k], dim=2), torch.cat([past_value, v], dim=2)
        return self._attend(q, k, v, self.causal_bias[P:P + T, :P + T]), k, v

    def _heads(self, x: torch.Tensor):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).split(self.d_model, dim=-1)
        return tuple(z.reshape(B, T, self.n_heads, self.head_dim).transpose(1, 2) for z in (q, k, v))

    def _attend(self, q, k, v, bias) -> torch.Tensor:
        B, _, T, _ = q.shape
        scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(self.head_dim)) + bias
        att = self.dropout(torch.softmax(scores, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(B, T, self.d_model)
        return self.proj(y)


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(),
                                 nn.Linear(config.d_ff, config.d_model), nn.Dropout(config.dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def forward_cached(self, x: torch.Tensor, past_key: torch.Tensor, past_value: torch.Tensor):
        """:meth:`forward` for new tokens after a cache (see :meth:`CausalSelfAttention.forward_cached`)."""
        h, key, value = self.attn.forward_cached(self.ln1(x), past_key, past_value)
        x = x + h
        return x + self.mlp(self.ln2(x)), key, value


class Policy(nn.Module):
    """π_θ(a | s_t) and V(s_t) for every slot t of a batch of (partial) days.

    forward(cells int64 (B, T), features float32 (B, T, 11)) → (logits float32 (B, T, 4), values (B, T));
    T ≤ ``config.max_slots``; row t depends on slots 0..t only. Logits are unmasked: see
    :func:`masked_log_probs`.
    """

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.config = config
        self.cell_embedding = nn.Embedding(config.n_cells, config.cell_dim)
        self.cell_proj = nn.Linear(config.cell_dim, config.d_model)
        self.feature_proj = nn.Linear(N_STATE_FEATURES, config.d_model)
        self.slot_embedding = nn.Embedding(config.max_slots, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.action_head = nn.Linear(config.d_model, N_ACTIONS)
        self.value_head = nn.Linear(config.d_model, 1)
        self.apply(_init_weights)
        # near-uniform initial policy and zero initial values: PPO starts from maximum entropy
        nn.init.normal_(self.action_head.weight, std=0.01)
        nn.init.zeros_(self.value_head.weight)
        if config.distinct_embedding:
            # made last and zeroed: every other weight is drawn as without it, so the initial policies agree
            self.distinct_embedding = nn.Embedding(config.max_slots + 1, config.d_model)
            nn.init.zeros_(self.distinct_embedding.weight)

    def _tokens(self, cells: torch.Tensor, features: torch.Tensor, first_slot: int) -> torch.Tensor:
        """The input tokens of slots first_slot.. (cells (B, T), features (B, T, F)) → (B, T, d_model)."""
        T = cells.shape[1]
        x = self.cell_proj(self.cell_embedding(cells)) + self.feature_proj(features) \
            + self.slot_embedding.weight[first_slot:first_slot + T]
        if self.config.distinct_embedding:
            count = torch.round(features[..., DISTINCT_FEATURE] * SLOTS).clamp(0, self.config.max_slots)
            x = x + self.distinct_embedding(count.to(torch.int64))
        return x

    def forward(self, cells: torch.Tensor, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self._tokens(cells, features, 0)
        for block in self.blocks:
            x = block(x)
        x = self.ln_f(x)
        return self.action_head(x), self.value_head(x).squeeze(-1)

    def forward_cached(self, cells: torch.Tensor, features: torch.Tensor, past: Sequence[torch.Tensor]):
        """Incremental decoding: :meth:`forward` for the T new slots P..P+T-1 of days whose slots 0..P-1 are
        summarised by ``past``, the key/value cache — [key_0, value_0, key_1, value_1, ...], one pair per
        layer, each (B, n_heads, P, d_model / n_heads); P = 0 (empty tensors) at the start of a day.

        Returns (logits (B, T, 4), values (B, T), present): ``present`` is the cache of slots 0..P+T-1 in the
        same layout. Equal to rows P.. of ``forward`` on the whole prefix up to float rounding (tested to
        1e-5), at a cost per slot that does not grow with the prefix's length (except the attention itself).
        """
        x = self._tokens(cells, features, past[0].shape[2])
        present = []
        for i, block in enumerate(self.blocks):
            x, key, value = block.forward_cached(x, past[2 * i], past[2 * i + 1])
            present += [key, value]
        x = self.ln_f(x)
        return self.action_head(x), self.value_head(x).squeeze(-1), present

    def empty_cache(self, batch: int) -> list[torch.Tensor]:
        """The key/value cache of days with no slot yet (P = 0), for :meth:`forward_cached`."""
        c = self.config
        shape = (batch, c.n_heads, 0, c.d_model // c.n_heads)
        return [torch.zeros(shape) for _ in range(2 * c.n_layers)]

    @property
    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def _init_weights(module: nn.Module) -> None:
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, std=0.02)
        nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, std=0.02)


def masked_log_probs(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log π(a | s) over the possible actions: log_softmax of ``logits`` with impossible actions
    (``mask`` False) set to :data:`MASKED_LOGIT`, so their probability is exactly 0.

    logits float (..., 4), mask bool (..., 4) from ``action_mask`` (at least one True per row: stay always
    is). The ONNX policy model computes the same thing.
    """
    return torch.log_softmax(torch.where(mask, logits, torch.full_like(logits, MASKED_LOGIT)), dim=-1)


class PolicyInference(nn.Module):
    """The graph devices run: (cells, features, mask) → (log_probs, logits, values); see
    :mod:`pategail.export.onnx_policy`."""

    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = policy

    def forward(self, cells: torch.Tensor, features: torch.Tensor, mask: torch.Tensor):
        logits, values = self.policy(cells, features)
        return masked_log_probs(logits, mask), logits, values


class PolicyStepInference(nn.Module):
    """The incremental graph: (cells, features, mask, *past) → (log_probs, logits, values, *present), the
    cache layout of :meth:`Policy.forward_cached`; see :mod:`pategail.export.onnx_policy`."""

    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = policy

    def forward(self, cells: torch.Tensor, features: torch.Tensor, mask: torch.Tensor, *past: torch.Tensor):
        logits, values, present = self.policy.forward_cached(cells, features, list(past))
        return (masked_log_probs(logits, mask), logits, values, *present)


def save_policy(policy: Policy, path) -> None:
    """Write ``{"config": PolicyConfig fields, "state_dict": ...}`` with torch.save (read by load_policy)."""
    import dataclasses

    torch.save({"config": dataclasses.asdict(policy.config), "state_dict": policy.state_dict()}, path)


def load_policy(path) -> Policy:
    """The policy written by :func:`save_policy` (weights_only: a checkpoint cannot run code)."""
    blob = torch.load(path, map_location="cpu", weights_only=True)
    policy = Policy(PolicyConfig(**blob["config"]))
    policy.load_state_dict(blob["state_dict"])
    return policy
