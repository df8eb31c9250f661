"""The training configuration: a frozen dataclass of seven sections — the policy, PPO, the devices'
discriminators, privacy, secure aggregation, the environment and DP-FedAvg — each a dataclass with a docstring per
setting, validated on construction. A config file is a JSON object with the same shape:

    {"rounds": 60, "privacy": {"mechanism": "laplace"}, "ppo": {"n_epochs": 4}}

Every setting has one default, the value that worked best on the development cities' training days
(BENCHMARKS.md says how each was measured)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from pategail.sdk.contribution import DAYS_CAP, Granularity
from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
from pategail.sdk.secagg.graph import secagg_plus_degree
from pategail.server.errors import PategailError
from pategail.server.fedavg.config import FedAvgConfig
from pategail.server.ppo import PPOConfig
from pategail.server.privacy.mechanisms import PLANNED, PlannedMechanism, planned

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
MECHANISMS = tuple(PLANNED)
"""Reward-release mechanisms (``PrivacySettings.mechanism``)."""
ADJACENCIES = ("zero-out", "replace-one")
"""Neighbouring relations a target ε can apply to (``PrivacySettings.adjacency``; pategail.server.privacy.adjacency)."""
CELL_TABLES = ("dataset", "released")
"""Where a run's cell table comes from (``PrivacySettings.cells``)."""

INITIAL_STATES_DAYS_CAP = 1000
"""The initial-state part's cap without privacy (``EnvironmentSettings.initial_states_days_cap``): about three
years of days, above every user of the three development cities but one (1,018 days), so the released homes
follow the days — users with more than 100 days hold 45–57% of those cities' days. It only has to keep every
entry in [0, 1] and well above the secure sum's fixed-point step (a one-day device's weight 1/1000 is ~17,000
steps). Chosen on the training days of three cities, three seeds each (BENCHMARKS.md, "Quality without
privacy"); applying it to every part of the environment vector instead did worse on the km metrics of all
three (one seed): the laws (explore, places, action rates) are better learned with users weighted more evenly."""

PLACE_LAW_MIN_DEVICES = 50
"""Devices a run needs for the place law by default: relevance is the visit histogram of the devices' owners,
and a handful of people's homes and haunts are not a city's places. Measured: 10 devices (the embedded data)
worse than the classic laws on 3–4 of 5 km metrics; 83, 155 and 179 devices (three cities, three seeds each)
better; on random 25 and 50 users of the gps-csv city it halved Density at both but lost one more km metric
than the classic laws at 25, not at 50."""


def _need(ok: bool, message: str) -> None:
    if not ok:
        raise PategailError(message)


@dataclass(frozen=True)
class PolicySettings:
    """The generator: a causal transformer over a day's slots (pategail.server.policy). A checkpoint resumes
    only with the shape it was made with."""

    d_model: int = 64
    """Token width. Width 32 generates ~1.5× the days per CPU second and matched 64 without privacy on the three
    tuning cities, but was worse under privacy (ε = 8, 1,000 devices) and on the 10 embedded users."""
    n_layers: int = 2
    """Transformer blocks. One block generates ~1.5× the days per CPU second and was as good as two on two of the
    three tuning cities, not on the sparse one (more invented days, a worse DailyLoc)."""
    n_heads: int = 1
    """Attention heads; must divide ``d_model``. One head costs ~20% fewer CPU seconds per generated day than
    four and was as good on all three tuning cities (three seeds each)."""

    def __post_init__(self):
        _need(self.n_heads >= 1 and self.d_model >= 1 and self.d_model % self.n_heads == 0,
              f"policy.n_heads must be >= 1 and divide policy.d_model ({self.d_model}), got {self.n_heads}")
        _need(self.n_layers >= 1, f"policy.n_layers must be >= 1, got {self.n_layers}")


