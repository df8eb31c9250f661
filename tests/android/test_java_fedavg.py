"""The Java core on DP-FedAvg: the initial bundle of a `--method dp-fedavg` run, written by the Python exporter,
loads in Java with the policy_training description the Python SDK reads, and a damaged one is refused in the
Python SDK's line; FedAvgRequest frames the Python SDK writes are read by Java into the same fields and written back
byte for byte, malformed ones refused with the Python SDK's ErrorReply; a Java device answers a DP-FedAvg round
with the Python device's checks, then "incompatible" when it has no policy trainer (the coordinator leaves it out of
the round with that reason); with one, it trains through ONNX Runtime checkpoints it writes and reads itself and
uploads the Python SDK's clipped delta."""
from __future__ import annotations

import json
import logging
import shutil
import struct
import subprocess

import numpy as np
import pytest

from .conftest import JAVA, JVM_OPTIONS, ROOT, VECTORS, load_module

PROBE = "org.pategail.core.tools.PolicyTrainingProbe"


def _initial_bundle(tmp_path_factory, dataset, **overrides):
    """The initial bundle `pategail train --method dp-fedavg` writes (for the DP-FedAvg tests' tiny policy)."""
    from pategail.server.config import TrainConfig, merge_settings
    from pategail.training import ensure_initial_bundle

    config = TrainConfig(**merge_settings(load_module("tests/fedavg/conftest.py").TINY, overrides)).for_devices(10)
    return ensure_initial_bundle(config, dataset, 0, tmp_path_factory.mktemp("fedavg"))


@pytest.fixture(scope="module")
def fedavg_bundle(tmp_path_factory, dataset):
    return _initial_bundle(tmp_path_factory, dataset)


