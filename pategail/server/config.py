"""The training configuration: one frozen dataclass, a docstring per field (they become `pategail train`'s
config documentation), validated on construction. Defaults are the values that worked best on the
development data (BENCHMARKS.md says how they were measured)."""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from pategail.errors import PategailError
from pategail.sdk.contribution import Granularity
from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
from pategail.sdk.secagg.graph import secagg_plus_degree
from pategail.server.fedavg.config import FedAvgConfig
from pategail.server.ppo import PPOConfig


DEFAULT_PPO = {"gamma": 0.9, "gae_lambda": 0.9, "n_epochs": 10, "anchor_coef": 10.0}
"""A short horizon: the reward of (s, a) already says how real action a looks in state s. Chosen by the
JSD to the *training* days (never the test days) of 60-round runs on pategail-geolife: γ = λ = 0.9 gave
Radius/DailyLoc/Distance/G-rank/I-rank 0.072/0.029/0.025/0.002/0.005, the SB3 defaults γ = 0.99,
λ = 0.95 0.102/0.105/0.041/0.006/0.019 (BENCHMARKS.md). 10 passes over each round's days instead of
PPOConfig's 4: late in training the policy is nearly all "stay", and with 4 it moved ~1e-4 in KL a round and
never learned when real days explore; on the sparse city 10 cut Radius, DailyLoc and I-rank 2.7–2.9× (seeds
0–1, 40 rounds), on pategail-geolife it kept every km metric within or better than the 4-epoch run's (seed 0;
last-20-round stay range 0.11 vs 0.18), on gps-csv GeoLife within a few percent (seed 0) (BENCHMARKS.md, issue
19, session 4). An anchor of weight 10 to the warm start of ``TrainConfig.action_prior`` (it acts only when that
is on, i.e. by default without privacy): 1 let the sparse city's policy drift back to 4.5% invented days, 10
kept it under 1% (BENCHMARKS.md, issue 19, sessions 5 and 6)."""


ALL_PAIRS_MAX = 100
"""Largest cohort whose default secure aggregation masks all pairs (Bonawitz et al. 2017): a complete graph
needs no argument about random graphs, and at 100 devices a device masks with 99 peers where SecAgg+ would
give it 28 — small enough a difference not to give up the simpler guarantee."""


DEGREE_FAILURE = 1e-3
"""The largest chance that dropouts make a round fail through its neighbour graph, which the default SecAgg+
degree is sized for (:func:`secagg_degree_for`)."""


def secagg_degree_for(n_devices: int, configured: int | None = None, dropout: float = 0.2,
                      colluders: int = 0) -> int:
    """The SecAgg+ degree of a round over ``n_devices`` (0 = all pairs): ``configured`` when set, else all
    pairs up to :data:`ALL_PAIRS_MAX` devices and beyond that the smallest even k at which a round with
    each device dropping out with probability ``dropout`` (the coordinator passes 1 − min_survivors: the most
    a round tolerates anyway) and ``colluders`` devices on the aggregator's side fails through its graph
    with probability at most :data:`DEGREE_FAILURE`
    (:func:`pategail.sdk.secagg.graph.secagg_plus_degree`, which says why the threshold it implies is
    k/2 + 2 + c). As Bell et al. (2020) show for SecAgg+, k = O(log n) suffices: 54 at n = 1,000 and 74 at
    100,000 for a dropout rate of 0.2; the masking work per device is then O(k) instead of O(n)."""
    if configured is not None:
        return configured
    if n_devices <= ALL_PAIRS_MAX:
        return 0
    # a round needs a majority of its participants to certify the survivor set (secagg.graph.certificate_size),
    # so sizing the graph for more than 45% dropouts would buy nothing
    return secagg_plus_degree(n_devices, min(dropout, 0.45), colluders, DEGREE_FAILURE)


METHODS = ("pategail", "dp-fedavg", "hybrid")
"""Training methods (``TrainConfig.method``)."""
MECHANISMS = ("laplace", "gaussian")
"""Reward-release mechanisms (``TrainConfig.mechanism``)."""
ADJACENCIES = ("zero-out", "replace-one")
"""Neighbouring relations a target ε can apply to (``TrainConfig.adjacency``; pategail.server.privacy.adjacency)."""