@dataclass(frozen=True)
class DiscriminatorSettings:
    """The devices' discriminators, trained with ONNX Runtime on each device (baked into the bundle)."""

    steps: int = 20
    """Training steps on each device per round (k). Twice the 10 of the paper's setting, with label smoothing:
    otherwise the policy outran the discriminators on the sparse city and overshot into all-stay days."""
    batch_size: int = 64
    """Pairs per step: half the device's real pairs, half generated ones."""
    label_smoothing: float = 0.1
    """One-sided label smoothing: real pairs are trained towards 1 − this (written into the bundle's manifest;
    the ONNX loss takes soft targets)."""
    weight_decay: float = 0.01
    """Decoupled (AdamW) weight decay (baked into the bundle's optimizer model)."""

    def __post_init__(self):
        _need(self.steps >= 0 and self.batch_size >= 2,
              "discriminator.steps must be >= 0 and discriminator.batch_size >= 2")
        _need(0 <= self.label_smoothing < 0.5,
              f"discriminator.label_smoothing must be in [0, 0.5), got {self.label_smoothing}")
        _need(self.weight_decay >= 0, f"discriminator.weight_decay must be >= 0, got {self.weight_decay}")


@dataclass(frozen=True)
class PrivacySettings:
    """What is released and with how much noise (pategail.server.privacy; docs/privacy.md)."""

    epsilon: float | None = None
    """Total ε of the whole run, every release included (`--epsilon`); None trains without noise (the paper's
    Table 1 setting). The noise is calibrated so that the composition meets it."""
    delta: float | None = None
    """δ of the total guarantee (`--delta`). None: min(1e-5, N^-1.1) for a run of N devices
    (:func:`pategail.server.privacy.defaults.default_delta`), well below 1/N: a mechanism that publishes one
    random user's data outright is (0, 1/N)-DP, so δ near 1/N promises nothing."""
    adjacency: str = "zero-out"
    """The neighbouring relation ε applies to (the noise is calibrated with its sensitivities). ``zero-out``: one
    user's data replaced by nothing while the device still takes part — the relation of DP-FTRL (Kairouz et
    al. 2021), exact here because every enrolled device is asked every round and the coordinator divides by a
    fixed count. ``replace-one``: one user's data swapped for another's, the stronger statement (twice the
    Gaussian rewards' sensitivity). Every printed guarantee gives the ε of both relations."""
    mechanism: str | None = None
    """How rewards are released. ``gaussian``: each device releases its centred scores D − ½ averaged over each
    block of ``granularity``, L2-clipped, summed by the secure aggregation with distributed discrete Gaussian
    noise; the coordinator divides by the fixed number of devices. ``laplace``: the paper's mechanism — Σ D and
    Σ D² of every (state, action) pair with distributed discrete Laplace noise, R̂ = R − βξ (Theorems 2–3;
    granularity ``pair``). None: ``gaussian`` with ``epsilon`` — at 1,000 devices and ε = 8 it beat epr on 4
    of 5 km metrics on two seeds where Laplace beat it on none — and, without privacy, the paper's layout
    (``laplace``), which releases the same values without noise."""
    granularity: str | None = None
    """Decisions per released reward (pategail.sdk.contribution.Granularity): ``pair``, ``block:K`` (K
    consecutive decisions of a day) or ``day`` (one reward per generated day, 47× fewer values than pair).
    None: ``day`` with the Gaussian mechanism (the granularity whose measured noise tolerance a private run of
    1,000 devices meets; pategail.server.privacy.feasibility), ``pair`` with Laplace."""
    clip_share: float = 1.0
    """Gaussian mechanism: the L2 clip norm C of a device's released vector as a share of the largest norm
    ½·√(values) it can have (1: nothing is ever clipped). The noise is proportional to C."""
    env_epsilon_fraction: float | None = None
    """The share of ε spent on the environment release (initial states, explore and place laws, their coarse
    parts over regions), one vector query; the rest goes to the rewards. None: chosen for the run's device
    count by :func:`pategail.server.privacy.defaults.environment_share` — with the Gaussian mechanism the
    largest share in [0.1, 0.5] that keeps the rewards' noise within the measured tolerance, 0.1 with Laplace.
    ``pategail privacy-plan`` prints what each part gets."""
    beta: float = 0.5
    """β of R̂ = R − βξ (the paper's reward dynamics compensation, Laplace mechanism; Theorem 1: R̂ lower-bounds
    a random user's reward with probability ≥ 1 − 1/β² when β > 1)."""
    kappa: float = 2.0
    """κ > 1 of Theorem 3 (Laplace mechanism): the share of the per-query budget spent on the mean is 1/κ, the
    rest on ξ."""
    cells: str = "dataset"
    """The cell table the run uses. ``dataset``: the data folder's own table (a private run needs a public one,
    ``data prepare --public-cells``). ``released`` (`--cells released`, private runs on a public map): the
    run's first release is a privately released table — the squares of the public map that enough devices
    visit, through the secure aggregation with Gaussian noise for a share of the target's ρ and a threshold
    (pategail.server.privacy.cell_release; docs/cell-universe.md); the devices move their days onto it and
    everything after uses it."""
    retry_rounds: int = 1
    """Rounds' worth of releases the plan keeps in reserve: a release that started but was not used (a crash
    after its secure aggregation began, a detected tampering) is counted and asked for again. A release that
    would take the composed ε past the target is never started (the run stops with a message instead)."""

    def __post_init__(self):
        # the defaults that depend only on this section are resolved here, so that a run's recorded config
        # says what it ran; δ and the environment's share wait for TrainConfig.for_devices
        if self.mechanism is None:
            object.__setattr__(self, "mechanism", "gaussian" if self.private else "laplace")
        _need(self.mechanism in MECHANISMS,
              f"privacy.mechanism must be one of {', '.join(MECHANISMS)}, got {self.mechanism!r}")
        if self.granularity is None:
            object.__setattr__(self, "granularity", self.scheme.default_granularity)
        _need(self.epsilon is None or self.epsilon > 0, f"--epsilon must be > 0, got {self.epsilon}")
        _need(self.delta is None or 0 < self.delta < 1, f"--delta must be in (0, 1), got {self.delta}")
        _need(self.adjacency in ADJACENCIES,
              f"privacy.adjacency must be one of {', '.join(ADJACENCIES)}, got {self.adjacency!r}")
        try:
            block = Granularity.parse(self.granularity).block
        except ValueError as err:
            raise PategailError(f"privacy.granularity {self.granularity!r}: {err}") from None
        why = self.scheme.check_granularity(block, self.private)
        _need(why is None, f"privacy.granularity {self.granularity!r} {why}")
        _need(0 < self.clip_share <= 1, f"privacy.clip_share must be in (0, 1], got {self.clip_share}")
        _need(self.env_epsilon_fraction is None or 0 < self.env_epsilon_fraction < 1,
              f"privacy.env_epsilon_fraction must be in (0, 1), got {self.env_epsilon_fraction}")
        _need(self.kappa > 1 and self.beta >= 0,
              f"privacy.kappa must be > 1 and privacy.beta >= 0 (got {self.kappa}, {self.beta})")
        _need(self.retry_rounds >= 0, f"privacy.retry_rounds must be >= 0, got {self.retry_rounds}")
        _need(self.cells in CELL_TABLES, f"privacy.cells must be one of {', '.join(CELL_TABLES)}, got {self.cells!r}")
        _need(self.cells != "released" or self.private,
              "privacy.cells released is a private release of the cell table: it needs --epsilon (without privacy "
              "the data folder's table is used as it is)")
        _need(self.cells != "released" or self.scheme.releases_vectors,
              "privacy.cells released composes with the Gaussian mechanism's releases: leave privacy.mechanism out "
              "or set it to 'gaussian'")

    @property
    def released_cells(self) -> bool:
        """The run releases its cell table privately (``cells`` = "released")."""
        return self.cells == "released"

    @property
    def rest_epsilon(self) -> float | None:
        """The ε (at δ) the environment and reward releases are planned for: the target, or with a released
        cell table what the target's ρ leaves after the cell release's share
        (pategail.server.privacy.cell_release.remaining_epsilon)."""
        if not self.released_cells or self.epsilon is None:
            return self.epsilon
        assert self.delta is not None, "resolve with TrainConfig.for_devices"
        from pategail.server.privacy.cell_release import rest_epsilon
        return rest_epsilon(self.epsilon, self.delta)

    @property
    def private(self) -> bool:
        return self.epsilon is not None

    @property
    def scheme(self) -> PlannedMechanism:
        """The coordinator's side of the run's mechanism (``pategail.server.privacy.mechanisms``)."""
        assert self.mechanism is not None               # resolved on construction
        return planned(self.mechanism)

    @property
    def reward_granularity(self) -> Granularity:
        assert self.granularity is not None             # resolved on construction
        return Granularity.parse(self.granularity)

    @property
    def region_cells(self) -> int:
        """Cells per region of the environment release's coarse parts: ``pategail.sdk.regions.REGION_CELLS``
        with a mechanism that releases region sums (the Gaussian, whose devices clip the whole vector, coarse
        parts included, to its L2 bound), 0 (no coarse parts: the layout the Java core also speaks) with Laplace."""
        from pategail.sdk.regions import REGION_CELLS
        return REGION_CELLS if self.scheme.region_sums else 0


