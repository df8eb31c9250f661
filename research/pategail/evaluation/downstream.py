"""Run the applications (:mod:`pategail.utility`) and the attacks (:mod:`pategail.attacks`) on one set of
synthetic days, on real days the generator never trained on.

``downstream(dataset, synthetic_days, policy_session=None, config)`` returns the two sections of
``report.json``::

    {"utility": {"prediction": ..., "recommendation": ...},
     "attacks": {"membership_whitebox": ..., "membership_whitebox_reference": ..., "membership_blackbox": ...,
                 "uniqueness": ...}}

The white-box reference is the same attack on a policy that never saw a day (a run's initial bundle): with
a few dozen users a side, members and non-members differ as groups, and a forest finds that through any
policy's log-probabilities, so the trained policy's AUC is to be read against this one, not against ½.

A part that cannot run on this data set or this generator says so: ``{"available": False, "reason": ...}``
(the white-box attack needs the published policy, both membership attacks need held-out users).
Members are the training users; non-members the held-out users; uniqueness also reports the test days.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from pategail.attacks.blackbox import blackbox_features
from pategail.attacks.membership import AttackConfig, attack_sample, membership_attack
from pategail.attacks.uniqueness import REPRODUCED, uniqueness
from pategail.attacks.whitebox import whitebox_features
from pategail.utility.config import PredictionConfig, RecommendationConfig
from pategail.utility.prediction import prediction_experiment
from pategail.utility.recommendation import recommendation_experiment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DownstreamConfig:
    """Budgets of the downstream experiments; the defaults are the experiment's (BENCHMARKS.md)."""

    prediction: PredictionConfig = field(default_factory=PredictionConfig)
    """The next-location predictors and their training budget (same for every arm)."""
    recommendation: RecommendationConfig = field(default_factory=RecommendationConfig)
    """The implicit ALS recommender."""
    attack: AttackConfig = field(default_factory=AttackConfig)
    """Membership-attack protocol and budget."""
    seed: int = 0
    """Seeds the attacked users and days, the folds, the forests and the bootstrap."""


def _unavailable(reason: str) -> dict:
    return {"available": False, "reason": reason}


def downstream(dataset, synthetic_days: np.ndarray, *, policy_session=None, reference_session=None,
               config: DownstreamConfig = DownstreamConfig()) -> dict:
    """The ``utility`` and ``attacks`` sections for ``synthetic_days`` (int (n, T) cell ids).

    policy_session: an ONNX Runtime session on the published policy (a bundle's ``policy.onnx``) for the
    white-box attack; None for generators without one (baselines, a bare synthetic file).
    reference_session: the same for a never-trained policy (the run's initial bundle), for the reference."""
    synthetic = np.asarray(synthetic_days)
    start = time.perf_counter()
    log.info("downstream: next-location prediction (3 arms, GRU early-stopped within %d steps, Markov)",
             config.prediction.steps)
    prediction = prediction_experiment(dataset.train_days, synthetic, dataset.test_days, dataset.n_cells,
                                       config.prediction)
    log.info("downstream: location recommendation (3 arms)")
    recommendation = recommendation_experiment(dataset, synthetic, config.recommendation)
    holdout = dataset.holdout_days
    has_holdout = holdout is not None and len(dataset.heldout_users) >= 2
    groups = {"members": dataset.train_days,
              "nonmembers": holdout if holdout is not None else dataset.train_days[:0], "test": dataset.test_days}
    log.info("downstream: uniqueness")
    attacks = {"uniqueness": uniqueness(groups, synthetic, dataset.n_cells, REPRODUCED)}
    if not has_holdout:
        reason = "the data set holds no users kept out of training (prepare it with --holdout-users)"
        for key in ("membership_whitebox", "membership_whitebox_reference", "membership_blackbox"):
            attacks[key] = _unavailable(reason)
    else:
        rng = np.random.default_rng([config.seed, 0x31A])
        days, users, labels = attack_sample(dataset.train_days, dataset.train_users, holdout, dataset.holdout_users,
                                            config.attack.days_per_user, rng)
        log.info("downstream: black-box membership inference (%d days of %d users)", len(days),
                 len(np.unique(users)))
        attacks["membership_blackbox"] = {
            "available": True, "features": "km to the closest synthetic day, mean km to the 5 closest, highest "
            "overlap rate", **membership_attack(blackbox_features(days, synthetic, dataset.cells), users, labels,
                                                config.attack, np.random.default_rng([config.seed, 0xB1]))}
        for key, session, what, missing in (
                ("membership_whitebox", policy_session, "the published policy",
                 "no published policy (white-box needs a bundle)"),
                ("membership_whitebox_reference", reference_session, "a never-trained policy",
                 "no never-trained policy (a run's bundle-initial, --reference-bundle)")):
            if session is None:
                attacks[key] = _unavailable(missing)
                continue
            log.info("downstream: white-box membership inference on %s", what)
            attacks[key] = {
                "available": True, "features": f"log pi(a_t | s_t) of the day's 47 actions under {what}",
                **membership_attack(whitebox_features(session, days, users, dataset.cells), users, labels,
                                    config.attack, np.random.default_rng([config.seed, 0xB2]))}
    log.info("downstream: done in %.0f s", time.perf_counter() - start)
    return {"utility": {"prediction": prediction, "recommendation": recommendation}, "attacks": attacks}