PLACE_LAW_MIN_DEVICES = 50
"""Devices a run needs for the place law by default: relevance is the visit histogram of the devices' owners,
and a handful of people's homes and haunts are not a city's places. Measured: 10 devices (the embedded data,
two runs) worse than the classic laws on 3–4 of 5 km metrics; 83, 155 and 179 devices (three cities, three
seeds each) better (BENCHMARKS.md, issue 17, session 7); on random 25 and 50 users of the gps-csv city (two seeds
each, session 8) it halved Density at both but lost one more km metric than the classic laws at 25 (G-rank), not
at 50."""


@dataclass(frozen=True)
class TrainConfig:
    """Algorithm 1 of the paper over a population of devices."""

    rounds: int = 60
    """Rounds of Algorithm 1 (sample, train discriminators, score, aggregate, PPO)."""
    days_per_round: int = 96
    """Generated days sent to the devices each round; M = 47 × this pairs are scored and released."""
    average_rounds: int = 20
    """The published policy is the mean of the policy weights after each of the last N rounds (Polyak–Ruppert
    tail averaging, as SWA does for networks); 1 publishes the last iterate. Adversarial training makes the
    last iterate swing from round to round (the share of "stay" moved between 0.26 and 0.67 over rounds
    30–60 of one run); against the training days the average of the last 20 rounds beat every single round
    of two runs on DailyLoc and I-rank, and the epr baseline on all five metrics (BENCHMARKS.md)."""
    disc_steps: int = 20
    """Discriminator training steps on each device per round (k). 20 (was 10) since issue 19: once PPO's
    steps were no longer shrunk by the value loss (pategail.server.ppo.PPOConfig.scale_rewards), the policy
    outran the discriminators on the sparse city and overshot into all-stay days; twice the steps (with
    label smoothing) won on training days across three cities (BENCHMARKS.md)."""
    disc_batch_size: int = 64
    """Pairs per discriminator step: half the device's real pairs, half generated ones."""
    disc_label_smoothing: float = 0.1
    """One-sided label smoothing of the devices' discriminators: real pairs are trained towards 1 − this
    (written into the bundle's manifest; the ONNX loss takes soft targets). Chosen with ``disc_steps`` on
    training days (BENCHMARKS.md, issue 19)."""
    disc_weight_decay: float = 0.01
    """Decoupled (AdamW) weight decay of the devices' discriminators (baked into the bundle's optimizer model)."""
    disc_owner_scaling: bool = False
    """Devices standardise their discriminator's inputs by their owner's real pairs (mean, std floored at one
    count unit; pategail.sdk.discriminator_round.owner_scaler). Off: on the sparse city it made the
    discriminators punish a 5th cell (mean D 0.52 → 0.16) but the invented days stayed (3.2% vs 2.9%), and the
    other metrics got worse (BENCHMARKS.md, issue 19, session 2)."""
    disc_replay_share: float = 0.0
    """Share of the generated half of each discriminator minibatch that devices draw from earlier rounds'
    generated pairs (replay against the game's cycling; pategail.sdk.replay); 0 = off (the bundle then
    declares no replay). 0.5 halved the last iterate's swing on the paper's GeoLife (stay std 0.043–0.055 →
    0.025–0.030, 2 seeds) but cost the published model DailyLoc there and did not steady gps-csv GeoLife in a
    short run, so it is off by default (BENCHMARKS.md, issue 19, session 2)."""
    disc_replay_rounds: int = 10
    """Earlier rounds a device's replay buffer spans."""
    disc_replay_pairs: int = 256
    """Generated pairs of each round a device keeps in its replay buffer."""
    reward: str = "r_hat"
    """PPO's reward of a generated pair, from the release: "r_hat" = R̂ = R − βξ (the paper's eq. for the
    dynamics-compensated reward, bounded in [−β, 1]); "log" = log max(R̂, ``reward_floor``), GAIL's log D form
    (Ho & Ermon 2016) — a post-processing of the release, so no privacy cost. R̂ caps what a pair that no real
    day has can cost at ~0.5 below a typical pair; log R̂ makes it cost ~log(0.5 / floor). Days have a fixed 47
    decisions, so negative rewards carry no early-termination bias here. "r_hat" stays the default: "log" did
    not reduce the sparse city's invented 5+-cell days (3.7% vs 2.9%; BENCHMARKS.md, issue 19, session 2)."""
    reward_floor: float = 1e-3
    """Floor of R̂ under the "log" reward (R̂ can be ≤ 0: β·ξ, or noise under privacy)."""
    beta: float = 0.5
    """β of R̂ = R − βξ (the paper's reward dynamics compensation; Theorem 1: R̂ lower-bounds a random
    user's reward with probability ≥ 1 − 1/β² when β > 1). Applied to the released mean and variance."""
    kappa: float = 2.0
    """κ > 1 of Theorem 3: the share of the per-query budget spent on the mean is 1/κ, the rest on ξ."""
    mechanism: str | None = None
    """How rewards are released. ``gaussian``: each device releases its centred scores D − ½ averaged over each
    block of ``granularity``, the vector L2-clipped to ``clip_share`` of its largest possible norm, summed by the
    secure aggregation with distributed discrete Gaussian noise; the coordinator divides by the fixed number of
    devices (pategail.sdk.secagg.noise, pategail.server.privacy.gaussian). No Σ D² is released, so β does not
    apply. ``laplace``: the paper's mechanism — Σ D and Σ D² of every (state, action) pair with distributed
    discrete Laplace noise, R̂ = R − βξ (Theorems 2–3; granularity must be ``pair``). None (the default):
    ``gaussian`` with ``--epsilon`` — at 1,000 devices and ε = 8 Gaussian/day beat epr on 4 of 5 km metrics on
    two seeds where Laplace/pair beat it on none (BENCHMARKS.md, "privacy–utility") — and, without privacy,
    the paper's layout (``laplace``: pair sums, R̂), which releases the same values without noise."""
    granularity: str | None = None
    """Decisions per released reward (pategail.sdk.contribution.Granularity): ``pair``, ``block:K`` (K
    consecutive decisions of a day) or ``day`` (one reward per generated day, 47× fewer values than pair).
    None (the default): ``day`` with the Gaussian mechanism (the only granularity whose measured noise tolerance
    a private run of 1,000 devices meets; pategail.server.privacy.feasibility), ``pair`` with Laplace."""
    clip_share: float = 1.0
    """Gaussian mechanism: the L2 clip norm C of a device's released vector as a share of the largest norm
    ½·√(values) it can have (1: nothing is ever clipped). The noise is proportional to C."""
    env_epsilon_fraction: float | None = None
    """The share of the total ε spent on the environment release (initial states, explore and place laws, and
    with the Gaussian mechanism their coarse parts over regions), released as one vector query: with its L2
    sensitivity (Gaussian) or, with the Laplace mechanism, its L1 sensitivity at Laplace scale Δ₁ / (share ·
    ε) (pure DP); the rest goes to the rewards. None (the default): chosen for the run's device count by
    :func:`pategail.server.privacy.defaults.environment_share` — with the Gaussian mechanism the largest share
    in [0.1, 0.5] that keeps the rewards' noise within the measured tolerance, 0.1 with Laplace.
    ``pategail privacy-plan`` prints what each part gets."""
    tolerance_noise_std: float = 0.0
    """EXPERIMENT ONLY, NOT PRIVATE (refused with --epsilon): Gaussian noise of this standard deviation added
    by the coordinator to every released mean reward (per block of ``granularity``), from the run's seeded
    generator — measures how much noise the generator tolerates (BENCHMARKS.md, issue 13). Every output of
    such a run says it is not private."""
    target_epsilon: float | None = None
    """Total (ε, δ) of the whole run, initial-state release included; None trains without noise (the paper's
    Table 1 setting). The per-query ε is chosen so that the composition meets it."""
    target_delta: float | None = None
    """δ of the total guarantee. None (the default): min(1e-5, N^-1.1) for a run of N devices
    (:func:`pategail.server.privacy.defaults.default_delta`), well below 1/N: a mechanism that publishes one
    random user's data outright is (0, 1/N)-DP, so δ near 1/N promises nothing."""
    adjacency: str = "zero-out"
    """The neighbouring relation the target ε applies to (the noise is calibrated with its sensitivities).
    ``zero-out`` (the default): one user's data replaced by nothing while the device still takes part — the
    relation of DP-FTRL (Kairouz et al. 2021), exact here because every enrolled device is asked every round
    and the coordinator divides by a fixed count. ``replace-one``: one user's data swapped for another's,
    the stronger statement (twice the Gaussian rewards' sensitivity; pategail.server.privacy.adjacency).
    Every guarantee printed gives the ε of both relations."""
    retry_rounds: int = 1
    """Rounds' worth of releases the privacy plan keeps in reserve: a release that started but was not used
    (a crash after its secure aggregation began, a detected tampering) is counted and asked for again. The
    noise is calibrated for the planned releases plus this reserve; a release that would take the composed ε
    past the target is never started (the run stops with a message instead)."""
    min_survivors: float = 0.8
    """n_min as a share of the devices asked: fewer survivors and the round releases nothing (noise shares
    are sized for n_min, so the released sums carry at least the intended noise). A round also needs a
    majority of its participants to certify the survivor set (docs/secure-aggregation.md), so a share at or
    below one half acts as a majority. 1 − this is the dropout rate the SecAgg+ degree is sized for."""
    secagg_degree: int | None = None
    """SecAgg+ neighbours per device (even); 0 = all pairs; None (the default) chooses from the number n of
    devices in the round (:func:`secagg_degree_for`): all pairs up to ``ALL_PAIRS_MAX`` devices, beyond that
    the SecAgg+ Harary graph with the smallest degree that survives the dropouts ``min_survivors`` allows
    (54 at n = 1,000). The Shamir threshold is the one the protocol's security argument needs for the graph
    and ``secagg_colluders`` (pategail.sdk.secagg.graph.secure_threshold: ⌊(n + c)/2⌋ + 1 for all pairs,
    k/2 + 2 + c for SecAgg+)."""
    secagg_colluders: int = 0
    """t: devices that may collude with the coordinator (reveal their noise shares to it). Noise shares are
    sized for n_min − t, so the honest survivors alone add the full noise; 0 trusts every device with its
    share (7 colluders of 67 would then cut the noise std to √(60/67) = 0.946 of the target)."""
    aggregator: str = "coordinator"
    """Who sums the masked uploads: "coordinator" or "device" (one drawn at random each round)."""
    alpha: float = DEFAULT_ALPHA
    """EPR explore exponent of the environment (see pategail.sdk.epr)."""
    candidates: int = DEFAULT_CANDIDATES
    """EPR explore candidate-set size."""
    place_law: bool | None = None
    """Generate with the learned place law (d-EPR: explore ∝ relevance × rank law, the rank law re-calibrated
    under relevance; return favouring the place just left; pategail.sdk.places, pategail.server.places),
    released with the initial states; false: the classic EPR laws (the devices contribute either way, so the
    privacy cost is the same). See :meth:`uses_place_law`: None (the default) is on for runs without privacy
    over at least ``PLACE_LAW_MIN_DEVICES`` devices. Chosen on the training days of three cities of 83–179
    devices, three seeds each (BENCHMARKS.md, issue 17, session 7): with the re-calibrated rank law it beats
    epr on ≥ 4 of 5 km metrics on all three and on Density and Trips on the paper's GeoLife, where the classic
    laws lose Trips; session 6's place law (without the re-calibration) lost the sparse city's Distance. On
    the embedded 10 users (`make run`) it lost 3 and 4 of 5 km metrics to epr in two runs where the classic
    laws won 5 of 5. Under privacy it stays off: its relevance is one noisy value per cell; at ε = 8 with 1,000
    devices it cut Density by 13% but made Distance worse and left Trips within the seed range, and with 83
    devices it made Trips worse (training days, two seeds each; BENCHMARKS.md, issue 17, session 9)."""
    first_cell_alpha: float | None = None
    """Where a generated day that does not start at home starts. None: a cell drawn from the released
    first-cell shares, independent of the home. A number α: among the home's ``candidates`` nearest cells,
    weight (released share) × rank^−α (pategail.server.initial_states.FirstCellLaw) — post-processing of the
    same release, no privacy cost. Off: on the sparse city α = 0.4 put first cells as far from home as real
    ones (median 3.6 km vs 3.7; independent of home: 7.6), the feature the discriminators told its generated
    days apart by, but did not improve the km metrics (one seed; BENCHMARKS.md, issue 19, session 4)."""
    action_prior: bool | None = None
    """Warm-start the policy from a privately released rule model (pategail.server.action_prior): the bundle
    asks devices for the action-rate part of their environment vector (w × their decisions' shares by time of
    day, at home, distinct cells so far and action; pategail.sdk.action_rates), the coordinator turns the noisy
    sums into P(action | slot bucket, at home, distinct bucket), samples ``action_prior_days`` days from the
    EPR environment driven by it and fits the policy to its rates by behaviour cloning before round 1; PPO's
    anchor (``ppo.anchor_coef``, ``ppo.anchor_mode``) then keeps GAIL from walking back into days that explore
    at nearly every slot. The release grows by the part's length (and the Laplace L1 bound by 1); the rest is
    post-processing. None (the default): on without privacy (no noise on the environment release), off under
    privacy — at realistic device counts the 320-entry table drowns in the noise (σ ≈ 35 per entry at ε = 8
    against a sparse city's total of 56) and the larger L1 bound costs every other part of the environment
    release. true / false force it (with the Gaussian mechanism the environment clip grows to √(12 + 277/47²):
    pategail.server.privacy.gaussian.env_l2_bound). See :attr:`uses_action_prior`; the measurements are in
    BENCHMARKS.md (issue 19, sessions 5 and 6)."""
    action_prior_days: int = 2048
    """Rule-model days the policy is cloned on (``action_prior``)."""
    action_prior_epochs: int = 30
    """Passes of behaviour cloning over them. 30: on the sparse city the cloned policy then makes 0.98% days above
    the real 99.9th percentile of distinct cells (the rule model itself 0.2–0.4%), DailyLoc 0.0043; with 10,
    1.74% and 0.0097 (seed 0, training days; BENCHMARKS.md, issue 19, session 5)."""
    action_prior_lr: float = 1e-3
    """Adam learning rate of the behaviour cloning."""
    d_model: int = 64
    """Policy transformer width (token size). ``{"d_model": 32, "distinct_embedding": true}`` is the fast shape:
    4,294–4,373 days per CPU second through `pategail generate` for 100,000 days on one idle core against
    2,854–2,919, and within this default's seed range on every km metric of all three tuning cities' training days
    without privacy (three seeds each) — but worse under privacy (ε = 8, 1,000 devices, one seed: 4 of 5 km
    metrics) and on the 10 embedded users, so not the default. Width 32 alone, and 48, failed on the sparse city
    (BENCHMARKS.md, issue 17, session 10). A checkpoint resumes only with the shape it was made with."""
    distinct_embedding: bool = False
    """The policy embeds the exact number of distinct cells visited so far (pategail.server.policy.PolicyConfig
    .distinct_embedding), so that "explore" can depend on it sharply. Part of the fast shape (see ``d_model``):
    it is what lets a width-32 policy keep the sparse city's count of places. With width 64 and before the warm
    start: alone it hardly changed the sparse city's invented 5+-cell days (2.5% vs 2.9%); with
    ``ppo.balance_distinct`` it cut them (0.6% / 2.1%, seeds 0 / 1) but cost the paper's GeoLife DailyLoc
    (0.026 vs 0.008, seed 0; BENCHMARKS.md, issue 19, session 3)."""
    n_layers: int = 2
    """Policy transformer blocks. One block generates ~1.5× the days per CPU second (4,169–4,177 against
    2,645–3,225 in process on one core; BENCHMARKS.md, issue 17, session 8) and was as good as two on the
    training days of the gps-csv and the paper's GeoLife cities, but not on the sparse city (1.22% invented days
    against 0.96%, a worse DailyLoc): the fast option, not the default."""
    n_heads: int = 1
    """Attention heads of the policy transformer; must divide ``d_model``. One head: ~20% fewer CPU seconds per
    generated day than four (2,541–2,546 against 1,946–2,150 days per CPU second in process on an idle core;
    BENCHMARKS.md, issue 17, session 7) and as good as four on the training days of all three tuning cities,
    three seeds each (sessions 6 and 7). A checkpoint made with another head count resumes only with it (e.g.
    ``{"n_heads": 4}`` for runs from before session 7)."""
    ppo: PPOConfig = field(default_factory=lambda: PPOConfig(**DEFAULT_PPO))
    """PPO knobs (pategail.server.ppo.PPOConfig); a config file's "ppo" object overrides some of them."""
    # -- the training method (DP-FedAvg: pategail.server.fedavg) --
    method: str = "pategail"
    """"pategail" (the default): devices train discriminators and release noisy rewards, the coordinator runs
    PPO. "dp-fedavg": devices fit the policy to their own days by maximum likelihood and release clipped model
    deltas with the Gaussian mechanism (user-level DP-FedAvg, McMahan et al. 2018; docs/dp-fedavg.md) — the
    same environment release, secure aggregation, plan, accountant and ledgers. "hybrid": ``fedavg.hybrid_rounds``
    DP-FedAvg rounds (a private warm start), then PateGail's rounds, under one plan."""
    fedavg: FedAvgConfig = field(default_factory=FedAvgConfig)
    """DP-FedAvg settings (pategail.server.fedavg.config.FedAvgConfig); a config file's "fedavg" object
    overrides some of them."""

    def __post_init__(self):
        # None settings that do not depend on the device count are resolved here, so that a run's recorded
        # config says what it ran; δ and the environment's share wait for :meth:`for_devices`
        if self.mechanism is None:
            object.__setattr__(self, "mechanism", "gaussian" if self.private else "laplace")
        if self.granularity is None:
            object.__setattr__(self, "granularity", "day" if self.mechanism == "gaussian" else "pair")
        if self.n_heads < 1 or self.d_model < 1 or self.d_model % self.n_heads:
            raise PategailError(f"n_heads must be >= 1 and divide d_model ({self.d_model}), got {self.n_heads}")
        if self.rounds < 1 or self.days_per_round < 1 or self.disc_steps < 0 or self.disc_batch_size < 2:
            raise PategailError("rounds and days_per_round must be >= 1, disc_steps >= 0, disc_batch_size >= 2")
        if self.disc_weight_decay < 0:
            raise PategailError(f"disc_weight_decay must be >= 0, got {self.disc_weight_decay}")
        if not 0 <= self.disc_replay_share < 1 or self.disc_replay_rounds < 1 or self.disc_replay_pairs < 1:
            raise PategailError("disc_replay_share must be in [0, 1), disc_replay_rounds and disc_replay_pairs >= 1")
        if not 0 <= self.disc_label_smoothing < 0.5:
            raise PategailError(f"disc_label_smoothing must be in [0, 0.5), got {self.disc_label_smoothing}")
        if self.first_cell_alpha is not None and not (math.isfinite(self.first_cell_alpha)
                                                      and self.first_cell_alpha >= 0):
            raise PategailError(f"first_cell_alpha must be null or a number >= 0, got {self.first_cell_alpha}")
        if self.action_prior_days < 1 or self.action_prior_epochs < 0 or not self.action_prior_lr > 0:
            raise PategailError("action_prior_days must be >= 1, action_prior_epochs >= 0, action_prior_lr > 0")
        if self.average_rounds < 1:
            raise PategailError(f"average_rounds must be >= 1, got {self.average_rounds}")
        if self.reward not in ("r_hat", "log") or not 0 < self.reward_floor < 1:
            raise PategailError(f"reward must be 'r_hat' or 'log' and reward_floor in (0, 1), got "
                                f"{self.reward!r}, {self.reward_floor}")
        if self.kappa <= 1 or self.beta < 0:
            raise PategailError(f"kappa must be > 1 and beta >= 0 (got kappa {self.kappa}, beta {self.beta})")
        if self.target_epsilon is not None and not self.target_epsilon > 0:
            raise PategailError(f"--epsilon must be > 0, got {self.target_epsilon}")
        if self.target_delta is not None and not 0 < self.target_delta < 1:
            raise PategailError(f"--delta must be in (0, 1), got {self.target_delta}")
        if self.adjacency not in ADJACENCIES:
            raise PategailError(f"adjacency must be one of {', '.join(ADJACENCIES)}, got {self.adjacency!r}")
        if not 0 < self.min_survivors <= 1:
            raise PategailError(f"min_survivors must be in (0, 1], got {self.min_survivors}")
        if self.aggregator not in ("coordinator", "device"):
            raise PategailError(f"aggregator must be 'coordinator' or 'device', got {self.aggregator!r}")
        if self.secagg_degree is not None and (self.secagg_degree < 0 or self.secagg_degree % 2):
            raise PategailError("secagg_degree must be 0 (all pairs), a positive even number or null (chosen "
                                "from the number of devices)")
        if self.retry_rounds < 0:
            raise PategailError(f"retry_rounds must be >= 0, got {self.retry_rounds}")
        if self.mechanism not in MECHANISMS:
            raise PategailError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {self.mechanism!r}")
        try:
            block = Granularity.parse(self.granularity).block
        except ValueError as err:
            raise PategailError(f"granularity {self.granularity!r}: {err}") from None
        if self.mechanism == "laplace" and block != 1 and self.private:
            raise PategailError(f"granularity {self.granularity!r} needs mechanism 'gaussian' (the Laplace "
                                "mechanism of Theorems 2-3 releases one Σ D and Σ D² per pair)")
        if not 0 < self.clip_share <= 1:
            raise PategailError(f"clip_share must be in (0, 1], got {self.clip_share}")
        if self.env_epsilon_fraction is not None and not 0 < self.env_epsilon_fraction < 1:
            raise PategailError(f"env_epsilon_fraction must be in (0, 1), got {self.env_epsilon_fraction}")
        if not (self.tolerance_noise_std >= 0 and math.isfinite(self.tolerance_noise_std)):
            raise PategailError(f"tolerance_noise_std must be >= 0, got {self.tolerance_noise_std}")
        if self.tolerance_noise_std > 0 and self.private:
            raise PategailError("tolerance_noise_std is an experiment without privacy: not with --epsilon")
        if self.secagg_colluders < 0:
            raise PategailError(f"secagg_colluders must be >= 0, got {self.secagg_colluders}")
        if self.method not in METHODS:
            raise PategailError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.method != "pategail" and self.private and self.mechanism != "gaussian":
            raise PategailError(f"method {self.method} releases model deltas with the Gaussian mechanism: leave "
                                "mechanism out or set it to 'gaussian'")
        if self.method == "hybrid" and self.fedavg.hybrid_rounds >= self.rounds:
            raise PategailError(f"method hybrid: fedavg.hybrid_rounds ({self.fedavg.hybrid_rounds}) must be below "
                                f"rounds ({self.rounds}), which include the PateGail rounds after them")

    @property
    def private(self) -> bool:
        return self.target_epsilon is not None

    @property
    def resolved(self) -> bool:
        """Whether the settings that depend on the device count (δ, the environment's share) are set."""
        return self.target_delta is not None and self.env_epsilon_fraction is not None

    def for_devices(self, devices: int) -> "TrainConfig":
        """This config for a run of ``devices`` devices: δ and the environment's share of ε filled in where
        they are None (pategail.server.privacy.defaults; without privacy their fixed defaults, whatever the
        device count); the same config when both are set."""
        if self.resolved:
            return self
        from pategail.server.privacy.defaults import DELTA_CAP, default_delta, environment_share
        config = self
        if config.target_delta is None:       # without privacy nothing depends on it: the same for every N
            config = dataclasses.replace(config, target_delta=default_delta(devices) if self.private else DELTA_CAP)
        if config.env_epsilon_fraction is None:
            config = dataclasses.replace(config, env_epsilon_fraction=environment_share(config, devices))
        return config

    @property
    def uses_action_prior(self) -> bool:
        """``action_prior`` resolved: the setting when it is true or false; None is on exactly when the run has
        no privacy (either mechanism)."""
        if self.action_prior is not None:
            return self.action_prior
        return not self.private

    def uses_place_law(self, devices: int) -> bool:
        """``place_law`` resolved for a run over ``devices`` devices: the setting when it is true or false; None
        is on when the run has no privacy (either mechanism) and at least ``PLACE_LAW_MIN_DEVICES`` devices."""
        if self.place_law is not None:
            return self.place_law
        return not self.private and devices >= PLACE_LAW_MIN_DEVICES

    @property
    def reward_granularity(self) -> Granularity:
        return Granularity.parse(self.granularity)

    @property
    def region_cells(self) -> int:
        """Cells per region of the environment release's coarse parts: ``pategail.sdk.regions.REGION_CELLS``
        with the Gaussian mechanism (whose devices clip the whole vector, coarse parts included, to its L2
        bound), 0 (no coarse parts: the layout the Java core also speaks) with Laplace."""
        from pategail.sdk.regions import REGION_CELLS
        return REGION_CELLS if self.mechanism == "gaussian" else 0

    @property
    def tolerance_experiment(self) -> bool:
        """True for a non-private noise-tolerance experiment (``tolerance_noise_std`` > 0)."""
        return self.tolerance_noise_std > 0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "config") -> "TrainConfig":
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise PategailError(f"{where}: unknown setting(s) {', '.join(sorted(unknown))}")
        for f in dataclasses.fields(cls):
            if f.name in d:
                _check_type(f.name, f.type, d[f.name], where)
        try:
            for key, section, base, what in (("ppo", PPOConfig, DEFAULT_PPO, "PPO"),
                                             ("fedavg", FedAvgConfig, {}, "DP-FedAvg")):
                if key in d:
                    if not isinstance(d[key], dict):
                        raise PategailError(f"{where}: \"{key}\" must be an object of {what} settings")
                    for f in dataclasses.fields(section):
                        if f.name in d[key]:
                            _check_type(f"{key}.{f.name}", f.type, d[key][f.name], where)
                    d[key] = section(**{**base, **d[key]})
            return cls(**d)
        except TypeError as e:
            raise PategailError(f"{where}: {e}") from None
        except ValueError as e:
            raise PategailError(f"{where}: {e}") from None

    @classmethod
    def from_file(cls, path: Path, **overrides) -> "TrainConfig":
        """A JSON file of settings (any subset of the fields; "ppo" as an object), then ``overrides``."""
        try:
            d = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise PategailError(f"{path}: no such config file") from None
        except json.JSONDecodeError as e:
            raise PategailError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(d, dict):
            raise PategailError(f"{path}: expected a JSON object of settings")
        return cls.from_dict({**d, **overrides}, where=str(path))