@dataclass(frozen=True)
class SecAggSettings:
    """The secure aggregation of the devices' releases (pategail.server.secagg; docs/secure-aggregation.md)."""

    min_survivors: float = 0.8
    """n_min as a share of the devices asked: fewer survivors and the round releases nothing (noise shares are
    sized for n_min, so the released sums carry at least the intended noise). A round also needs a majority of
    its participants to certify the survivor set, so a share at or below one half acts as a majority.
    1 − this is the dropout rate the SecAgg+ degree is sized for."""
    degree: int | None = None
    """SecAgg+ neighbours per device (even); 0 = all pairs; None chooses from the number n of devices in the
    round (:func:`secagg_degree_for`): all pairs up to ``ALL_PAIRS_MAX`` devices, beyond that the smallest
    degree that survives the dropouts ``min_survivors`` allows (54 at n = 1,000). The Shamir threshold is the
    one the protocol's security argument needs for the graph and ``colluders``
    (pategail.sdk.secagg.graph.secure_threshold)."""
    colluders: int = 0
    """Devices that may collude with the coordinator (reveal their noise shares to it). Noise shares are sized
    for n_min − colluders, so the honest survivors alone add the full noise."""
    aggregator: str = "coordinator"
    """Who sums the masked uploads: "coordinator" or "device" (one drawn at random each round)."""

    def __post_init__(self):
        _need(0 < self.min_survivors <= 1, f"secagg.min_survivors must be in (0, 1], got {self.min_survivors}")
        _need(self.degree is None or (self.degree >= 0 and self.degree % 2 == 0),
              "secagg.degree must be 0 (all pairs), a positive even number or null (chosen from the number of "
              "devices)")
        _need(self.colluders >= 0, f"secagg.colluders must be >= 0, got {self.colluders}")
        _need(self.aggregator in ("coordinator", "device"),
              f"secagg.aggregator must be 'coordinator' or 'device', got {self.aggregator!r}")


