"""How the coordinator gets a noisy aggregate out of the devices: ask every device to prepare its vector,
then one secure noisy aggregation over those that did — each release journalled and counted exactly once.

The order matters for privacy (see :mod:`pategail.server.checkpoint`): the intent is journalled before the
secure round starts, and the accountant counts it from then on; the result is journalled the moment it
arrives, before anything uses it; a round interrupted after its release re-uses the journalled one instead of
asking the devices again.
"""
from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from pategail.sdk.contribution import ENV_L1_BOUND
from pategail.sdk.messages import Ack, ErrorReply, MessageError, from_bytes
from pategail.sdk.secagg.errors import AbortAfterUnmask
from pategail.server.checkpoint import (Release, abort_intent, journal_intent, journal_release, read_intents,
                                       read_journal)
from pategail.server.config import TrainConfig, secagg_degree_for
from pategail.server.fleet import Fleet, request_all
from pategail.server.privacy.accountant import PrivacyAccountant
from pategail.server.privacy.adjacency import SensitivityFactors
from pategail.server.privacy.plan import ReleaseNoise
from pategail.server.secagg import SecAggAbort, SecAggCoordinator, SecureRoundConfig

log = logging.getLogger(__name__)


CELL_TABLE_ROUND = 1 << 40
"""The journal's number for the cell release (pategail.server.cell_table): distinct from the environment's round 0
and from every training round."""


def secure_round_id(round_: int, attempt: int) -> int:
    """The secure-aggregation round id of attempt ``attempt`` (< 2^16) of release ``round_``. A device takes part
    only in rounds newer than the last one it joined under a coordinator key (its replay guard), so the ids
    increase in the order a run makes its releases: the cell table's (made first) in block 0, release r in
    block r + 1."""
    block = 0 if round_ == CELL_TABLE_ROUND else round_ + 1
    return (block << 16) | attempt


def release_of(round_id: int) -> int:
    """The release a secure round id belongs to (the inverse of :func:`secure_round_id`, attempt dropped)."""
    block = round_id >> 16
    return CELL_TABLE_ROUND if block == 0 else block - 1