_KINDS = {"bool": ((bool,), "true or false"), "int": ((int,), "a whole number"),
          "float": ((int, float), "a number"), "str": ((str,), "a string")}


def _check_type(name: str, annotation: str, value, where: str) -> None:
    """A config file's value for setting ``name`` has the JSON type its annotation says (a string "false" would
    otherwise switch a boolean setting on)."""
    kind, _, optional = str(annotation).partition(" | ")
    if kind not in _KINDS or (optional == "None" and value is None):
        return
    types, words = _KINDS[kind]
    if not isinstance(value, types) or (kind != "bool" and isinstance(value, bool)):
        raise PategailError(f"{where}: \"{name}\" must be {words}{' or null' if optional else ''}, got {value!r}")


def setting_differences(recorded: dict, now: dict, where: str, prefix: str = "") -> list[str]:
    """``"name: A in <where>, B now"`` for each setting that differs between two nested dicts of settings (a
    nested one named ``ppo.n_epochs``; values written as in a config file), so that a refused resume says what
    to change."""
    out = []
    for key in sorted(set(recorded) | set(now), key=str):
        a, b = recorded.get(key), now.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += setting_differences(a, b, where, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {_brief(a)} in {where}, {_brief(b)} now")
    return out


def _brief(value, limit: int = 60) -> str:
    """A setting's value as JSON, a long list cut to its first items and its length (a run's 1,000 device ids
    must not make a one-line error a page long), another long value to its end."""
    text = json.dumps(value)
    if len(text) <= limit:
        return text
    if isinstance(value, (list, tuple)):
        return f"[{', '.join(json.dumps(v) for v in value[:3])}, … ({len(value):,} values)]"
    return "…" + text[-(limit - 1):]              # a path differs at its end
