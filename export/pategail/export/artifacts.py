"""Discriminator → ONNX Runtime on-device training artifacts (training, eval, optimizer models, checkpoint)
and the inference model that returns the reward inputs.

Traps this module avoids (each measured):
- the legacy TorchScript exporter in TRAINING mode without constant folding keeps every ``state_dict`` name
  as an initializer and never merges equal-valued parameters (which would tie them during training);
- ``LossType.BCEWithLogitsLoss`` computes log(sigmoid(x)) literally and goes NaN once the data separate:
  :class:`StableBCEWithLogitsLoss` uses relu(x) − x·t + log(1 + exp(−|x|)) (no Softplus: it has no
  gradient builder in ORT 1.19);
- ``OptimType.AdamW`` has weight decay 0: we build ``onnxblock.optim.AdamW`` with weight decay and a
  gradient-norm clip, and switch its kernel to ``adam_mode=0`` — torch's AdamW (decoupled decay applied before
  the update, bias correction on both moments) — so one ORT step equals ``torch.optim.AdamW`` after
  ``clip_grad_norm_`` (the conformance suite checks it to 1e-5);
- ONNX Runtime hands the optimizer model its parameters and gradients in an order that changes from process
  to process, and its ``InplaceClipGradNorm`` adds the per-tensor squares
  in that order, so the total norm — and every step the clip acts on — rounded differently in some processes
  and seeded runs did not replay. :class:`OrderFreeClipGradNorm` adds them in an order fixed by their values;
- onnx 1.17 writes IR ≤ 10, which ORT 1.19 loads; every model is one file (no external data).
"""
from __future__ import annotations

import contextlib
import io
import logging
import os
import warnings
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx
import torch
from onnxruntime.training import artifacts as ort_artifacts
from onnxruntime.training import onnxblock

from pategail.export.discriminator import LABEL_EXPERT, LABEL_GENERATED, Discriminator, DiscriminatorWithProb

log = logging.getLogger(__name__)

OPSET = 17
"""ONNX opset of every exported model: ≤ 21 (ORT 1.19) and old enough for the mobile runtimes."""
MAX_IR_VERSION = 10
"""Highest IR version ONNX Runtime 1.19 loads."""

INPUT_PAIRS = "pairs"
"""float32 (batch, 15): (state, action) pairs from ``pair_features``."""
INPUT_LABELS = "labels"
"""float32 (batch,): 1 = expert (real), 0 = generated. Training and eval models only."""
OUTPUT_LOSS = "loss"
OUTPUT_LOGIT = "logit"
"""float32 (batch,): logits_expert_is_high."""
OUTPUT_PROB = "prob"
"""float32 (batch,): D(s, a) = sigmoid(logit), the reward input a device reports."""

FILES = {
    "training": "discriminator_training_model.onnx",
    "eval": "discriminator_eval_model.onnx",
    "optimizer": "discriminator_optimizer_model.onnx",
    "checkpoint": "discriminator_checkpoint",
    "inference": "discriminator_inference.onnx",
}
"""Role → file name of the discriminator's files in a bundle."""


@dataclass(frozen=True)
class TrainingConfig:
    """The on-device optimiser baked into the optimizer model. The learning rate is only a recommendation
    (written to the manifest): devices set it with ``Optimizer.set_learning_rate``."""

    learning_rate: float = 1e-3
    """Recommended AdamW step size; Adam's usual default, stable for a 5 k-parameter MLP."""
    weight_decay: float = 1e-2
    """Decoupled (AdamW) weight decay; torch's default. Keeps logits bounded on separable data."""
    max_grad_norm: float = 1.0
    """Global L2 norm the gradients are clipped to before the update (:class:`OrderFreeClipGradNorm`)."""
    beta1: float = 0.9
    """First-moment decay."""
    beta2: float = 0.999
    """Second-moment decay."""
    eps: float = 1e-8
    """Adam's denominator epsilon; torch's default, so the torch twin needs no special setting."""
    expert_label: float = LABEL_EXPERT
    """Target of the owner's real pairs (written to the manifest; devices train with it). Below 1 it is
    one-sided label smoothing (Salimans et al. 2016): D cannot become certain, so its log-odds stay bounded
    and generated pairs keep a graded reward. The loss is the same stable BCE, which takes soft targets."""

    def __post_init__(self):
        if not (self.learning_rate > 0 and self.weight_decay >= 0 and self.max_grad_norm > 0 and self.eps > 0):
            raise ValueError("learning_rate, max_grad_norm and eps must be > 0, weight_decay >= 0")
        if not (0 <= self.beta1 < 1 and 0 <= self.beta2 < 1):
            raise ValueError("betas must be in [0, 1)")
        if not LABEL_GENERATED + 0.5 < self.expert_label <= LABEL_EXPERT:
            raise ValueError(f"expert_label must be in (0.5, 1], got {self.expert_label}")

    def torch_optimizer(self, params) -> torch.optim.AdamW:
        """The torch optimiser the ORT optimizer model reproduces (use with ``clip_grad_norm_``)."""
        return torch.optim.AdamW(params, lr=self.learning_rate, betas=(self.beta1, self.beta2), eps=self.eps,
                                 weight_decay=self.weight_decay)