@dataclass(frozen=True)
class EnvironmentSettings:
    """The EPR environment the policy acts in, and what the devices release to shape it
    (pategail.sdk.epr, pategail.server.places, pategail.server.action_prior)."""

    alpha: float = DEFAULT_ALPHA
    """EPR explore exponent (pategail.sdk.epr)."""
    candidates: int = DEFAULT_CANDIDATES
    """EPR explore candidate-set size."""
    place_law: bool | None = None
    """Generate with the learned place law (d-EPR: explore ∝ relevance × rank law, the rank law re-calibrated
    under relevance; return favouring the place just left), released with the initial states; false: the
    classic EPR laws (the devices contribute either way: the same privacy cost). None: on for runs without
    privacy over at least ``PLACE_LAW_MIN_DEVICES`` devices (it beat epr on ≥ 4 of 5 km metrics on three
    cities of 83–179 devices); off under privacy, where its relevance is one noisy value per cell."""
    relevance_exponent: float = 0.5
    """γ of the place law's explore attraction relevance(c)^γ × rank law (0: every cell equally relevant, the
    classic law's destinations with the place law's return; 1: d-EPR's relevance as released). Pure
    post-processing of the released visit histogram. With γ = 1 the generated days used about half as many
    cells as the real ones and under-visited the 50th–100th most visited cells; 0.5 halved the G-rank error on
    the training days of three cities (3 seeds) and was better on 11 of their 15 km metrics (BENCHMARKS.md)."""
    initial_states_days_cap: int | None = None
    """Days at which a device's initial-state contribution (its home and first cells) reaches full weight, so
    that generated days start from homes in proportion to the real days rather than to the users (a user with
    500 days weighs as much as one with 100 under a cap of 100). None: ``INITIAL_STATES_DAYS_CAP`` without
    privacy; under privacy the cap of the rest of the environment vector (``pategail.sdk.contribution.DAYS_CAP``,
    100: a larger cap shrinks most devices' weight against the noise), the only value allowed there, because
    the coordinator's estimates of the other histograms take their total from this part's weights."""
    action_prior: bool | None = None
    """Warm-start the policy from a privately released rule model: the devices add the action-rate part to
    their environment vector (pategail.sdk.action_rates), the coordinator turns the sums into
    P(action | slot bucket, at home, distinct bucket), samples ``action_prior_days`` days from the EPR
    environment driven by it and fits the policy to them by behaviour cloning before round 1; PPO's anchor
    (``ppo.anchor_coef``) keeps GAIL near it. None: on without privacy, off under privacy — at realistic
    device counts its 320-entry table drowns in the noise and its larger sensitivity costs every other part of
    the environment release."""
    day_cells_limit: bool = True
    """With the action-rate part released (``action_prior``): a generated day adds no cell (no explore, no
    first move home) once it holds the fewest distinct cells the released rates say real days (nearly) never
    go beyond — on a city whose days hold at most four cells, never a fifth
    (pategail.server.action_prior.day_cells_limit; the bundle carries the limit to every generator). The
    table tells counts apart up to four, so a city whose days go on to a fifth cell gets no limit.
    Post-processing of the release. In practice only without privacy: under noise a limit needs the table
    clear by three noise standard deviations, which realistic noise never leaves."""
    action_prior_days: int = 2048
    """Rule-model days the policy is cloned on."""
    action_prior_epochs: int = 30
    """Passes of behaviour cloning over them (10 left twice the invented days on the sparse city)."""
    action_prior_lr: float = 1e-3
    """Adam learning rate of the behaviour cloning."""

    def __post_init__(self):
        _need(self.candidates >= 1, f"environment.candidates must be >= 1, got {self.candidates}")
        _need(0.0 <= self.relevance_exponent <= 1.0,
              f"environment.relevance_exponent must be in [0, 1], got {self.relevance_exponent}")
        _need(self.initial_states_days_cap is None or self.initial_states_days_cap >= 1,
              f"environment.initial_states_days_cap must be a whole number of days >= 1, got "
              f"{self.initial_states_days_cap}")
        _need(self.action_prior_days >= 1 and self.action_prior_epochs >= 0 and self.action_prior_lr > 0,
              "environment.action_prior_days must be >= 1, action_prior_epochs >= 0, action_prior_lr > 0")


