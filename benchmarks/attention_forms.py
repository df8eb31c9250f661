"""The incremental policy model's one-query attention without MatMul: CPU time of the exported step model
against rewrites of its attention as a few large element-wise kernels (issue 17, session 6).

Today's ``policy_step.onnx`` computes each slot's attention as batched one-row MatMuls (q·Kᵀ and p·V for
each of batch × heads (day, head) pairs: 16,000 tiny products a slot), which ONNX Runtime runs at ~0.18 µs
each. The forms here compute the same function with Mul + ReduceSum (or a small indicator Gemm that sums a
head's 16 products), in several cache layouts:

- ``mulsum``: the same buffers (B, H, S, hd); scores ReduceSum(Mul(q, K), -1), context ReduceSum(Mul(p, V), 2);
- ``transposed``: keys and values cached as (B, H, hd, S), so both reductions keep S contiguous;
- ``slotmajor``: buffers (B, S, D), a day's slot row is D contiguous floats, heads summed after a reshape;
- ``seqmajor``: buffers (S, B, D) fed as the filled rows only (a contiguous view ``[:max(slot, 1)]``: no
  masked rows read), the head sums as one (S·B, D) × (D, H) Gemm with an indicator matrix, the softmax over
  the leading axis by hand, the context as a broadcast Mul and a leading-axis ReduceSum; its new rows are one
  contiguous block, so the caller's cache writes are cheaper (timed separately below);
- ``blockdiag``: buffers (B, S, D), all heads in one product a day: K (S, D) × blockdiag(q) (D, H), and
  pᵀ (H, S) × V (S, D) whose diagonal blocks are the heads' contexts (1,000 products of 4 rows).

Same weights (one untrained default policy over pategail-geolife's 4,210 cells), synthetic inputs, 47 slots of
``--batch`` days, one ONNX Runtime thread; the forms are run in ABBA order (``--reps`` rounds of A..Z, Z..A) and
timed in CPU seconds of this process. Each form's outputs are checked against today's model first.

Run: OMP_NUM_THREADS=1 nice -n 5 taskset -c 0 python benchmarks/attention_forms.py [--forms matmul,seqmajor]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import onnxruntime as ort
import torch

from pategail.export.onnx_policy import (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS, OUTPUT_LOGITS,
                                         OUTPUT_VALUES, _export_step, export_policy_step_onnx)
from pategail.sdk.decoding import POLICY_INPUT_SLOT, cache_names, new_names
from pategail.sdk.features import N_ACTIONS, N_STATE_FEATURES
from pategail.server.policy import Policy, PolicyConfig, PolicyStepInference, filled_rows_bias, masked_log_probs

CAPACITY = 47


class _Form(PolicyStepInference):
    """:class:`PolicyStepInference` with the attention of :meth:`attend` (the rest of the graph unchanged)."""

    def __init__(self, policy: Policy):
        super().__init__(policy)
        c = policy.config
        self.H, self.D = c.n_heads, c.d_model
        self.hd = self.D // self.H
        self.register_buffer("heads", torch.repeat_interleave(torch.eye(self.H), self.hd, dim=0))   # (D, H)

    def forward(self, cells, features, mask, slot, *buffers):
        p = self.policy
        x = self.cell_table[cells[:, 0]] + p.feature_proj(features[:, 0]) + p.slot_embedding.weight[slot]
        new = []
        for i, block in enumerate(p.blocks):
            q, k, v = block.attn.qkv(block.ln1(x)).split(self.D, dim=-1)          # (B, D) each
            ctx, k, v = self.attend(q, k, v, slot, buffers[2 * i], buffers[2 * i + 1])
            x = x + block.attn.proj(ctx)
            x = x + block.mlp(block.ln2(x))
            new += [k, v]
        x = p.ln_f(x)
        logits = p.action_head(x)
        return (masked_log_probs(logits, mask[:, 0])[:, None], logits[:, None], p.value_head(x), *new)


class MulSum(_Form):
    layout = "BHSd"

    def attend(self, q, k, v, slot, K, V):
        B, H, hd, S = q.shape[0], self.H, self.hd, K.shape[2]
        q, k, v = (z.reshape(B, H, 1, hd) for z in (q, k, v))
        past = (q * K).sum(-1) + filled_rows_bias(S, slot)                      # (B, H, S)
        p_past, p_own = torch.split(torch.softmax(torch.cat([past, (q * k).sum(-1)], -1), -1), [S, 1], -1)
        ctx = (p_past.unsqueeze(-1) * V).sum(2) + p_own * v[:, :, 0]             # (B, H, hd)
        return ctx.reshape(B, self.D), k, v


class Transposed(_Form):
    layout = "BHdS"

    def attend(self, q, k, v, slot, K, V):
        B, H, hd, S = q.shape[0], self.H, self.hd, K.shape[3]
        q, k, v = (z.reshape(B, H, hd, 1) for z in (q, k, v))
        past = (q * K).sum(2) + filled_rows_bias(S, slot)                       # (B, H, S)
        p_past, p_own = torch.split(torch.softmax(torch.cat([past, (q * k).sum(2)], -1), -1), [S, 1], -1)
        ctx = (p_past.unsqueeze(2) * V).sum(-1) + p_own * v[..., 0]              # (B, H, hd)
        return ctx.reshape(B, self.D), k, v


class SlotMajor(_Form):
    layout = "BSD"

    def attend(self, q, k, v, slot, K, V):
        B, H, hd, S = q.shape[0], self.H, self.hd, K.shape[1]
        past = (q[:, None] * K).reshape(B, S, H, hd).sum(-1) + filled_rows_bias(S, slot)[:, None]   # (B, S, H)
        own = (q * k).reshape(B, 1, H, hd).sum(-1)
        p_past, p_own = torch.split(torch.softmax(torch.cat([past, own], 1), 1), [S, 1], 1)
        ctx = (p_past.unsqueeze(-1) * V.reshape(B, S, H, hd)).sum(1) + p_own[:, 0, :, None] * v.reshape(B, H, hd)
        return ctx.reshape(B, self.D), k[:, None], v[:, None]


class SeqMajor(_Form):
    layout = "SBD"

    def attend(self, q, k, v, slot, K, V):
        B, H, hd, S = q.shape[0], self.H, self.hd, K.shape[0]
        past = (q * K) @ self.heads + filled_rows_bias(S, slot)[:, None, None]      # (S, B, H)
        own = (q * k) @ self.heads                                                 # (B, H)
        top = torch.maximum(past.amax(0), own)
        e_past, e_own = torch.exp(past - top), torch.exp(own - top)
        r = 1.0 / (e_past.sum(0) + e_own)
        ctx = ((e_past * r)[..., None] * V.reshape(S, B, H, hd)).sum(0) + (e_own * r)[..., None] * v.reshape(B, H, hd)
        return ctx.reshape(B, self.D), k[None], v[None]


class BlockDiag(_Form):
    layout = "BSD"

    def attend(self, q, k, v, slot, K, V):
        S = K.shape[1]
        past = K @ (q[:, :, None] * self.heads) + filled_rows_bias(S, slot)[:, None]   # (B, S, H)
        own = (q * k) @ self.heads
        p_past, p_own = torch.split(torch.softmax(torch.cat([past, own[:, None]], 1), 1), [S, 1], 1)
        ctx = ((p_past.transpose(1, 2) @ V) * self.heads.T).sum(1) + (p_own[:, 0] @ self.heads.T) * v
        return ctx, k[:, None], v[:, None]


FORMS = {"mulsum": MulSum, "transposed": Transposed, "slotmajor": SlotMajor, "seqmajor": SeqMajor,
         "blockdiag": BlockDiag}


def buffer_shape(layout: str, batch: int, capacity: int, H: int, hd: int) -> tuple[int, ...]:
    return {"BHSd": (batch, H, capacity, hd), "BHdS": (batch, H, hd, capacity), "BSD": (batch, capacity, H * hd),
            "SBD": (capacity, batch, H * hd)}[layout]


def from_today(layout: str, buf: np.ndarray) -> np.ndarray:
    """Today's (B, H, S, hd) buffer in ``layout`` (the same keys / values)."""
    B, H, S, hd = buf.shape
    out = {"BHSd": buf, "BHdS": buf.transpose(0, 1, 3, 2), "BSD": buf.transpose(0, 2, 1, 3).reshape(B, S, H * hd),
           "SBD": buf.transpose(2, 0, 1, 3).reshape(S, B, H * hd)}[layout]
    return np.ascontiguousarray(out)