class StableBCEWithLogitsLoss(onnxblock.Block):
    """mean(relu(x) − x·t + log(1 + exp(−|x|))): binary cross-entropy on logits x with targets t, finite for
    all finite x. The torch twin is :func:`pategail.export.discriminator.stable_bce_with_logits`.
    Adds the graph input ``labels`` (float32, the logits' shape). Nodes are appended directly (no
    sub-blocks), so the block also works when the base model is given as a path."""

    def __init__(self, labels_name: str = INPUT_LABELS, loss_name: str = OUTPUT_LOSS):
        super().__init__()
        self._labels = labels_name
        self._loss = loss_name

    def build(self, logits_name: str) -> str:
        graph = self.base.graph
        h = onnx.helper
        graph.input.append(h.make_tensor_value_info(self._labels, onnx.TensorProto.FLOAT, ["batch"]))
        graph.initializer.append(h.make_tensor("bce.one", onnx.TensorProto.FLOAT, [], [1.0]))

        def node(op, inputs, name, **attrs):
            graph.node.append(h.make_node(op, inputs, [name], name=f"{name}_node", **attrs))
            return name

        x, t = logits_name, self._labels
        abs_x = node("Abs", [x], "bce.abs")
        exp_neg = node("Exp", [node("Neg", [abs_x], "bce.neg_abs")], "bce.exp")
        log_term = node("Log", [node("Add", ["bce.one", exp_neg], "bce.one_plus_exp")], "bce.log1p_exp")
        linear = node("Sub", [node("Relu", [x], "bce.relu"), node("Mul", [x, t], "bce.xt")], "bce.relu_minus_xt")
        per_pair = node("Add", [linear, log_term], "bce.per_pair")
        return node("ReduceMean", [per_pair], self._loss, keepdims=0)


