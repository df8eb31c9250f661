"""Five devices holding real users' days (data/default) go through a full round of Algorithm 1 — a policy
update, a RoundRequest (k local training steps, then scoring the common query batch), the secure aggregation
of their scores, then the initial-state request and its secure aggregation — with every byte they send
recorded. Checks: the scores equal a torch reference of the same discriminators within 1e-5; the secure sum
is the sum of the devices' own vectors (the caller never supplies them); and no real day, nor any run of 3
consecutive real slots, appears in any message a device sent, in any encoding."""
from __future__ import annotations

import re

import numpy as np

from pategail.sdk.contribution import DAYS_CAP
import pytest

from pategail.sdk.device import Device
from pategail.sdk.epr import n_rank_bins
from pategail.sdk.features import N_PAIR_FEATURES, pair_features
from pategail.sdk.messages import Ack, InitialStatesRequest, PolicyUpdate, from_bytes
from pategail.sdk.secagg.fixedpoint import SCALE
from pategail.server.secagg.coordinator import SecAggCoordinator
from pategail.sdk.secagg.errors import SecAggAbort
from pategail.server.secagg.round import SecureRoundConfig, run_secure_round

N_DEVICES = 5
ENVIRONMENT_LENGTH = 2 * 4210 + 2 + 2 * n_rank_bins(1000) + 4210 + 3
"""A device's environment vector on the default data: initial states, the explore law, the place law."""
TOL = 1e-5


class RecordingEndpoint:
    """Passes the five secure-aggregation steps through to a device's endpoint and keeps what it returns."""

    def __init__(self, endpoint, sent: list):
        self._endpoint, self._sent = endpoint, sent
        self.device_id = endpoint.device_id

    def _call(self, name, *args):
        out = getattr(self._endpoint, name)(*args)
        self._sent.append(out)
        return out

    def start_round(self, config, envelope):
        return self._call("start_round", config, envelope)

    def share_keys(self, key_broadcast):
        return self._call("share_keys", key_broadcast)

    def masked_input(self, share_delivery):
        return self._call("masked_input", share_delivery)

    def consistency_check(self, survivor_set):
        return self._call("consistency_check", survivor_set)

    def unmask(self, ack_set):
        return self._call("unmask", ack_set)


@pytest.fixture(scope="module")
def federation(tmp_path_factory, dataset, bundle_dir, round_request, policy_bytes):
    root = tmp_path_factory.mktemp("federation")
    devices, sent = [], {}
    for i in range(N_DEVICES):
        d = Device(root / f"device-{i}", 10 + i, rng=np.random.default_rng(i))
        d.install_bundle(bundle_dir)
        d.add_days(dataset.user_days(dataset.users[i]))
        devices.append(d)
        sent[d.device_id] = []

    def handle(device, message) -> bytes:
        reply = device.handle(message.to_bytes())
        sent[device.device_id].append(reply)
        return reply

    coordinator = SecAggCoordinator()
    for d in devices:
        coordinator.enroll(d.device_id, d.public_keys)
    rng = np.random.default_rng(0)
    out = {"devices": devices, "sent": sent}

    update = PolicyUpdate.for_model(1, policy_bytes(21, dataset.n_cells))
    out["policy_acks"] = [from_bytes(handle(d, update)) for d in devices]
    out["round_acks"] = [handle(d, round_request) for d in devices]
    out["scores"] = np.stack([d.pending for d in devices])
    out["parameters"] = [d.discriminator_parameters() for d in devices]

    def secure_round(round_id, m):
        endpoints = [RecordingEndpoint(d.secagg_endpoint(coordinator.directory), sent[d.device_id])
                     for d in devices]
        return run_secure_round(endpoints, None, SecureRoundConfig(round_id, n_min=N_DEVICES), rng,
                                coordinator=coordinator, num_queries=m)

    out["aggregate"] = secure_round(1, round_request.n_queries)
    out["pending_after"] = [d.pending for d in devices]
    out["initial_acks"] = [from_bytes(handle(d, InitialStatesRequest(2))) for d in devices]
    out["contributions"] = np.stack([d.pending for d in devices])
    out["initial_aggregate"] = secure_round(2, ENVIRONMENT_LENGTH)
    with pytest.raises(SecAggAbort):                  # nothing pending any more: every device drops out
        secure_round(3, round_request.n_queries)
    return out