def export_form(policy: Policy, form) -> bytes:
    c = policy.config
    H, hd, n = c.n_heads, c.d_model // c.n_heads, c.n_layers
    example = (torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, 1, N_STATE_FEATURES),
               torch.ones(2, 1, N_ACTIONS, dtype=torch.bool), torch.tensor(2, dtype=torch.int64),
               *(torch.zeros(buffer_shape(form.layout, 2, 4, H, hd)) for _ in range(2 * n)))
    batch_axis = 1 if form.layout == "SBD" else 0
    capacity_axis = {"BHSd": 2, "BHdS": 3, "BSD": 1, "SBD": 0}[form.layout]
    dynamic = {name: {0: "batch"} for name in (INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, OUTPUT_LOG_PROBS,
                                               OUTPUT_LOGITS, OUTPUT_VALUES)}
    dynamic.update({name: {batch_axis: "batch"} for name in new_names(n)})
    dynamic.update({name: {batch_axis: "batch", capacity_axis: "capacity"} for name in cache_names(n)})
    return _export_step(policy, form, example,
                        [INPUT_CELLS, INPUT_FEATURES, INPUT_MASK, POLICY_INPUT_SLOT, *cache_names(n)],
                        [OUTPUT_LOG_PROBS, OUTPUT_LOGITS, OUTPUT_VALUES, *new_names(n)], dynamic).SerializeToString()