class OrderFreeClipGradNorm(onnxblock.Block):
    """torch's ``clip_grad_norm_`` over the optimizer model's gradient sequence, with a result that does not
    depend on the sequence's order: each gradient's sum of squares (``ReduceSumSquare``), the ``count`` sums
    sorted ascending (``TopK``) and added one by one in that order, norm = √total, every gradient scaled by
    min(1, max_norm / (norm + 1e-6)). The sequence keeps its order (AdamW pairs gradient i with parameter i).

    Replaces ``onnxblock.optim.ClipGradNorm`` (ONNX Runtime's ``InplaceClipGradNorm``), whose total depends on
    the order ONNX Runtime happens to build the sequences in (module docstring). Standard ONNX operators only
    (opset 17), which every runtime that trains the bundle runs (Python, Android's Java, onnxruntime-web).
    ``count``: the number of trainable tensors (the sequence's length, fixed by the model)."""

    def __init__(self, max_norm: float, count: int, prefix: str = "order_free_clip"):
        super().__init__()
        if not max_norm > 0 or count < 1:
            raise ValueError("max_norm must be > 0 and count >= 1")
        self._max_norm, self._count, self._prefix = float(max_norm), int(count), prefix

    def build(self, gradients_name: str) -> str:
        graph, h, T = self.base.graph, onnx.helper, onnx.TensorProto
        def name(s):
            return f"{self._prefix}.{s}"

        def node(op, inputs, output, **attrs):
            graph.node.append(h.make_node(op, inputs, [name(output)], name=name(output), **attrs))
            return name(output)

        graph.initializer.extend([
            h.make_tensor(name("max_norm"), T.FLOAT, [], [self._max_norm]),
            h.make_tensor(name("eps"), T.FLOAT, [], [1e-6]),          # torch's clip_grad_norm_ and ORT's kernel
            h.make_tensor(name("one"), T.FLOAT, [], [1.0]),
            h.make_tensor(name("shape_1"), T.INT64, [1], [1]),
            h.make_tensor(name("count"), T.INT64, [1], [self._count]),
            *(h.make_tensor(name(f"index_{i}"), T.INT64, [], [i]) for i in range(self._count))])
        grads = [node("SequenceAt", [gradients_name, name(f"index_{i}")], f"gradient_{i}")
                 for i in range(self._count)]
        squares = [node("Reshape", [node("ReduceSumSquare", [g], f"squares_{i}_scalar", keepdims=0),
                                    name("shape_1")], f"squares_{i}") for i, g in enumerate(grads)]
        graph.node.append(h.make_node("TopK", [node("Concat", squares, "squares", axis=0), name("count")],
                                      [name("sorted"), name("sorted_index")], name=name("sorted"),
                                      axis=0, largest=0, sorted=1))
        total = node("Gather", [name("sorted"), name("index_0")], "total_0", axis=0)
        for i in range(1, self._count):
            total = node("Add", [total, node("Gather", [name("sorted"), name(f"index_{i}")], f"sorted_{i}",
                                             axis=0)], f"total_{i}")
        norm = node("Add", [node("Sqrt", [total], "norm"), name("eps")], "norm_eps")
        coefficient = node("Min", [node("Div", [name("max_norm"), norm], "ratio"), name("one")], "coefficient")
        return node("SequenceConstruct", [node("Mul", [g, coefficient], f"clipped_{i}")
                                          for i, g in enumerate(grads)], "clipped")


class TorchAdamW(onnxblock.optim.AdamW):
    """``onnxblock.optim.AdamW`` whose kernel runs in ``adam_mode=0`` (torch.optim.AdamW) instead of the
    block's hard-wired HuggingFace mode 1 (decay after the update, bias correction folded into the step).
    Overrides a private hook of onnxruntime-training 1.19.2 (its last release, pinned); the artifact builder
    checks the attribute afterwards, so a changed hook fails loudly rather than training differently."""

    def _optimizer_specific_logic(self, learning_rate_name, params_name, gradients_name, trainable_parameters):
        out = super()._optimizer_specific_logic(learning_rate_name, params_name, gradients_name,
                                                trainable_parameters)
        for node in self.base.graph.node:
            if node.op_type == "AdamWOptimizer":
                for attr in node.attribute:
                    if attr.name == "adam_mode":
                        attr.i = 0
        return out


def export_discriminator_onnx(discriminator: Discriminator) -> onnx.ModelProto:
    """The forward graph pairs → (logit, prob) with every ``state_dict`` name as an initializer."""
    model = DiscriminatorWithProb(discriminator).eval()
    example = torch.zeros(2, discriminator.config.n_inputs)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        # the legacy (TorchScript) exporter on purpose: it keeps parameter names and never ties equal-valued
        # parameters; its deprecation notices are expected
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        torch.onnx.export(
            model, (example,), buf, dynamo=False, opset_version=OPSET,  # type: ignore[arg-type]  # a file object
            training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
            input_names=[INPUT_PAIRS], output_names=[OUTPUT_LOGIT, OUTPUT_PROB],
            dynamic_axes={INPUT_PAIRS: {0: "batch"}, OUTPUT_LOGIT: {0: "batch"}, OUTPUT_PROB: {0: "batch"}},
        )
    # the wrapper prefixes names with "discriminator."; strip it so names are the Discriminator's own
    return unwrapped_names(onnx.load_from_string(buf.getvalue()), "discriminator.", discriminator.state_dict())


def unwrapped_names(proto: onnx.ModelProto, prefix: str, expected) -> onnx.ModelProto:
    """``proto`` with ``prefix`` (a wrapper module's attribute name) stripped from its initializers' names and
    their uses; RuntimeError when a name of ``expected`` is not an initializer afterwards."""
    rename = {i.name: i.name[len(prefix):] for i in proto.graph.initializer if i.name.startswith(prefix)}
    for init in proto.graph.initializer:
        init.name = rename.get(init.name, init.name)
    for node in proto.graph.node:
        node.input[:] = [rename.get(n, n) for n in node.input]
    missing = set(expected) - {i.name for i in proto.graph.initializer}
    if missing:
        raise RuntimeError(f"export lost parameter names {sorted(missing)}")
    return proto