SECTIONS = {"policy": PolicySettings, "ppo": PPOConfig, "discriminator": DiscriminatorSettings,
            "privacy": PrivacySettings, "secagg": SecAggSettings, "environment": EnvironmentSettings,
            "fedavg": FedAvgConfig}
"""The configuration's sections, by their name in a config file."""


DEFAULT_ROUNDS = {"pategail": 60, "hybrid": 60, "dp-fedavg": 20}
"""``TrainConfig.rounds`` when a config leaves it out, by method."""


@dataclass(frozen=True)
class TrainConfig:
    """Algorithm 1 of the paper over a population of devices."""

    rounds: int = 0
    """Rounds of Algorithm 1 (sample, train discriminators, score, aggregate, PPO), or of DP-FedAvg. 0 (the
    default): the method's number, 60 for PateGail and the hybrid, 20 for DP-FedAvg (``DEFAULT_ROUNDS``; every DP-FedAvg measurement used 20, and
    fewer rounds mean less noise on each release at the same ε)."""
    days_per_round: int = 96
    """Generated days sent to the devices each round; 47 × this pairs are scored."""
    method: str = "pategail"
    """"pategail": devices train discriminators and release noisy rewards, the coordinator runs PPO.
    "dp-fedavg": devices fit the policy to their own days by maximum likelihood and release clipped model deltas
    with the Gaussian mechanism (user-level DP-FedAvg, McMahan et al. 2018; docs/dp-fedavg.md) — the same
    environment release, secure aggregation, plan, accountant and ledgers. "hybrid": ``fedavg.hybrid_rounds``
    DP-FedAvg rounds (a private warm start), then PateGail's rounds, under one plan."""
    average_rounds: int = 20
    """The published policy is the mean of the policy weights after each of the last N rounds (Polyak–Ruppert
    tail averaging); 1 publishes the last iterate. Adversarial training makes the last iterate swing from round
    to round; the average of the last 20 beat every single round on DailyLoc and I-rank."""
    policy: PolicySettings = field(default_factory=PolicySettings)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    discriminator: DiscriminatorSettings = field(default_factory=DiscriminatorSettings)
    privacy: PrivacySettings = field(default_factory=PrivacySettings)
    secagg: SecAggSettings = field(default_factory=SecAggSettings)
    environment: EnvironmentSettings = field(default_factory=EnvironmentSettings)
    fedavg: FedAvgConfig = field(default_factory=FedAvgConfig)

    def __post_init__(self):
        # a section may be given as a dict of its settings: TrainConfig(privacy={"epsilon": 8})
        for name, kind in SECTIONS.items():
            value = getattr(self, name)
            if not isinstance(value, kind):
                object.__setattr__(self, name, _section(name, kind, value, "config"))
        if self.rounds == 0:
            object.__setattr__(self, "rounds", DEFAULT_ROUNDS.get(self.method, DEFAULT_ROUNDS["pategail"]))
        _need(self.rounds >= 1 and self.days_per_round >= 1, "rounds and days_per_round must be >= 1")
        _need(self.average_rounds >= 1, f"average_rounds must be >= 1, got {self.average_rounds}")
        _need(self.method in METHODS, f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        _need(self.method == "pategail" or not self.private or self.privacy.scheme.releases_vectors,
              f"method {self.method} releases model deltas with the Gaussian mechanism: leave privacy.mechanism "
              "out or set it to 'gaussian'")
        _need(self.method == "pategail" or not self.privacy.released_cells,
              f"privacy.cells released is planned with PateGail's releases; method {self.method} needs a public map "
              "(privacy.cells dataset)")
        _need(not self.private or self.environment.initial_states_days_cap in (None, DAYS_CAP),
              f"environment.initial_states_days_cap: a private run keeps the environment vector's cap ({DAYS_CAP}); "
              "leave it out")
        _need(self.method != "hybrid" or self.fedavg.hybrid_rounds < self.rounds,
              f"method hybrid: fedavg.hybrid_rounds ({self.fedavg.hybrid_rounds}) must be below rounds "
              f"({self.rounds}), which include the PateGail rounds after them")

    @property
    def private(self) -> bool:
        return self.privacy.private

    @property
    def resolved(self) -> bool:
        """Whether the settings filled in for a run (δ and the environment's share, which depend on the device
        count, and DP-FedAvg's server step size) are set."""
        return self.privacy.delta is not None and self.privacy.env_epsilon_fraction is not None \
            and self.fedavg.resolved

    def for_devices(self, devices: int, n_cells: int | None = None) -> "TrainConfig":
        """This config for a run of ``devices`` devices over ``n_cells`` cells: δ and the environment's share of
        ε filled in where they are None (pategail.server.privacy.defaults; without privacy their fixed defaults,
        whatever the device count); the same config when both are set. The cell count sizes a DP-FedAvg run's
        model delta, whose noise chooses its share (without it, the smallest share); the server optimiser's
        step size is filled in too."""
        if self.resolved:
            return self
        from pategail.server.privacy.defaults import DELTA_CAP, default_delta, environment_share
        privacy = self.privacy
        if privacy.delta is None:       # without privacy nothing depends on it: the same for every N
            privacy = dataclasses.replace(privacy, delta=default_delta(devices) if self.private else DELTA_CAP)
        config = dataclasses.replace(self, privacy=privacy)
        if privacy.env_epsilon_fraction is None:
            # chosen for the ε the environment and rewards are planned for (less than the target when the run
            # releases its cell table first)
            share = environment_share(config._after_cells(), devices, n_cells)
            config = dataclasses.replace(config, privacy=dataclasses.replace(privacy, env_epsilon_fraction=share))
        if not config.fedavg.resolved:
            config = dataclasses.replace(config, fedavg=config.fedavg.with_default_step())
        return config

    def _after_cells(self) -> "TrainConfig":
        """This config planned for the ε left after a released cell table (the target without one)."""
        return dataclasses.replace(self, privacy=dataclasses.replace(self.privacy, epsilon=self.privacy.rest_epsilon,
                                                                     cells="dataset"))

    @property
    def uses_action_prior(self) -> bool:
        """``environment.action_prior`` resolved: the setting when it is true or false; None is on exactly when
        the run has no privacy."""
        if self.environment.action_prior is not None:
            return self.environment.action_prior
        return not self.private

    @property
    def initial_states_days_cap(self) -> int:
        """``environment.initial_states_days_cap`` resolved: the setting, else ``INITIAL_STATES_DAYS_CAP``
        without privacy and ``DAYS_CAP`` under privacy."""
        if self.environment.initial_states_days_cap is not None:
            return self.environment.initial_states_days_cap
        return DAYS_CAP if self.private else INITIAL_STATES_DAYS_CAP

    def uses_place_law(self, devices: int) -> bool:
        """``environment.place_law`` resolved for a run over ``devices`` devices: the setting when it is true or
        false; None is on when the run has no privacy and at least ``PLACE_LAW_MIN_DEVICES`` devices."""
        if self.environment.place_law is not None:
            return self.environment.place_law
        return not self.private and devices >= PLACE_LAW_MIN_DEVICES

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict, where: str = "config") -> "TrainConfig":
        """A config from a dict shaped like a config file (sections as nested objects; any subset of the
        settings); PategailError naming ``where`` and the setting for anything unknown or of the wrong type."""
        if not isinstance(d, dict):
            raise PategailError(f"{where}: expected an object of settings")
        top = {f.name for f in dataclasses.fields(cls)} - set(SECTIONS)
        kwargs = {}
        for name, value in d.items():
            if name in SECTIONS:
                kwargs[name] = _section(name, SECTIONS[name], value, where)
            elif name in top:
                _check_type(name, _field_type(cls, name), value, where)
                kwargs[name] = value
            else:
                raise PategailError(f"{where}: unknown setting {name!r}{_where_it_lives(name)}")
        return cls(**kwargs)

    @classmethod
    def from_file(cls, path: Path, overrides: dict | None = None) -> "TrainConfig":
        """A JSON file of settings (shaped as :meth:`from_dict` takes), then ``overrides`` (the same shape;
        a section's settings merge into the file's)."""
        try:
            d = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise PategailError(f"{path}: no such config file") from None
        except json.JSONDecodeError as e:
            raise PategailError(f"{path}: not valid JSON (line {e.lineno}: {e.msg})") from None
        if not isinstance(d, dict):
            raise PategailError(f"{path}: expected a JSON object of settings")
        return cls.from_dict(merge_settings(d, overrides or {}), where=str(path))


