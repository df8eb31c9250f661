"""Does ONNX Runtime hand the optimizer model its parameters in the same order in every process? A standalone
reproduction for an upstream report: needs only numpy, onnx and onnxruntime-training — no
code of this project.

A six-parameter model (sizes 128, 16, 96, 6, 12 and 2, so each is recognisable) gets its training artifacts from
``onnxruntime.training.artifacts.generate_artifacts`` with ``onnxblock.optim.AdamW`` clipped by
``onnxblock.optim.ClipGradNorm``. A probe optimizer model, otherwise the same, zeroes the *first* gradient of the
sequence it is given before AdamW: after one training step exactly one parameter is unchanged — the one ONNX
Runtime put first. Each child process opens the artifacts, takes that step on the same batch and prints the
unchanged parameter's name. ``InplaceClipGradNorm`` adds the per-tensor squared norms in the same sequence order,
so when the order differs between processes, so can the clip's float32 total and every step after it.
(In this repository the same order made seeded training runs differ until the discriminator's clip became
order-free, pategail.export.artifacts.OrderFreeClipGradNorm; the report to file is
docs/upstream/onnxruntime-optimizer-sequence-order.md.)

Run: .venv/bin/python benchmarks/ort_sequence_order.py [--processes 16] [--no-aslr]
"""
import argparse
import collections
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

SIZES = {"w1": (8, 16), "b1": (16,), "w2": (16, 6), "b2": (6,), "w3": (6, 2), "b3": (2,)}

CHILD = """
import sys
import numpy as np
from onnxruntime.training.api import CheckpointState, Module, Optimizer
d = sys.argv[1]
state = CheckpointState.load_checkpoint(d + "/checkpoint")
module = Module(d + "/training_model.onnx", state, d + "/eval_model.onnx", device="cpu")
optimizer = Optimizer(d + "/probe_optimizer_model.onnx", module)
before = {name: np.array(state.parameters[name].data) for name in sys.argv[2].split(",")}
rng = np.random.default_rng(0)
module.train()
module(rng.normal(size=(32, 8)).astype(np.float32), rng.integers(0, 2, (32, 2)).astype(np.float32))
optimizer.step()
print(",".join(n for n, v in before.items() if np.array_equal(v, state.parameters[n].data)))
"""


def base_model() -> onnx.ModelProto:
    rng = np.random.default_rng(1)
    inits = [helper.make_tensor(n, TensorProto.FLOAT, s, rng.normal(scale=0.5, size=s).astype(np.float32).ravel())
             for n, s in SIZES.items()]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"]), helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"]), helper.make_node("Relu", ["h2"], ["r2"]),
             helper.make_node("Gemm", ["r2", "w3", "b3"], ["logit"])]
    graph = helper.make_graph(nodes, "six_parameters", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                      ["batch", 8])],
                              [helper.make_tensor_value_info("logit", TensorProto.FLOAT, ["batch", 2])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model


def probe(optimizer_model: Path, out: Path) -> None:
    """The optimizer model with the first gradient of its sequence multiplied by zero before the clip."""
    model = onnx.load(optimizer_model)
    graph = model.graph
    clip = next(n for n in graph.node if n.op_type == "InplaceClipGradNorm")
    gradients = clip.input[0]
    graph.initializer.extend([helper.make_tensor(f"probe.i{i}", TensorProto.INT64, [], [i]) for i in range(len(SIZES))]
                             + [helper.make_tensor("probe.zero", TensorProto.FLOAT, [], [0.0])])
    nodes = [helper.make_node("SequenceAt", [gradients, f"probe.i{i}"], [f"probe.g{i}"]) for i in range(len(SIZES))]
    nodes.append(helper.make_node("Mul", ["probe.g0", "probe.zero"], ["probe.z0"]))
    nodes.append(helper.make_node("SequenceConstruct", ["probe.z0"] + [f"probe.g{i}" for i in range(1, len(SIZES))],
                                  ["probe.gradients"]))
    clip.input[0] = "probe.gradients"
    rest = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + rest)
    onnx.save(model, out)


def main() -> None:
    import onnxruntime
    from onnxruntime.training import artifacts, onnxblock

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--no-aslr", action="store_true", help="children with address-space randomisation off "
                        "(Linux: setarch -R)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cwd, stderr = os.getcwd(), os.dup(2)
        os.chdir(tmp)                           # generate_artifacts leaves temporary files in the working directory
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)     # and logs every graph transformer natively on stderr
        try:
            artifacts.generate_artifacts(base_model(), requires_grad=list(SIZES), frozen_params=[],
                                         loss=artifacts.LossType.BCEWithLogitsLoss,
                                         optimizer=onnxblock.optim.AdamW(clip_grad=onnxblock.optim.ClipGradNorm(1.0)),
                                         artifact_directory=tmp)
        finally:
            os.dup2(stderr, 2)
            os.chdir(cwd)
        probe(Path(tmp) / "optimizer_model.onnx", Path(tmp) / "probe_optimizer_model.onnx")
        prefix = ["setarch", platform.machine(), "-R"] if args.no_aslr else []
        first = collections.Counter()
        for _ in range(args.processes):
            proc = subprocess.run([*prefix, sys.executable, "-c", CHILD, tmp, ",".join(SIZES)], capture_output=True,
                                  text=True)
            if proc.returncode:
                raise SystemExit(proc.stderr)
            first[proc.stdout.strip()] += 1
    print(f"onnxruntime {onnxruntime.__version__}, {platform.machine()}, {args.processes} processes"
          f"{' without ASLR' if args.no_aslr else ''}: the parameter ONNX Runtime put first in the optimizer's "
          f"sequences (the one the probe left unchanged)")
    for name, count in first.most_common():
        print(f"  {name or '(none)'}: {count}")


if __name__ == "__main__":
    main()