def _probe(classpath: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*JAVA, "-cp", classpath, PROBE, *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("private", [False, True])
def test_a_dp_fedavg_bundle_is_described_in_java_as_in_python(java_classpath, fedavg_bundle, tmp_path_factory,
                                                               dataset, private):
    from pategail.sdk.bundle import load_bundle

    # private: the run's Gaussian plan over model deltas, declared to the devices, which Java reads too
    bundle = _initial_bundle(tmp_path_factory, dataset, privacy={"epsilon": 8.0}) if private else fedavg_bundle
    assert ("privacy" in load_bundle(bundle).manifest) == private
    spec = load_bundle(bundle).policy_training
    done = _probe(java_classpath, "bundle", str(bundle))
    assert done.returncode == 0, done.stderr
    java = json.loads(done.stdout)
    assert java["n_parameters"] == spec.n_parameters == sum(int(np.prod(s)) for _, s in spec.parameters) > 0
    assert java["learning_rate_scale"] == spec.learning_rate_scale == 1e8
    assert [(name, tuple(shape)) for name, shape in java["parameters"]] == list(spec.parameters)
    assert java["files"] == {**{role: m.path.name for role, m in spec.models.items()},
                             "checkpoint": spec.checkpoint.name}
    assert len(set(java["files"].values())) == 4
    # a PateGail bundle has no such section: absent in both
    assert load_bundle(VECTORS / "bundle").policy_training is None
    assert json.loads(_probe(java_classpath, "bundle", str(VECTORS / "bundle")).stdout) is None


def _shape_off_by_one(m):
    m["policy_training"]["parameters"][2]["shape"][0] += 1


def _checkpoint_unlisted(m):
    m["policy_training"]["checkpoint"] = "policy_checkpoint.old"


def _opset_too_new(m):
    m["policy_training"]["models"]["eval"]["opset"] = m["requires"]["max_opset"] + 1


def _no_optimizer(m):
    del m["policy_training"]["models"]["optimizer"]


def _scale_zero(m):
    m["policy_training"]["optimizer"]["learning_rate_scale"] = 0


@pytest.mark.parametrize("alter, says", [
    (_shape_off_by_one, "policy_training: the parameter shapes do not add up to n_parameters"),
    (_checkpoint_unlisted, "policy_checkpoint.old is used but has no hash in 'files'"),
    (_opset_too_new, "above what the bundle allows"),
    (_no_optimizer, "malformed manifest"),
    (_scale_zero, "policy_training: the optimizer's learning_rate_scale must be > 0"),
])
def test_an_altered_policy_training_section_is_refused_in_one_line(java_classpath, fedavg_bundle, tmp_path, alter,
                                                                    says):
    from pategail.sdk.bundle import BundleError, load_bundle

    bundle = shutil.copytree(fedavg_bundle, tmp_path / "bundle")
    manifest = json.loads((bundle / "manifest.json").read_text())
    alter(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleError) as err:
        load_bundle(bundle)
    done = _probe(java_classpath, "bundle", str(bundle))
    assert done.returncode == 2 and done.stdout == ""
    line = done.stderr.strip()
    assert "\n" not in line and says in line and says in str(err.value)
    if alter is not _no_optimizer:                    # the same line, but for how each language names a KeyError
        assert line == str(err.value)


def _frame(body: bytes) -> bytes:
    return struct.pack(">4sBBI", b"PGDV", 1, 6, len(body)) + body


def _body(round_=3, epochs=2, batch=16, lr=0.1, clip=0.5, params=(0.25, -1.5), n=None) -> bytes:
    flat = np.asarray(params, dtype="<f4").tobytes()
    return struct.pack(">qIIddI", round_, epochs, batch, lr, clip, len(params) if n is None else n) + flat


REFUSED = {
    "nan_parameter": (_frame(_body(params=(0.5, float("nan")))), "non_finite"),
    "inf_parameter": (_frame(_body(params=(float("-inf"),))), "non_finite"),
    "epochs_zero": (_frame(_body(epochs=0)), "malformed"),
    "too_many_epochs": (_frame(_body(epochs=10_001)), "too_large"),
    "batch_too_large": (_frame(_body(batch=4097)), "too_large"),
    "learning_rate_nan": (_frame(_body(lr=float("nan"))), "malformed"),
    "learning_rate_negative": (_frame(_body(lr=-0.5)), "malformed"),
    "clip_norm_zero": (_frame(_body(clip=0.0)), "malformed"),
    "clip_norm_inf": (_frame(_body(clip=float("inf"))), "malformed"),
    "no_parameters": (_frame(_body(params=())), "shape"),
    "too_many_parameters": (_frame(_body(params=(), n=(64 << 20) // 4 + 1)), "too_large"),
    "truncated_parameters": (_frame(_body(n=3)), "malformed"),
    "trailing_byte": (_frame(_body() + b"\x00"), "malformed"),
    "negative_round": (_frame(_body(round_=-5)), "malformed"),
}


def test_fedavg_requests_cross_between_python_and_java_byte_for_byte(java_classpath):
    from pategail.sdk.messages import Ack, ErrorReply, FedAvgRequest, MessageError, from_bytes, peek_round

    theta = np.random.default_rng(3).normal(size=1000).astype(np.float32)
    theta[:4] = [-0.0, np.float32(1e-45), np.finfo(np.float32).max, np.finfo(np.float32).tiny]
    messages = [FedAvgRequest(1, 2, 16, 0.1, 0.5, theta), FedAvgRequest(2**40, 10_000, 4096, 1e-7, 3.25, theta[:1]),
                Ack(7, "fedavg_request", 1000)]
    frames = [m.to_bytes() for m in messages] + [frame for frame, _ in REFUSED.values()]
    done = _probe(java_classpath, "frames", stdin="".join(f.hex() + "\n" for f in frames))
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(frames)
    for message, java in zip(messages, answers):
        assert bytes.fromhex(java["reencoded"]) == message.to_bytes()
        assert java["round"] == message.round
    for request, java in zip(messages[:2], answers):
        assert java["kind"] == "fedavg_request"
        assert (java["epochs"], java["batch_size"]) == (request.epochs, request.batch_size)
        assert (java["learning_rate"], java["clip_norm"]) == (request.learning_rate, request.clip_norm)
        # JSON writes -0.0 as 0: the values here, their bits in the re-encoding above
        assert np.array_equal(np.asarray(java["parameters"], dtype=np.float32), request.parameters)
    assert (answers[2]["kind"], answers[2]["acknowledged"], answers[2]["n"]) == ("ack", "fedavg_request", 1000)
    for (name, (frame, code)), java in zip(REFUSED.items(), answers[len(messages):]):
        with pytest.raises(MessageError) as err:
            from_bytes(frame)
        assert err.value.code == code == java.get("code"), (name, java)
        python_reply = ErrorReply.from_error(peek_round(frame), err.value).to_bytes()
        assert bytes.fromhex(java["reply"]) == python_reply, (name, java["message"], str(err.value))


class _TwoDevices:
    """A fleet of one Python SDK device and one Java device, as the coordinator's release code sees a fleet."""

    def __init__(self, *devices):
        self.devices = {d.device_id: d for d in devices}
        self.device_ids = tuple(sorted(self.devices))

    def public_keys(self):
        return {i: d.public_keys for i, d in self.devices.items()}

    def request(self, device_id: int, message: bytes) -> bytes:
        return self.devices[device_id].handle(message)


def test_a_java_device_refuses_a_dp_fedavg_round_as_incompatible(java_classpath, fedavg_bundle, dataset, tmp_path,
                                                                   caplog):
    from pategail.jvm_device import JavaDevice
    from pategail.sdk.device import Device
    from pategail.sdk.fedavg_round import PolicyTrainer
    from pategail.sdk.messages import ErrorReply, FedAvgRequest, from_bytes
    from pategail.server.config import TrainConfig
    from pategail.server.releases import SecureReleases

    days = dataset.user_days(int(dataset.users[1]))
    python = Device(tmp_path / "python", 10, rng=np.random.default_rng(0))
    python.install_bundle(fedavg_bundle)
    theta = PolicyTrainer(python.bundle).get_parameters()
    request = FedAvgRequest(1, 1, 16, 0.1, 0.5, theta).to_bytes()
    short = FedAvgRequest(2, 1, 16, 0.1, 0.5, theta[:-1]).to_bytes()
    with JavaDevice(java_classpath, tmp_path / "java", 20, VECTORS / "device.json", jvm_options=JVM_OPTIONS) as java:
        # the Python device's refusals, byte for byte: no days yet, then the wrong number of parameters
        assert java.install_bundle(fedavg_bundle) == python.bundle.sha256
        assert java.handle(request) == python.handle(request)
        assert from_bytes(java.handle(request)).code == "not_ready"
        python.add_days(days)
        java.add_days(days)
        assert java.handle(short) == python.handle(short)
        assert from_bytes(java.handle(short)).code == "incompatible"
        assert java.handle(REFUSED["epochs_zero"][0]) == python.handle(REFUSED["epochs_zero"][0])
        # a valid round: the Python device trains, the Java device says why it cannot
        reply = from_bytes(java.handle(request))
        assert isinstance(reply, ErrorReply) and (reply.round, reply.code) == (1, "incompatible")
        assert reply.message.startswith("this device has no policy trainer")
        # what the coordinator does with that answer: the round goes on without the device, saying why
        releases = SecureReleases(TrainConfig().for_devices(2), _TwoDevices(python, java), tmp_path / "run", seed=0)
        with caplog.at_level(logging.WARNING, logger="pategail.server.releases"):
            participants, _, _ = releases.broadcast(request, len(theta))
        assert participants == [10] and len(python.pending) == len(theta)
        assert f"device 20 refused round: {reply.message} (incompatible)" in caplog.text
        # a bundle without policy training artifacts: refused as the Python device refuses it
        python.install_bundle(VECTORS / "bundle")
        java.install_bundle(VECTORS / "bundle")
        assert java.handle(request) == python.handle(request)
        assert "no policy training artifacts" in from_bytes(java.handle(request)).message


@pytest.mark.slow
def test_a_served_dp_fedavg_run_with_a_training_java_device(java_device_classpath, tmp_path, monkeypatch):
    """`pategail serve --method dp-fedavg` with three Python devices and one Java device with a policy trainer: it
    takes part in the environment release and in every DP-FedAvg round, its uploads clipped to norm 1. (A device
    without one refuses those rounds and the coordinator goes on without it: the in-process test above.)"""
    import sys

    from pategail.data.dataset import load_dataset
    from pategail.data.prepare import prepare_dataset
    from pategail.sdk.synthetic import write_synthetic_csv
    from pategail.server.checkpoint import read_journal

    from . import test_java_fleet as fleet          # its served-run helpers

    data_dir = tmp_path / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", data_dir, allow_pickle=True)
    dataset = load_dataset(data_dir)
    config = fleet.NET.tiny_config(tmp_path / "tiny.json", rounds=2, method="dp-fedavg", average_rounds=1,
                                   secagg={"min_survivors": 0.6},
                                   fedavg={"local_epochs": 1, "batch_size": 16, "client_lr": 0.1, "clip_norm": 0.5})
    run = tmp_path / "run"
    serve, codes = fleet._serve(run, data_dir, config, ["--no-privacy"], [], monkeypatch, min_devices=4)
    url = fleet.NET.wait_for(lambda: fleet.NET.service_url(run), 120, "the service to listen")
    pythons = [fleet._python(url, tmp_path / f"py-{i}", dataset.user_days(int(dataset.users[i])), i) for i in range(3)]
    store, csv = tmp_path / "java-3", tmp_path / "java-3.csv"
    store.mkdir()
    write_synthetic_csv(csv, dataset.user_days(int(dataset.users[3])), dataset.cells)
    java = fleet._java(java_device_classpath, url, store, csv, 3, "--policy-trainer", sys.executable)
    try:
        serve.join(timeout=400)
        assert not serve.is_alive() and codes == [0], (run / "train.log").read_text()[-3000:]
        assert java.wait(timeout=60) == 0, java.log_path.read_text()[-3000:]
        for thread, _ in pythons:
            thread.join(timeout=60)
    finally:
        fleet._stop([java], pythons)
    journal = read_journal(run / "checkpoint")
    assert sorted(journal) == [0, 1, 2]
    assert journal[0].n_survivors == 4
    log = (run / "train.log").read_text()
    uploads = [json.loads(line) for line in (store / "uploads.jsonl").read_text().splitlines()]
    assert journal[1].n_survivors == journal[2].n_survivors == 4, log[-3000:]
    assert "no policy trainer" not in log               # (the final policy it refuses: no policy runtime on the JVM)
    deltas = [np.array(u["values"]) for u in uploads if u["round"] in (1, 2)]
    assert len(deltas) == 2 and all(0 < np.linalg.norm(d) <= 1 + 1e-9 for d in deltas)


def _first_dims_length_at(raw: bytes) -> int:
    """Where the length of the first trainable parameter's dims vector sits in an ONNX Runtime checkpoint (the
    flatbuffer: root table, field 1 module state, its field 0 the tensors, a tensor's field 2 its dims)."""
    def u32(at):
        return struct.unpack_from("<I", raw, at)[0]

    def field(table, slot):
        vtable = table - struct.unpack_from("<i", raw, table)[0]
        at = table + struct.unpack_from("<H", raw, vtable + 4 + 2 * slot)[0]
        return at + u32(at)

    tensors = field(field(u32(0), 1), 0)
    first = tensors + 4 + u32(tensors + 4)
    return field(first, 2)


def test_java_writes_and_reads_policy_checkpoints_as_onnx_runtime_does(java_classpath, fedavg_bundle, dataset,
                                                                       tmp_path):
    """ONNX Runtime's Java training API cannot read or set a session's parameters, so a Java device moves them
    through checkpoint files: ONNX Runtime opens the checkpoint Java wrote on exactly the parameters Java was
    given (every bit), and Java reads out of the checkpoint ONNX Runtime saved after training exactly the
    parameters the session holds. A damaged checkpoint is refused in one line."""
    from pategail.sdk.bundle import load_bundle
    from pategail.sdk.fedavg_round import PolicyTrainer, labelled_days

    bundle = load_bundle(fedavg_bundle)
    theta = np.random.default_rng(5).normal(size=bundle.policy_training.n_parameters).astype("<f4")
    theta[:3] = [-0.0, np.float32(1e-45), np.finfo(np.float32).max]
    written = tmp_path / "theta.ckpt"
    done = _probe(java_classpath, "checkpoint-write", str(fedavg_bundle), str(written), stdin=theta.tobytes().hex())
    assert done.returncode == 0, done.stderr
    trainer = PolicyTrainer(bundle, checkpoint=written)
    assert trainer.get_parameters().tobytes() == theta.tobytes()

    trainer.set_parameters(theta * np.float32(1e-3))
    days = dataset.user_days(int(dataset.users[2]))[:8]
    trainer.train_step(labelled_days(days, int(days[0, 0]), bundle.environment.cells).take(np.arange(len(days))), 0.1)
    saved = tmp_path / "trained.ckpt"
    trainer.save_checkpoint(saved)
    done = _probe(java_classpath, "checkpoint-read", str(fedavg_bundle), str(saved))
    assert done.returncode == 0, done.stderr
    read = np.frombuffer(bytes.fromhex(done.stdout.strip()), "<f4")
    assert read.tobytes() == trainer.get_parameters().tobytes()
    assert not np.array_equal(read, theta * np.float32(1e-3))              # the step moved them

    raw = saved.read_bytes()
    dims = _first_dims_length_at(raw)
    damaged = {"truncated": (raw[: len(raw) // 2], "malformed checkpoint"),
               "not_a_checkpoint": (raw[:4] + b"ONNX" + raw[8:], "not an ONNX Runtime training checkpoint"),
               "dims_too_long": (raw[:dims] + struct.pack("<I", 2**31 - 1) + raw[dims + 4:], "malformed checkpoint")}
    for name, (data, says) in damaged.items():
        (tmp_path / name).write_bytes(data)
        done = _probe(java_classpath, "checkpoint-read", str(fedavg_bundle), str(tmp_path / name))
        assert done.returncode == 2 and done.stdout == "", (name, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr, (name, done.stderr)
    done = _probe(java_classpath, "checkpoint-write", str(fedavg_bundle), str(tmp_path / "short.ckpt"),
                  stdin=theta[:-1].tobytes().hex())
    assert done.returncode == 2 and "parameters given, the policy has" in done.stderr


def test_a_java_device_trains_a_dp_fedavg_round_and_uploads_the_clipped_delta(java_classpath, fedavg_bundle, dataset,
                                                                              tmp_path):
    """A Java device with a policy trainer answers a DP-FedAvg round as a Python device does: two local epochs
    over its own labelled days in minibatches of 16 (its features, masks and labels those of the Python SDK, every
    day once an epoch), from the global parameters written into its checkpoint, then the delta clipped to the
    request's norm. Replaying its minibatches in the Python SDK's trainer gives the delta it uploaded through a
    real secure round without noise (Gaussian mechanism, signed vector)."""
    from pategail.jvm_device import JavaDevice
    from pategail.sdk.device import Device
    from pategail.sdk.fedavg_round import PolicyTrainer, delta_upload, labelled_days
    from pategail.sdk.messages import Ack, FedAvgRequest, from_bytes
    from pategail.sdk.secagg.fixedpoint import SCALE, encode_signed
    from pategail.sdk.secagg.mechanisms import DELTA_BLOCK
    from pategail.server.secagg.coordinator import SecAggCoordinator
    from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

    from .test_java_device_round import signed_directory

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    pythons = []
    for i in range(2):
        dev = Device(tmp_path / f"python-{i}", 10 + i, rng=np.random.default_rng(i))
        dev.install_bundle(fedavg_bundle)
        dev.add_days(dataset.user_days(int(dataset.users[4 + i])))
        pythons.append(dev)
    days = dataset.user_days(int(dataset.users[1]))
    twin = Device(tmp_path / "twin", 30, rng=np.random.default_rng(0))        # the Java device's days, in Python
    twin.install_bundle(fedavg_bundle)
    twin.add_days(days)
    start = PolicyTrainer(twin.bundle).get_parameters()          # moved off the bundle's own checkpoint
    theta = start + np.random.default_rng(4).normal(scale=0.01, size=len(start)).astype(np.float32)
    request = FedAvgRequest(1, 2, 16, 0.1, 0.1, theta).to_bytes()
    log = tmp_path / "steps"
    with JavaDevice(java_classpath, tmp_path / "java", 20, VECTORS / "device.json", seed=7, jvm_options=JVM_OPTIONS,
                    policy_trainer=True, policy_trainer_log=log) as java:
        java.install_bundle(fedavg_bundle)
        java.add_days(days)
        reply = java.handle(request)
        assert reply == pythons[0].handle(request) == pythons[1].handle(request), from_bytes(reply)
        assert isinstance(from_bytes(reply), Ack)
        uploads = [np.array(dev.pending) for dev in pythons]                  # cleared once uploaded
        assert [p.name for p in java.root.iterdir() if "policy." in p.name] == []   # the round's files removed
        # a learning rate that blows the update up: refused as the Python device refuses it, nothing left behind
        wild = FedAvgRequest(2, 1, 16, 1e30, 0.1, theta).to_bytes()
        refused = java.handle(wild)
        assert refused == twin.handle(wild) and from_bytes(refused).code == "non_finite", from_bytes(refused)
        assert [p.name for p in java.root.iterdir() if "policy." in p.name] == []

        # its minibatches: rows of the Python SDK's labelled days, every day once an epoch
        reference = labelled_days(twin.days(), twin.home, twin.bundle.environment.cells)
        steps = [np.load(p) for p in sorted(log.glob("step-*.npz"))]
        per_epoch = -(-len(days) // 16)
        assert len(steps) == 3 * per_epoch                # two epochs, then the refused round's one
        steps = steps[:2 * per_epoch]
        trainer = PolicyTrainer(twin.bundle)
        trainer.set_parameters(theta)
        owner = sorted(day.tobytes() for day in reference.cells)
        for epoch in range(2):
            seen = []
            for step in steps[epoch * per_epoch:(epoch + 1) * per_epoch]:
                assert float(step["learning_rate"]) == np.float32(0.1)
                for row, cells in enumerate(step["cells"]):
                    i = next((i for i in range(len(reference)) if np.array_equal(reference.cells[i], cells)), None)
                    assert i is not None, "a minibatch row that is none of the owner's days"
                    assert np.array_equal(reference.features[i], step["features"][row])
                    assert np.array_equal(reference.mask[i], step["mask"][row])
                    assert np.array_equal(reference.targets[i], step["targets"][row])
                    seen.append(cells.tobytes())
                trainer.train_step(tuple(step[k] for k in ("cells", "features", "mask", "targets")), 0.1)
            assert sorted(seen) == owner                                   # every day once an epoch
        want = delta_upload(trainer.get_parameters().astype(np.float64) - theta.astype(np.float64), 0.1)
        assert np.linalg.norm(want) == pytest.approx(1.0)                    # the clip bites

        # what it uploads (the refused round left its pending vector as it was): a secure round without noise
        key = Ed25519PrivateKey.generate()
        coordinator = SecAggCoordinator(key)
        for dev in pythons:
            coordinator.enroll(dev.device_id, dev.public_keys)
        coordinator.enroll(java.device_id, java.public_keys)
        java.set_directory(signed_directory(coordinator, key))
        endpoints = [dev.secagg_endpoint(coordinator.directory) for dev in pythons] + [java]
        cfg = SecureRoundConfig(round_id=1, n_min=3, mechanism="gaussian", block=DELTA_BLOCK, clip_norm=1.0)
        result = run_secure_round(endpoints, None, cfg, np.random.default_rng(0), coordinator=coordinator,
                                  num_queries=len(theta))
        assert result.n_survivors == 3 and not result.stats.rejected
        java_sum = result.sum * SCALE - sum(encode_signed(u) for u in uploads)
        assert np.max(np.abs(java_sum - encode_signed(want))) <= 1               # one fixed-point quantum

        # more days: the next round's epoch passes over all of them (the labelled days are made anew)
        more = dataset.user_days(int(dataset.users[2]))[:5]
        java.add_days(more)
        done = len(list(log.glob("step-*.npz")))
        assert isinstance(from_bytes(java.handle(FedAvgRequest(3, 1, 16, 0.1, 0.1, theta).to_bytes())), Ack)
        rows = [c.tobytes() for p in sorted(log.glob("step-*.npz"))[done:] for c in np.load(p)["cells"]]
        assert sorted(rows) == sorted(d.tobytes() for d in np.concatenate([days, more]).astype(np.int64))