def merge_settings(base: dict, overrides: dict) -> dict:
    """``base`` with ``overrides`` on top, section by section (a section's settings merge, not replace)."""
    out = dict(base)
    for name, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = {**out[name], **value}
        else:
            out[name] = value
    return out


def _section(name: str, kind, value, where: str):
    if isinstance(value, kind):
        return value
    if not isinstance(value, dict):
        raise PategailError(f"{where}: \"{name}\" must be an object of {name} settings")
    known = {f.name for f in dataclasses.fields(kind)}
    for key, v in value.items():
        if key not in known:
            raise PategailError(f"{where}: unknown setting {name}.{key}{_where_it_lives(key)}")
        _check_type(f"{name}.{key}", _field_type(kind, key), v, where)
    try:
        return kind(**value)
    except ValueError as e:               # PPOConfig's own checks
        raise PategailError(f"{where}: {e}") from None


def _field_type(kind, name: str) -> str:
    return str(next(f.type for f in dataclasses.fields(kind) if f.name == name))


def _where_it_lives(name: str) -> str:
    """", which is in section S" when a section has a setting of that name (a flat or misplaced setting)."""
    homes = [s for s, kind in SECTIONS.items() if name in {f.name for f in dataclasses.fields(kind)}]
    return f" (it is a setting of the {homes[0]!r} section: {{\"{homes[0]}\": {{\"{name}\": ...}}}})" if homes else ""


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


def run_settings(recorded: dict, now: dict) -> tuple[dict, dict]:
    """Two configs (as ``TrainConfig.to_dict`` writes them: a run's recorded one and the one given now) without the
    settings a resume need not repeat: the ``fedavg`` section when either is a PateGail run, which never reads it
    (a later version may change its defaults without changing what the run trained). Left out of both, so that
    a run resumed with another method is refused naming ``method``."""
    if "pategail" in (recorded.get("method", "pategail"), now.get("method", "pategail")):
        recorded, now = ({key: value for key, value in config.items() if key != "fedavg"} for config in (recorded, now))
    return recorded, now


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
