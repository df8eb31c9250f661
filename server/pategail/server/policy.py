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

from pategail.sdk.features import N_ACTIONS, N_STATE_FEATURES, SLOTS


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

    def __post_init__(self):
        if self.n_cells < 1:
            raise ValueError("n_cells must be >= 1")
        if self.d_model < 1 or self.n_heads < 1 or self.d_model % self.n_heads:
            raise ValueError("d_model must be a positive multiple of n_heads")
        if self.n_layers < 1 or self.cell_dim < 1 or self.d_ff < 1 or self.max_slots < 1:
            raise ValueError("n_layers, cell_dim, d_ff and max_slots must be >= 1")
        if not 0 <= self.dropout < 1:
            raise ValueError("dropout must be in [0, 1)")


def filled_rows_bias(capacity: int, slot: torch.Tensor) -> torch.Tensor:
    """float (capacity,): 0 for the cache rows < ``slot`` (filled), :data:`MASKED_LOGIT` for the rest."""
    return torch.where(torch.arange(capacity) < slot, 0.0, MASKED_LOGIT)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention where token t sees tokens ≤ t."""

    causal_bias: torch.Tensor
    """A buffer (registered in ``__init__``)."""

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

    def forward_step(self, x: torch.Tensor, slot: torch.Tensor, key_buffer: torch.Tensor,
                     value_buffer: torch.Tensor):
        """Attention of T new tokens at positions slot..slot+T-1 over fixed-length cache buffers.

        key_buffer, value_buffer: (B, heads, S, head_dim) whose rows < ``slot`` hold the keys and values of
        the earlier tokens; rows >= ``slot`` are ignored (masked, their weight exactly 0) but must be finite.
        Returns (output (B, T, D), the new tokens' keys and values (B, heads, T, head_dim)) — the caller writes
        them into rows slot..slot+T-1, so the cache is never copied (concatenating it cost more than the
        attention itself, BENCHMARKS.md). Equals :meth:`forward_cached` up to float rounding.
        """
        B, T, S = x.shape[0], x.shape[1], key_buffer.shape[2]
        q, k, v = self._heads(x)
        q = q * (1.0 / math.sqrt(self.head_dim))
        past = q @ key_buffer.transpose(-2, -1) + filled_rows_bias(S, slot)                 # (B, h, T, S)
        new = (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1) + self.causal_bias[:T, :T]         # (B, h, T, T)
        p_past, p_new = torch.split(torch.softmax(torch.cat([past, new], dim=-1), dim=-1), [S, T], dim=-1)
        y = self.dropout(p_past) @ value_buffer + (self.dropout(p_new).unsqueeze(-1) * v.unsqueeze(2)).sum(3)
        return self.proj(y.transpose(1, 2).reshape(B, T, self.d_model)), k, v

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

    def forward_step(self, x: torch.Tensor, slot: torch.Tensor, key_buffer: torch.Tensor,
                     value_buffer: torch.Tensor):
        """:meth:`forward` for new tokens over cache buffers (see :meth:`CausalSelfAttention.forward_step`)."""
        h, key, value = self.attn.forward_step(self.ln1(x), slot, key_buffer, value_buffer)
        x = x + h
        return x + self.mlp(self.ln2(x)), key, value


class Policy(nn.Module):
    """π_θ(a | s_t) and V(s_t) for every slot t of a batch of (partial) days.

    forward(cells int64 (B, T), features float32 (B, T, 11)) → (logits float32 (B, T, 4), values (B, T));
    T ≤ ``config.max_slots``; row t depends on slots 0..t only. Logits are unmasked: see
    :func:`masked_log_probs`.
    """

    blocks: Sequence[Block]
    """An ``nn.ModuleList`` of the transformer's blocks."""

    def __init__(self, config: PolicyConfig):
        super().__init__()
        self.config = config
        self.cell_embedding = nn.Embedding(config.n_cells, config.cell_dim)
        self.cell_proj = nn.Linear(config.cell_dim, config.d_model)
        self.feature_proj = nn.Linear(N_STATE_FEATURES, config.d_model)
        self.slot_embedding = nn.Embedding(config.max_slots, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layers))  # type: ignore[assignment]
        self.ln_f = nn.LayerNorm(config.d_model)
        self.action_head = nn.Linear(config.d_model, N_ACTIONS)
        self.value_head = nn.Linear(config.d_model, 1)
        self.apply(_init_weights)
        # near-uniform initial policy and zero initial values: PPO starts from maximum entropy
        nn.init.normal_(self.action_head.weight, std=0.01)
        nn.init.zeros_(self.value_head.weight)

    def _tokens(self, cells: torch.Tensor, features: torch.Tensor, first_slot: int) -> torch.Tensor:
        """The input tokens of slots first_slot.. (cells (B, T), features (B, T, F)) → (B, T, d_model)."""
        T = cells.shape[1]
        x = self.cell_proj(self.cell_embedding(cells)) + self.feature_proj(features) \
            + self.slot_embedding.weight[first_slot:first_slot + T]
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

    def forward_step(self, cells: torch.Tensor, features: torch.Tensor, slot: torch.Tensor,
                     buffers: Sequence[torch.Tensor]):
        """Incremental decoding over fixed-length cache buffers (what ``policy_step.onnx`` computes): the T
        new slots slot..slot+T-1 of days whose earlier slots' keys and values are rows < ``slot`` of
        ``buffers`` — [key_0, value_0, key_1, ...], each (B, n_heads, S, d_model / n_heads) with S >= slot
        (rows at and after ``slot`` are ignored but must be finite: zeros, or an earlier day's).

        ``slot``: int64 scalar tensor. Returns (logits (B, T, 4), values (B, T), new): ``new`` holds the new
        slots' keys and values (B, n_heads, T, head_dim), in the order of ``buffers``, for the caller to write
        into rows slot..slot+T-1. Equal to :meth:`forward_cached` up to float rounding (tested to 1e-5).
        """
        T = cells.shape[1]
        x = self.cell_proj(self.cell_embedding(cells)) + self.feature_proj(features) \
            + self.slot_embedding(slot + torch.arange(T))
        new = []
        for i, block in enumerate(self.blocks):
            x, key, value = block.forward_step(x, slot, buffers[2 * i], buffers[2 * i + 1])
            new += [key, value]
        x = self.ln_f(x)
        return self.action_head(x), self.value_head(x).squeeze(-1), new

    def empty_buffers(self, batch: int, capacity: int | None = None) -> list[torch.Tensor]:
        """Zeroed cache buffers of ``capacity`` slots (default ``max_slots``) for :meth:`forward_step`."""
        c = self.config
        shape = (batch, c.n_heads, capacity or c.max_slots, c.d_model // c.n_heads)
        return [torch.zeros(shape) for _ in range(2 * c.n_layers)]

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


def with_scaled_queries(policy: Policy) -> Policy:
    """A copy of ``policy`` whose attention query weights and biases carry the 1/sqrt(head_dim) factor (the
    same function up to float rounding; exact when head_dim is a power of 4, as the default 16)."""
    import copy

    scaled = copy.deepcopy(policy)
    with torch.no_grad():
        for block in scaled.blocks:
            d, factor = block.attn.d_model, 1.0 / math.sqrt(block.attn.head_dim)
            block.attn.qkv.weight[:d] *= factor
            block.attn.qkv.bias[:d] *= factor
    return scaled


class PolicyStepInference(nn.Module):
    """The incremental graph, one slot a call: (cells (B, 1), features (B, 1, 11), mask (B, 1, 4), slot,
    *buffers) → (log_probs (B, 1, 4), logits, values (B, 1), *new) — :meth:`Policy.forward_step` for T = 1,
    written for ONNX Runtime's fast paths (see :mod:`pategail.export.onnx_policy`):

    - tokens are (B, d_model) rows, so every Linear is one Gemm with its bias and the heads are a reshape;
    - the cell embedding and its projection are one table (n_cells, d_model), gathered;
    - the 1/sqrt(head_dim) factor is in the query weights (:func:`with_scaled_queries`): a scaled MatMul
      leaves the one-row kernel that the q·K products of B × heads days run on;
    - the new slot's own score is one (B·heads, head_dim) × (head_dim, 1) product.
    """

    cell_table: torch.Tensor
    ones: torch.Tensor
    """Buffers (registered in ``__init__``)."""

    def __init__(self, policy: Policy):
        super().__init__()
        self.policy = with_scaled_queries(policy)
        with torch.no_grad():
            self.register_buffer("cell_table", policy.cell_proj(policy.cell_embedding.weight).detach().clone())
        head_dim = policy.config.d_model // policy.config.n_heads
        self.register_buffer("ones", torch.ones(head_dim, 1))

    def forward(self, cells: torch.Tensor, features: torch.Tensor, mask: torch.Tensor, slot: torch.Tensor,
                *buffers: torch.Tensor):
        p = self.policy
        B, D = cells.shape[0], p.config.d_model
        H, hd = p.config.n_heads, D // p.config.n_heads
        x = self.cell_table[cells[:, 0]] + p.feature_proj(features[:, 0]) + p.slot_embedding.weight[slot]
        new = []
        for i, block in enumerate(p.blocks):
            key_buffer, value_buffer = buffers[2 * i], buffers[2 * i + 1]
            q, k, v = (z.reshape(B, H, 1, hd) for z in block.attn.qkv(block.ln1(x)).split(D, dim=-1))
            S = key_buffer.shape[2]
            past = q @ key_buffer.transpose(-2, -1) + filled_rows_bias(S, slot)             # (B, h, 1, S)
            own = (q * k) @ self.ones                                                      # (B, h, 1, 1)
            p_past, p_own = torch.split(torch.softmax(torch.cat([past, own], dim=-1), dim=-1), [S, 1], dim=-1)
            x = x + block.attn.proj((p_past @ value_buffer + p_own * v).reshape(B, D))
            x = x + block.mlp(block.ln2(x))
            new += [k, v]
        x = p.ln_f(x)
        logits = p.action_head(x)
        return (masked_log_probs(logits, mask[:, 0])[:, None], logits[:, None], p.value_head(x), *new)


class PolicyConcatStepInference(nn.Module):
    """The first incremental graph (the first bundles that cached keys and values): (cells, features, mask, *past) →
    (log_probs, logits, values, *present), the growing cache of :meth:`Policy.forward_cached`; kept so that
    the SDK's support of those bundles stays tested."""

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
    import dataclasses

    from pategail.server.errors import PategailError

    blob = torch.load(path, map_location="cpu", weights_only=True)
    unknown = set(blob["config"]) - {f.name for f in dataclasses.fields(PolicyConfig)}
    if unknown:
        raise PategailError(f"{path}: a policy of another version of pategail (its setting(s) "
                            f"{', '.join(sorted(unknown))} no longer exist); export it with that version")
    policy = Policy(PolicyConfig(**blob["config"]))
    policy.load_state_dict(blob["state_dict"])
    return policy