def cache_writes(batch: int, H: int, hd: int, reps: int) -> dict:
    """CPU ms per 1,000 days of writing 47 slots' new rows into four buffers: today's strided rows of
    (B, H, S, hd) against seqmajor's one contiguous block of (S, B, D)."""
    g = np.random.default_rng(0)
    today = [np.zeros((batch, H, CAPACITY, hd), np.float32) for _ in range(4)]
    seq = [np.zeros((CAPACITY, batch, H * hd), np.float32) for _ in range(4)]
    new_today = [g.standard_normal((batch, H, 1, hd), dtype=np.float32) for _ in range(4)]
    new_seq = [g.standard_normal((1, batch, H * hd), dtype=np.float32) for _ in range(4)]

    def strided():
        for t in range(CAPACITY):
            for buf, rows in zip(today, new_today):
                buf[:, :, t] = rows[:, :, 0]

    def block():
        for t in range(CAPACITY):
            for buf, rows in zip(seq, new_seq):
                buf[t] = rows[0]

    spent = {"matmul (strided rows)": [], "seqmajor (one block)": []}
    for _ in range(reps + 1):
        for name, fn in zip(spent, (strided, block)):
            c0 = time.process_time()
            fn()
            spent[name].append((time.process_time() - c0) * 1e6 / batch)
    return {name: min(v[1:]) for name, v in spent.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--forms", default="matmul," + ",".join(FORMS), help="matmul (today) and any of " + ", ".join(FORMS))
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--reps", type=int, default=4, help="ABBA rounds (each times every form twice)")
    args = p.parse_args()
    names = [f.strip() for f in args.forms.split(",") if f.strip()]
    if not names or any(f != "matmul" and f not in FORMS for f in names):
        p.error(f"--forms: choose from matmul, {', '.join(FORMS)}")
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(n_cells=4210))
    c = policy.config
    H, hd, B = c.n_heads, c.d_model // c.n_heads, args.batch
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    g = np.random.default_rng(2)
    cells = [g.integers(0, c.n_cells, (B, 1)) for _ in range(CAPACITY)]
    features = [g.random((B, 1, N_STATE_FEATURES), dtype=np.float32) for _ in range(CAPACITY)]
    mask = np.ones((B, 1, N_ACTIONS), dtype=bool)
    today = [g.standard_normal((B, H, CAPACITY, hd), dtype=np.float32) for _ in range(2 * c.n_layers)]
    sessions, feeds = {}, {}
    for name in names:
        proto = export_policy_step_onnx(policy).SerializeToString() if name == "matmul" \
            else export_form(policy, FORMS[name])
        sessions[name] = ort.InferenceSession(proto, options, providers=["CPUExecutionProvider"])
        layout = "BHSd" if name == "matmul" else FORMS[name].layout
        buffers = [from_today(layout, b) for b in today]
        # seqmajor reads the filled rows only: a contiguous view (one row at slot 0, masked)
        view = (lambda b, t: b[:max(t, 1)]) if layout == "SBD" else (lambda b, t: b)
        feeds[name] = [{INPUT_CELLS: cells[t], INPUT_FEATURES: features[t], INPUT_MASK: mask,
                        POLICY_INPUT_SLOT: np.array(t, dtype=np.int64),
                        **{n: view(b, t) for n, b in zip(cache_names(c.n_layers), buffers)}}
                       for t in range(CAPACITY)]
    reference = export_policy_step_onnx(policy).SerializeToString()
    reference = ort.InferenceSession(reference, options, providers=["CPUExecutionProvider"])
    today_feeds = [{**f, **dict(zip(cache_names(c.n_layers), today))} for f in
                   ({INPUT_CELLS: cells[t], INPUT_FEATURES: features[t], INPUT_MASK: mask,
                     POLICY_INPUT_SLOT: np.array(t, dtype=np.int64)} for t in range(CAPACITY))]
    for name in names:
        worst = max(float(np.abs(reference.run([OUTPUT_LOG_PROBS], today_feeds[t])[0]
                                 - sessions[name].run([OUTPUT_LOG_PROBS], feeds[name][t])[0]).max())
                    for t in (0, 1, 5, 23, 46))
        print(f"{name:11s} max |Δ log_probs| vs today's model: {worst:.1e}")

    def one(name: str) -> float:
        c0 = time.process_time()
        for f in feeds[name]:
            sessions[name].run(None, f)
        return (time.process_time() - c0) * 1e6 / B

    for name in names:
        one(name)                                           # warm-up
    spent = {name: [] for name in names}
    load = [open("/proc/loadavg").read().split()[0]]
    for _ in range(args.reps):
        for name in names + names[::-1]:
            spent[name].append(one(name))
    load.append(open("/proc/loadavg").read().split()[0])
    print(f"\nCPU ms per 1,000 days, 47 slots of batch {B:,} (ABBA x {args.reps}; load {load[0]} -> {load[1]})")
    base = sorted(spent[names[0]])
    for name in names:
        r = sorted(spent[name])
        print(f"{name:11s} best {r[0]:5.0f}  median {r[len(r) // 2]:5.0f}  ({r[0] / base[0] - 1:+.0%} / "
              f"{r[len(r) // 2] / base[len(base) // 2] - 1:+.0%} vs {names[0]})")
    print("\ncache writes, CPU ms per 1,000 days:",
          ", ".join(f"{k} {v:.1f}" for k, v in cache_writes(B, H, hd, 3).items()))


if __name__ == "__main__":
    main()