def test_round_is_acknowledged_with_nothing_but_the_request_size(federation, round_request):
    assert all(a == Ack(1, "policy_update", 0) for a in federation["policy_acks"])
    acks = federation["round_acks"]
    assert len(set(acks)) == 1                                           # identical bytes from every device
    assert from_bytes(acks[0]) == Ack(1, "round_request", round_request.n_queries)
    assert all(a == Ack(2, "initial_states_request", ENVIRONMENT_LENGTH) for a in federation["initial_acks"])


def _torch_scores(bundle, flat: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    import torch

    from pategail.export.discriminator import Discriminator, DiscriminatorConfig
    model = Discriminator(DiscriminatorConfig(**bundle.manifest["discriminator"]["config"]))
    state, offset = {}, 0
    for name, shape in bundle.parameters:                                # the manifest's flat-vector order
        size = int(np.prod(shape))
        state[name] = torch.from_numpy(flat[offset:offset + size].reshape(shape).copy())
        offset += size
    assert offset == flat.size
    model.load_state_dict(state)
    with torch.no_grad():
        return torch.sigmoid(model(torch.from_numpy(pairs))).numpy().astype(np.float64)


def test_scores_equal_a_torch_reference_of_the_same_discriminators(federation, bundle, round_request):
    pairs = pair_features(round_request.days, round_request.homes, round_request.actions,
                          bundle.environment.cells).reshape(-1, N_PAIR_FEATURES)
    initial = _torch_scores(bundle, _bundle_flat(bundle), pairs)
    scores = federation["scores"]
    assert scores.shape == (N_DEVICES, round_request.n_queries)
    for flat, own in zip(federation["parameters"], scores):
        reference = _torch_scores(bundle, flat, pairs)
        np.testing.assert_allclose(own, reference, atol=TOL, rtol=0)
        assert np.abs(own - initial).max() > 1e-3                      # really trained, not the bundle's D
    # personal discriminators: each device's scores differ from the others'
    assert min(np.abs(scores[i] - scores[j]).max() for i in range(N_DEVICES) for j in range(i)) > 1e-3


def _bundle_flat(bundle):
    from pategail.sdk.bundle import open_training_session
    return open_training_session(bundle).get_flat_parameters()


def test_secure_sums_are_the_devices_own_vectors(federation, dataset):
    agg, scores = federation["aggregate"], federation["scores"]
    assert agg.n_survivors == N_DEVICES
    np.testing.assert_allclose(agg.sum, scores.sum(0), atol=N_DEVICES / SCALE)
    np.testing.assert_allclose(agg.sq_sum, (scores ** 2).sum(0), atol=N_DEVICES / SCALE)
    assert all(p is None for p in federation["pending_after"])           # uploaded once, then dropped
    init = federation["initial_aggregate"]
    n = dataset.n_cells
    np.testing.assert_allclose(init.sum, federation["contributions"].sum(0), atol=N_DEVICES / SCALE)
    homes = [d.store.home for d in federation["devices"]]
    weights = [min(1.0, len(d.store.days()) / DAYS_CAP) for d in federation["devices"]]
    np.testing.assert_allclose(init.sum[:n], np.bincount(homes, weights=weights, minlength=n),
                               atol=N_DEVICES / SCALE)
    assert init.sum[n:2 * n + 2].sum() == pytest.approx(N_DEVICES, abs=1e-4)
    # the explore law's two halves (observed, power-law expected) each sum to the weight of every device
    # that made an explore move
    bins = n_rank_bins(1000)
    observed, expected = init.sum[2 * n + 2:2 * n + 2 + bins], init.sum[2 * n + 2 + bins:2 * n + 2 + 2 * bins]
    assert observed.sum() == pytest.approx(sum(weights), abs=1e-4)
    assert expected.sum() == pytest.approx(sum(weights), abs=1e-4)
    # the place law's visit distributions sum to every device's weight too
    visits = init.sum[2 * n + 2 + 2 * bins:3 * n + 2 + 2 * bins]
    assert visits.sum() == pytest.approx(sum(weights), abs=1e-4)


# -- leak detection -----------------------------------------------------------------------------------------
_BITS = 13                        # cell ids < 8,192: a run of three packs into one int64 key


def run_keys(days: np.ndarray) -> np.ndarray:
    """Sorted int64 keys of every run of 3 consecutive slots of ``days`` (whole days are made of them)."""
    days = np.asarray(days, dtype=np.int64)
    assert days.max() < 1 << _BITS
    keys = (days[:, :-2] << 2 * _BITS) | (days[:, 1:-1] << _BITS) | days[:, 2:]
    return np.unique(keys)


_NUMERIC = ["<i2", ">i2", "<u2", ">u2", "<i4", ">i4", "<i8", ">i8", "<f4", ">f4", "<f8", ">f8"]


def _any_key(candidates: np.ndarray, keys: np.ndarray) -> bool:
    """Whether any of ``candidates`` is one of the sorted ``keys`` (a binary search each: no sort of the
    candidates, which are many and random)."""
    if not candidates.size or not keys.size:
        return False
    at = np.minimum(np.searchsorted(keys, candidates), keys.size - 1)
    return bool((keys[at] == candidates).any())


def find_runs(blob: bytes, keys: np.ndarray) -> list[str]:
    """Encodings under which ``blob`` holds 3 consecutive values forming a real run: every numeric type a
    message could use (16/32/64-bit integers, float32/64, both byte orders, at every byte offset) and text
    (decimal numbers separated by 1-3 non-digit characters, e.g. "1,2,3", "[1, 2, 3]", "1 2 3"). ``keys``
    as :func:`run_keys` makes them: sorted and unique."""
    found = []
    for dtype in _NUMERIC:
        width = np.dtype(dtype).itemsize
        for offset in range(width):
            count = (len(blob) - offset) // width
            if count < 3:
                continue
            v = np.frombuffer(blob, dtype=dtype, count=count, offset=offset)
            if v.dtype.kind == "f":
                with np.errstate(invalid="ignore"):
                    ok = np.isfinite(v) & (v == np.round(v)) & (v >= 0) & (v < 1 << _BITS)
                v = np.where(ok, v, -1)
            v = v.astype(np.int64)
            ok = (v >= 0) & (v < 1 << _BITS)
            k = (v[:-2] << 2 * _BITS) | (v[1:-1] << _BITS) | v[2:]
            if _any_key(k[ok[:-2] & ok[1:-1] & ok[2:]], keys):
                found.append(f"{dtype}@{offset}")
    tokens = [(m.start(), m.end(), int(m.group())) for m in re.finditer(rb"\d{1,6}", blob)]
    text = [(a[2] << 2 * _BITS) | (b[2] << _BITS) | c[2] for a, b, c in zip(tokens, tokens[1:], tokens[2:])
            if 1 <= b[0] - a[1] <= 3 and 1 <= c[0] - b[1] <= 3 and max(a[2], b[2], c[2]) < 1 << _BITS]
    if _any_key(np.array(text, dtype=np.int64), keys):
        found.append("text")
    return found


def test_the_leak_detector_finds_real_runs_in_every_encoding(dataset):
    days = dataset.user_days(dataset.users[0])
    keys = run_keys(days)
    run = days[3, 10:13]
    rng = np.random.default_rng(0)
    for dtype in _NUMERIC:
        for offset in range(np.dtype(dtype).itemsize):
            blob = rng.bytes(37 + offset) + run.astype(dtype).tobytes() + rng.bytes(11)
            assert f"{dtype}@{(37 + offset) % np.dtype(dtype).itemsize}" in find_runs(blob, keys)
    for text in [",".join(map(str, run)), "[" + ", ".join(map(str, run)) + "]", " ".join(map(str, run))]:
        assert find_runs(b"\x00\x01" + text.encode() + b"\x02", keys) == ["text"]
    assert find_runs(days.astype("<i4").tobytes(), keys)                # a whole day, as a request carries it
    assert find_runs(rng.bytes(1 << 16), keys) == []                    # and random bytes are clean


def test_no_real_day_or_run_of_three_slots_in_any_message_sent(federation):
    devices, sent = federation["devices"], federation["sent"]
    all_days = np.concatenate([d.store.days() for d in devices])
    keys = run_keys(all_days)
    n_messages = 0
    for d in devices:
        # 3 acks, 2 secure rounds of 5 steps, 2 steps of the third (aborted at masked_input: nothing pending)
        assert len(sent[d.device_id]) == 3 + 2 * 5 + 2
        for blob in sent[d.device_id]:
            assert isinstance(blob, bytes)
            assert find_runs(blob, keys) == [], (d.device_id, blob[:16])
            n_messages += 1
    assert n_messages == N_DEVICES * 15


def test_a_round_without_values_needs_the_vector_length():
    with pytest.raises(ValueError, match="num_queries"):
        run_secure_round([], None, SecureRoundConfig(1, n_min=1), np.random.default_rng(0),
                         coordinator=SecAggCoordinator())