def build_discriminator_artifacts(discriminator: Discriminator, out_dir: str | os.PathLike,
                                  config: TrainingConfig = TrainingConfig()) -> dict[str, Path]:
    """Write the discriminator's five files (see :data:`FILES`) into ``out_dir``; return role → path.

    Trainable parameters are every ``named_parameters()`` entry, in that order (the checkpoint's and the
    flat vector's order).
    """
    out_dir = Path(out_dir).resolve()          # before the chdir below: a relative path must mean the caller's
    out_dir.mkdir(parents=True, exist_ok=True)
    base = export_discriminator_onnx(discriminator)
    onnx.save(base, out_dir / FILES["inference"])
    names = [n for n, _ in discriminator.named_parameters()]
    optimizer = TorchAdamW(betas=(config.beta1, config.beta2), eps=config.eps, weight_decay=config.weight_decay,
                           clip_grad=OrderFreeClipGradNorm(config.max_grad_norm, len(names)))
    # onnxblock writes temporary files into the working directory when given a path; run it in a scratch
    # directory so an export never litters the caller's folder.
    paths = generate_artifacts(FILES, base, requires_grad=names, frozen_params=[], loss=StableBCEWithLogitsLoss(),
                               optimizer=optimizer, artifact_directory=out_dir, prefix="discriminator_",
                               loss_input_names=[OUTPUT_LOGIT], additional_output_names=[OUTPUT_LOGIT, OUTPUT_PROB])
    nodes = onnx.load(paths["optimizer"]).graph.node
    adam = [n for n in nodes if n.op_type == "AdamWOptimizer"]
    if [onnx.helper.get_attribute_value(a) for n in adam for a in n.attribute if a.name == "adam_mode"] != [0]:
        raise RuntimeError("the optimizer model is not in torch AdamW mode (adam_mode=0); onnxblock changed?")
    if adam[0].input[3] != "order_free_clip.clipped" or any(n.op_type == "InplaceClipGradNorm" for n in nodes):
        raise RuntimeError("the optimizer model does not clip with OrderFreeClipGradNorm; onnxblock changed?")
    for role in ("training", "eval", "optimizer", "inference"):
        ir = onnx.load(paths[role], load_external_data=False).ir_version
        if ir > MAX_IR_VERSION:
            raise RuntimeError(f"{paths[role].name} has IR version {ir} > {MAX_IR_VERSION}: ONNX Runtime 1.19 "
                               f"cannot load it (use onnx 1.17)")
    return paths


def generate_artifacts(files: dict[str, str], base: onnx.ModelProto, **kwargs) -> dict[str, Path]:
    """ONNX Runtime's ``generate_artifacts(base, **kwargs)``, run in a scratch directory (onnxblock writes
    temporary files into the working directory when given a path, so an export never litters the caller's
    folder) with its native log lines moved to the debug log; role → path of ``files`` (role → name) in
    ``kwargs["artifact_directory"]``, each checked to exist."""
    with tempfile.TemporaryDirectory() as scratch, _native_stderr_to_debug_log():
        cwd = os.getcwd()
        os.chdir(scratch)
        try:
            ort_artifacts.generate_artifacts(base, **kwargs)
        finally:
            os.chdir(cwd)
    paths = {role: Path(kwargs["artifact_directory"]) / name for role, name in files.items()}
    for path in paths.values():
        if not path.is_file():
            raise RuntimeError(f"artifact generation did not write {path.name}")
    return paths


@contextlib.contextmanager
def _native_stderr_to_debug_log():
    """ONNX Runtime's gradient builder prints one INFO line per graph transformer to the C-level stderr
    (its session options ignore the default logger severity); move them to this module's debug log."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, io.UnsupportedOperation):
        yield                                               # no real stderr (e.g. captured): nothing to hide
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), fd)
        try:
            yield
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            for line in sink.read().decode("utf-8", "replace").splitlines():
                log.debug("onnxruntime: %s", line)