class SecureReleases:
    """The releases of one run in ``ckpt_dir``: the fleet, the coordinator's secure-aggregation keys (every
    device of the fleet enrolled; ``signing_key``: the coordinator's Ed25519 key, a fresh one when None), the
    journal and the privacy accountant rebuilt from it."""

    def __init__(self, config: TrainConfig, fleet: Fleet, ckpt_dir: Path, seed: int, signing_key=None):
        self.config = config
        self.fleet = fleet
        self.ckpt_dir = Path(ckpt_dir)
        self.seed = seed
        assert config.privacy.delta is not None             # a run's config is resolved (for_devices)
        self.accountant = PrivacyAccountant(target_delta=config.privacy.delta)
        self.factors = SensitivityFactors()
        """What multiplies each recorded (zero-out) sensitivity under the relation the target applies to (set
        from the run's plan)."""
        self.secagg = SecAggCoordinator(signing_key)
        for device_id, keys in sorted(fleet.public_keys().items()):
            self.secagg.enroll(device_id, keys)

    def public_count(self) -> int:
        """The fixed public number of contributors a Gaussian release's sum is divided by: every device of
        the fleet (the aggregator device sits out), known before any round."""
        return len(self.fleet.device_ids) - (self.config.secagg.aggregator == "device")

    def journal(self) -> dict[int, Release]:
        """Every release journalled so far, by round (0 = the environment release)."""
        return read_journal(self.ckpt_dir)

    def rebuild_accountant(self) -> None:
        """Every secure aggregation that may have released counts, including one made after the last
        checkpoint and one whose result never reached the coordinator (see pategail/server/checkpoint.py)."""
        assert self.config.privacy.delta is not None        # a run's config is resolved (for_devices)
        self.accountant = PrivacyAccountant(target_delta=self.config.privacy.delta)
        for intent in read_intents(self.ckpt_dir):
            noise = ReleaseNoise(intent.get("mechanism", "laplace"), intent["sum_scale"], intent["sq_sum_scale"],
                                 intent.get("block", 0), intent.get("clip_norm", 0.0),
                                 intent.get("environment", False),
                                 intent.get("env_l1_bound", ENV_L1_BOUND), intent.get("cells", False))
            if noise.noisy:                                 # so it has a release
                self.accountant.record_release(
                    noise.accounting(intent["count"], intent.get("shares", 1)),  # type: ignore[arg-type]
                    kind=noise.kind)

    def check_budget(self, round_: int, length: int, noise: ReleaseNoise, reserve_rounds: int) -> None:
        """The promise of --epsilon: a release of ``length`` queries that would take the composed ε past the
        target is never started — checked before the devices are even asked, so nothing of the round happens.
        Raises BudgetExhausted (exit status 4)."""
        if not noise.noisy:
            return
        # the target applies to the plan's relation (zero-out unless the run asked for replace-one)
        after = self.accountant.epsilon_under(self.factors, extra=noise.accounting(length, self._shares()),
                                              extra_kind=noise.kind)
        assert self.config.privacy.epsilon is not None      # a noisy release: a private run
        if after > self.config.privacy.epsilon:
            from pategail.server.errors import BudgetExhausted
            raise BudgetExhausted(
                f"round {round_}: its release would take the run to ε = {after:.4g}, past the target "
                f"{self.config.privacy.epsilon:g} (δ = {self.config.privacy.delta:g}); retried releases have used "
                f"the reserve of {reserve_rounds} round(s) — nothing more is released (a larger retry_rounds "
                "reserves more for a new run)")

    def broadcast(self, message: bytes, length: int | None = None) -> tuple[list[int], int, int]:
        """Send to every device; return those that acknowledged (with a pending vector of ``length`` values,
        when given), and bytes down / up."""
        ok, down, up = [], 0, 0
        for device_id, reply in request_all(self.fleet, self.fleet.device_ids, message).items():
            down += len(message)
            if reply is None:
                log.warning("device %d did not answer", device_id)
                continue
            up += len(reply)
            try:
                answer = from_bytes(reply, expect=(Ack, ErrorReply))
            except MessageError as err:                # a device's reply that is no reply: left out
                log.warning("device %d left out: its reply is not a device-protocol reply (%s)", device_id, err)
                continue
            if isinstance(answer, Ack) and length is not None and answer.n != length:
                # an SDK of another version or a bundle with other EPR settings: its upload would not fit
                log.warning("device %d left out: it prepared %d values, the coordinator expects %d (another SDK "
                            "version or bundle?)", device_id, answer.n, length)
            elif isinstance(answer, Ack):
                ok.append(device_id)
            else:
                assert isinstance(answer, ErrorReply)       # the only other kind ``expect`` leaves
                log.warning("device %d refused round: %s (%s)", device_id, answer.message, answer.code)
        return ok, down, up

    def _n_min(self) -> int:
        n_devices = len(self.fleet.device_ids)
        return max(1, math.ceil(self.config.secagg.min_survivors * (n_devices - (self.config.secagg.aggregator == "device"))))

    def _shares(self) -> int:
        """Honest noise shares of a round: n_min − t (for the discrete Gaussian's τ)."""
        return max(1, self._n_min() - self.config.secagg.colluders)

    def honest_shares(self) -> int:
        """The noise shares a release's total noise is sized for (n_min − t): a sum over more contributors
        carries more noise than the plan's σ."""
        return self._shares()

    def release(self, round_: int, kind: str, participants: list[int], length: int,
                noise: ReleaseNoise) -> tuple[Release, int, int]:
        """The release of round ``round_``: the journalled one if there is one (nothing spent again), else a
        secure aggregation of ``length`` values over ``participants`` with ``noise`` (the mechanism, its total
        scales on each Σ and Σ², and the Gaussian mechanism's block and clip norm). Returns it and the bytes
        down / up of the secure round. Raises SecAggAbort (nothing released, nothing counted) below n_min;
        AbortAfterUnmask and TamperDetected leave the attempt counted (an aggregate may exist)."""
        journal = self.journal()
        if round_ in journal:                      # released before a crash: re-use it, spend nothing again
            log.info("round %d: re-using the release journalled before the interruption", round_)
            return journal[round_], 0, 0
        sum_scale, sq_scale = noise.sum_scale, noise.sq_sum_scale
        aggregator_sits_out = self.config.secagg.aggregator == "device"
        n_devices = len(self.fleet.device_ids)
        n_min = max(1, math.ceil(self.config.secagg.min_survivors * (n_devices - aggregator_sits_out)))
        if len(participants) - aggregator_sits_out < n_min:
            raise SecAggAbort(f"only {len(participants)} of {n_devices} devices took part in "
                              f"round {round_}; at least {n_min} must")
        if self.config.secagg.colluders >= n_min:
            from pategail.server.errors import PategailError
            raise PategailError(f"secagg_colluders={self.config.secagg.colluders} must be below n_min={n_min} "
                                f"(min_survivors of {n_devices} devices)")
        degree = secagg_degree_for(len(participants), self.config.secagg.degree,   # None: from the cohort size
                                   1.0 - self.config.secagg.min_survivors, self.config.secagg.colluders)
        config = SecureRoundConfig(round_id=secure_round_id(round_, 0), n_min=n_min, sum_noise_scale=sum_scale,
                                   sq_sum_noise_scale=sq_scale, degree=degree,
                                   aggregator=self.config.secagg.aggregator, colluders=self.config.secagg.colluders,
                                   mechanism=noise.mechanism, block=noise.block, clip_norm=noise.clip_norm)
        intent = journal_intent(self.ckpt_dir, round_, sum_scale, sq_scale, length,   # counted from here on
                                noise=noise, shares=self._shares())
        attempt = int(intent.stem.rsplit("-", 1)[1])
        config = replace(config, round_id=secure_round_id(round_, attempt))
        if noise.noisy:                                     # so it has a release
            self.accountant.record_release(noise.accounting(length, self._shares()),  # type: ignore[arg-type]
                                           kind=noise.kind)
        # the aggregator draw (aggregator="device") comes from (seed, round, attempt), not a running stream,
        # so a resumed run draws what an uninterrupted one would
        rng = np.random.default_rng([self.seed, round_, attempt])
        try:
            result = self.fleet.secure_sum(participants, config, self.secagg, rng, length)
        except AbortAfterUnmask:                   # a device aggregator had the shares: the attempt stays counted
            raise
        except SecAggAbort:                        # below n_min: the protocol released nothing
            abort_intent(intent)                   # not counted; its attempt number is never used again
            self.rebuild_accountant()
            raise
        release = Release(round_, kind, result.sum, result.sq_sum, result.n_survivors, sum_scale, sq_scale)
        journal_release(self.ckpt_dir, release)           # before anything uses it
        return release, sum(result.stats.bytes_down.values()), sum(result.stats.bytes_up.values())
