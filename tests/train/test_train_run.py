"""The coordinator and the emulator end to end, on a few users of the embedded default data."""
import ast
import glob
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

from pategail.cli import main
from pategail.data.dataset import load_dataset
from pategail.data.prepare import prepare_dataset
from pategail.emulator import EmulatedFleet, choose_users
from pategail.server.errors import PategailError
from pategail.export.bundle import export_bundle
from pategail.export.discriminator import Discriminator
from pategail.sdk.bundle import Environment, load_bundle
from pategail.sdk.contribution import contribution_weight
from pategail.sdk.epr import CellGeometry, candidate_count, explore_law_contribution, n_rank_bins
from pategail.sdk.features import infer_home
from pategail.server import coordinator as coordinator_module
from pategail.server.checkpoint import read_journal
from pategail.server.config import INITIAL_STATES_DAYS_CAP, TrainConfig, merge_settings
from pategail.server.coordinator import Coordinator
from pategail.server.initial_states import FACTOR_RANGE
from pategail.server.places import rank_calibrated_factors
from pategail.server.policy import Policy, PolicyConfig
from pategail.server.privacy.accountant import QueryRelease
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.server.ppo import PPOConfig

ROOT = Path(__file__).resolve().parents[2]
TINY = dict(rounds=3, days_per_round=6, discriminator={"steps": 2, "batch_size": 16}, environment={"candidates": 50, "action_prior_days": 16, "action_prior_epochs": 2}, policy={"d_model": 16, "n_layers": 1}, ppo=PPOConfig(n_epochs=2, batch_size=3))


def _coordinator(dataset, run: Path, seed=0, **overrides) -> Coordinator:
    config = TrainConfig(**merge_settings(TINY, overrides))
    bundle = run / "bundle-initial"
    if not bundle.exists():
        torch.manual_seed(seed)
        export_bundle(Policy(PolicyConfig(n_cells=dataset.n_cells, d_model=16, n_layers=1)), Discriminator(),
                      bundle, environment=Environment(dataset.cells, config.environment.alpha, config.environment.candidates,
                                                      action_rates=config.uses_action_prior))
    users = choose_users(dataset.users, 3, seed)
    fleet = EmulatedFleet(dataset, users, run / "devices", bundle, seed=seed)
    return Coordinator(config, fleet, dataset.cells, run, seed=seed)


def _params(coordinator_or_policy):
    policy = getattr(coordinator_or_policy, "policy", coordinator_or_policy)
    return torch.cat([p.detach().flatten() for p in policy.parameters()])


def test_same_seed_same_run(dataset, tmp_path):
    a = _coordinator(dataset, tmp_path / "a")
    a.train()
    b = _coordinator(dataset, tmp_path / "b")
    b.train()
    assert torch.equal(_params(a), _params(b))
    assert [h["mean_reward"] for h in a.history] == [h["mean_reward"] for h in b.history]
    c = _coordinator(dataset, tmp_path / "c", seed=1)
    c.train()
    assert not torch.equal(_params(a), _params(c))


def test_the_published_policy_is_the_mean_of_the_last_rounds(dataset, tmp_path):
    coordinator = _coordinator(dataset, tmp_path / "avg", average_rounds=2)
    after = []
    coordinator.train(on_round=lambda stats: after.append(_params(coordinator).clone()))
    assert len(after) == 3 and coordinator.policy_sum_count == 2
    assert torch.allclose(_params(coordinator.averaged_policy()), (after[1] + after[2]) / 2, atol=1e-6)
    assert not torch.equal(_params(coordinator.averaged_policy()), after[2])
    with pytest.raises(PategailError, match="average_rounds"):
        TrainConfig(**{**TINY, "average_rounds": 0})


def test_killed_and_resumed_run_ends_like_an_uninterrupted_one(dataset, tmp_path, monkeypatch):
    whole = _coordinator(dataset, tmp_path / "whole")
    whole.train()

    # kill 1: between rounds, right after round 1's checkpoint
    first = _coordinator(dataset, tmp_path / "killed")

    def crash(stats):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        first.train(on_round=crash)
    # kill 2: in the middle of round 2, after its release was journalled but before the PPO update
    second = _coordinator(dataset, tmp_path / "killed")
    assert second.resume() and second.round == 1
    real_update = coordinator_module.ppo_update

    def crash_in_update(*args, **kwargs):
        raise RuntimeError("power cut")
    monkeypatch.setattr(coordinator_module, "ppo_update", crash_in_update)
    with pytest.raises(RuntimeError, match="power cut"):
        second.train()
    monkeypatch.setattr(coordinator_module, "ppo_update", real_update)
    third = _coordinator(dataset, tmp_path / "killed")
    assert third.resume() and third.round == 1
    third.train()
    assert third.round == 3
    assert torch.equal(_params(third), _params(whole))
    assert torch.equal(_params(third.averaged_policy()), _params(whole.averaged_policy()))


def test_a_checkpoint_resumes_only_with_the_settings_it_was_made_with(dataset, tmp_path):
    from pategail.server.checkpoint import load_checkpoint, save_checkpoint

    first = _coordinator(dataset, tmp_path / "old", policy={"n_heads": 4})

    def crash(stats):
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        first.train(on_round=crash)
    again = _coordinator(dataset, tmp_path / "old", policy={"n_heads": 4})
    assert again.resume() and again.round == 1
    # another head count has the same parameter shapes, so only the settings' check keeps it from loading;
    # the message names the setting that differs, as the file would have it
    for heads in (1, 2):
        other_heads = _coordinator(dataset, tmp_path / "old", policy={"n_heads": heads})
        with pytest.raises(PategailError, match=f"another configuration .*policy.n_heads: 4 in the checkpoint, "
                                                f"{heads} now"):
            other_heads.resume()
    # a PateGail run never reads the DP-FedAvg section: other values or names there (a later version's
    # defaults) do not keep it from resuming
    ckpt = tmp_path / "old" / "checkpoint"
    state = load_checkpoint(ckpt)
    state["config"]["fedavg"] = {**state["config"]["fedavg"], "server_optimizer": "fedadam", "retired_knob": 1}
    save_checkpoint(ckpt, state)
    assert _coordinator(dataset, tmp_path / "old", policy={"n_heads": 4}).resume()
    # ... but a resume with another method, which reads it, is refused naming the method
    with pytest.raises(PategailError, match='another configuration .*method: "pategail" in the checkpoint, '
                                            '"hybrid" now'):
        _coordinator(dataset, tmp_path / "old", policy={"n_heads": 4}, method="hybrid",
                     fedavg={"hybrid_rounds": 1}).resume()
    # and a hybrid's checkpoint (whose DP-FedAvg section PateGail would not read) resumed as PateGail
    hybrid = _coordinator(dataset, tmp_path / "hybrid", method="hybrid", fedavg={"hybrid_rounds": 1})
    with pytest.raises(KeyboardInterrupt):
        hybrid.train(on_round=crash)
    with pytest.raises(PategailError, match='another configuration .*method: "hybrid" in the checkpoint, '
                                            '"pategail" now'):
        _coordinator(dataset, tmp_path / "hybrid").resume()
    # a checkpoint of another version (a setting it had no longer exists, or one was added) is refused in one
    # line, never read with a default in place of what it trained with
    state["config"]["policy"]["retired_knob"] = True
    save_checkpoint(ckpt, state)
    with pytest.raises(PategailError, match="made by another version of pategail") as err:
        _coordinator(dataset, tmp_path / "old", policy={"n_heads": 4}).resume()
    assert "\n" not in str(err.value)


def test_privacy_spending_survives_a_crash_exactly_once(dataset, tmp_path, monkeypatch):
    """A small private Laplace run: the environment is ONE vector query (its L1 sensitivity, its own ε share),
    the rewards are sensitivity-1 queries; the coordinator and every device's ledger count the same."""
    run = tmp_path / "private"
    first = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace", "kappa": 3.0}, rounds=2)   # unequal Σ / Σ² scales

    def crash_in_update(*args, **kwargs):
        raise RuntimeError("power cut")
    real_update = coordinator_module.ppo_update
    monkeypatch.setattr(coordinator_module, "ppo_update", crash_in_update)
    with pytest.raises(RuntimeError):
        first.train()                          # initial states and round 1 released, round 1 not finished
    assert first.accountant.num_queries == 1 + 6 * 47          # the environment vector counts once
    monkeypatch.setattr(coordinator_module, "ppo_update", real_update)
    again = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace", "kappa": 3.0}, rounds=2)
    assert again.resume()
    again.train()
    # the journalled round-1 release was reused, not asked for again: exactly the planned queries
    assert again.accountant.num_queries == again.planned_queries() == 1 + 2 * 6 * 47
    # the environment: Laplace scale b_env = Δ₁ / (0.1 · 50) on each entry of both halves, Δ₁ = 2 · 9 plus the
    # rounding of its 2·values entries (values quanta), recorded as one query of noise multiplier b_env / Δ₁
    values = 2 * dataset.n_cells + 2 + 2 * n_rank_bins(candidate_count(dataset.n_cells, TINY["environment"]["candidates"])) \
        + (dataset.n_cells + 3)
    delta1 = 18.0 + values / 2 ** 24
    b_env = again.plan.env_sum_noise_scale
    assert b_env == pytest.approx(delta1 / 5.0, rel=1e-12) and again.plan.env_epsilon == pytest.approx(5.0)
    assert read_journal(run / "checkpoint")[0].sum_scale == b_env      # what the environment round added
    env = QueryRelease(b_env / delta1, None, 1)
    assert env.sum_scale == pytest.approx(0.2, rel=1e-12)
    # every reward query released Σ D at b = κ/ε_q and Σ D² at b_sq = κ/(ε_q(κ-1)), both at their own scale
    sum_scale, sq_scale = again.plan.noise_scales
    assert sum_scale == pytest.approx(3.0 / again.plan.per_query_epsilon) and sq_scale == pytest.approx(sum_scale / 2)
    assert again.accountant.releases == (env, QueryRelease(sum_scale, sq_scale, 2 * 6 * 47))
    direct = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    direct.compose(dp_event.LaplaceDpEvent(0.2))
    direct.compose(dp_event.LaplaceDpEvent(sum_scale), 2 * 6 * 47)
    direct.compose(dp_event.LaplaceDpEvent(sq_scale), 2 * 6 * 47)
    eps = again.accountant.epsilon()
    assert eps == pytest.approx(direct.get_epsilon(1e-5), rel=1e-9)
    # the plan (the retry reserve of one round included: a third of the reward queries here) spends (nearly)
    # the whole target, within the ~1% bisection and the coarser planning grid; the run spent less
    assert 0.9 * 50.0 <= again.plan.expected_epsilon <= 50.0 and eps <= again.plan.expected_epsilon
    # every device took part in every release (the first round-1 attempt's result was journalled and reused)
    ledgers = sorted(glob.glob(str(run / "devices" / "*" / "privacy-ledger.json")))
    assert len(ledgers) == 3
    for path in ledgers:
        assert PrivacyLedger(path).releases == again.accountant.releases
    # the Laplace mechanism's rewards have no estimated signal share: the report gives none
    assert "reward_signal_share" not in again.summary().privacy


def test_coordinator_code_cannot_read_a_data_set():
    """The coordinator (server/pategail/server/) never imports the data set reader, the emulator or anything that opens the data set."""
    forbidden = ("pategail.data", "pategail.emulator", "pategail.sdk.store")
    for path in (ROOT / "server" / "pategail" / "server").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                assert not name.startswith(forbidden), f"{path} imports {name}"


def test_train_cli_two_rounds(dataset, tmp_path, capsys):
    config = tmp_path / "tiny.json"
    settings = merge_settings({k: v for k, v in TINY.items() if k != "ppo"},
                              {"rounds": 2, "environment": {"place_law": True}, "ppo": {"n_epochs": 2, "batch_size": 3}})
    config.write_text(json.dumps(settings))
    data = tmp_path / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", data, allow_pickle=True)
    run = tmp_path / "run"
    argv = ["-q", "train", "--data", str(data), "--out", str(run), "--devices", "3", "--no-privacy",
            "--config", str(config), "--prediction-steps", "2", "--no-progress"]   # --no-progress last: see below
    assert main(argv) == 0
    report = json.loads((run / "report.json").read_text())
    assert set(report) >= {"metrics", "metrics_paper", "floor", "floor_paper", "baselines", "privacy",
                           "training", "communication"}
    assert set(report["baselines"]) == {"markov", "epr"}
    assert report["training"]["rounds"] == 2 and report["training"]["devices"] == 3
    # the time before round 1 (environment release, warm start) is said, apart from the rounds' time
    assert report["training"]["initial_seconds"] > 0
    assert "rounds in " in (run / "report.md").read_text() and "s of initial states and warm start" in (
        run / "report.md").read_text()
    assert report["communication"]["bytes_up_per_device_per_round"] > 0
    assert set(report["utility"]["prediction"]["arms"]) == {"real", "synthetic", "real+synthetic"}
    assert report["attacks"]["uniqueness"]["members"]["days"] == len(load_dataset(data).train_days)
    assert not report["attacks"]["membership_whitebox"]["available"]     # no held-out users in this data set
    for name in ("synthetic.csv", "report.md", "statistics.png", "density.png", "bundle/manifest.json",
                 "prediction.png", "uniqueness.png"):
        assert (run / name).is_file(), name
    assert "| ours |" in capsys.readouterr().out
    # the explore law learned in the initial-state release is what the published bundle generates with (no
    # noise: exactly the three devices' summed contributions, up to the fixed-point grid), re-calibrated for the
    # place law (on here by the config file: three devices are too few for the default) from the released
    # relevance and homes
    factors = report["environment"]["explore_factors"]
    environment = load_bundle(run / "bundle").environment
    assert report["environment"]["place_law"] and environment.places is not None
    # these days go on to a fifth cell: no limit on a day's cells
    assert report["environment"]["max_day_cells"] is None and environment.max_day_cells is None
    total, homes = 0, np.zeros(dataset.n_cells)
    for user in choose_users(dataset.users, 3, 0):
        days = dataset.user_days(user)
        total = total + explore_law_contribution(days, infer_home(days), dataset.cells, candidates=TINY["environment"]["candidates"])
        homes[infer_home(days)] += contribution_weight(len(days), INITIAL_STATES_DAYS_CAP)     # no privacy
    bins = n_rank_bins(TINY["environment"]["candidates"])
    released = np.clip(total[:bins] / total[bins:], *FACTOR_RANGE)
    geometry = CellGeometry.build(dataset.cells, TINY["environment"]["candidates"])
    np.testing.assert_allclose(factors, rank_calibrated_factors(geometry.neighbours, report["environment"]["alpha"],
                                                                released, environment.places.relevance, homes),
                               rtol=1e-4)
    assert not np.allclose(factors, released, rtol=1e-3)
    np.testing.assert_array_equal(environment.explore_factors, factors)
    # a second start without --resume refuses to clobber the run; a resume with other settings is refused
    assert main(argv) == 2
    assert "--resume" in capsys.readouterr().err
    assert main([a for a in argv if a != "--no-progress"] + ["--resume", "--seed", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "other settings, data, seed or --devices (seed: 0 in the run, 1 now; users: [" in err   # what differs
    # a run made by a version whose settings had other names cannot be resumed, and says why
    marker = json.loads((run / "run.json").read_text())
    del marker["config"]["average_rounds"]
    (run / "run.json").write_text(json.dumps(marker))
    assert main([a for a in argv if a != "--no-progress"] + ["--resume", "--no-progress"]) == 2
    assert "another version of pategail" in capsys.readouterr().err
    # more devices than users: a clear message
    assert main(["-q", "train", "--data", str(data), "--out", str(tmp_path / "x"), "--devices", "11",
                 "--no-privacy"]) == 2
    assert "only 10 users" in capsys.readouterr().err


def test_a_crash_while_devices_train_is_replayed_exactly(dataset, tmp_path, monkeypatch):
    whole = _coordinator(dataset, tmp_path / "whole")
    whole.train()
    run = tmp_path / "killed"
    first = _coordinator(dataset, run)
    calls = {"n": 0}
    real_request = EmulatedFleet.request

    def flaky(self, device_id, message):
        reply = real_request(self, device_id, message)
        calls["n"] += 1
        if calls["n"] == 3 + 3 + 2:          # initial states (3), round 1 (3), then 2 devices into round 2
            raise KeyboardInterrupt
        return reply
    monkeypatch.setattr(EmulatedFleet, "request", flaky)
    with pytest.raises(KeyboardInterrupt):
        first.train()
    monkeypatch.setattr(EmulatedFleet, "request", real_request)
    again = _coordinator(dataset, run)   # devices restart, two of them mid-round
    assert again.resume() and again.round == 1
    again.train()
    assert torch.equal(_params(again), _params(whole))


def test_a_round_without_enough_devices_releases_nothing(dataset, tmp_path, monkeypatch):
    from pategail.sdk.messages import ErrorReply
    from pategail.sdk.secagg.errors import SecAggAbort

    coordinator = _coordinator(dataset, tmp_path / "run")
    monkeypatch.setattr(EmulatedFleet, "request",
                        lambda self, device_id, message: ErrorReply(0, "not_ready", "switched off").to_bytes())
    with pytest.raises(SecAggAbort):
        coordinator.train()
    assert coordinator.initial_states is None and coordinator.accountant.num_queries == 0
    assert not (tmp_path / "run" / "checkpoint" / "releases").exists()


def test_a_device_preparing_a_vector_of_another_length_is_left_out(dataset, tmp_path, monkeypatch, caplog):
    from pategail.sdk.messages import Ack, from_bytes
    coordinator = _coordinator(dataset, tmp_path / "run", secagg={"min_survivors": 0.5})
    odd = coordinator.fleet.device_ids[0]
    real_request = EmulatedFleet.request

    def request(self, device_id, message):                 # as an SDK with another vector layout would answer
        reply = real_request(self, device_id, message)
        ack = from_bytes(reply)
        return Ack(ack.round, ack.kind, ack.n + 1).to_bytes() if device_id == odd else reply
    monkeypatch.setattr(EmulatedFleet, "request", request)
    coordinator.learn_initial_states()
    assert read_journal(tmp_path / "run" / "checkpoint")[0].n_survivors == 2
    assert f"device {odd} left out" in caplog.text


def test_a_release_whose_result_never_arrived_is_still_counted(dataset, tmp_path, monkeypatch):
    run = tmp_path / "private"
    first = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace"}, rounds=1)
    real_sum = first.fleet.secure_sum
    calls = {"n": 0}

    def lost_result(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:                    # round 1: the aggregator unmasked, the coordinator crashed
            raise RuntimeError("connection lost")
        return real_sum(*args, **kwargs)
    monkeypatch.setattr(first.fleet, "secure_sum", lost_result)
    with pytest.raises(RuntimeError):
        first.train()
    again = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace"}, rounds=1)
    assert again.resume()
    again.train()
    # round 1 ran twice (two attempts, two round ids): both are spent
    assert again.accountant.num_queries == again.planned_queries() + 6 * 47


def test_the_privacy_plan_is_made_once_and_kept_with_the_run(dataset, tmp_path, monkeypatch):
    from pategail.server.checkpoint import load_checkpoint, save_checkpoint
    from pategail.server.privacy.plan import PLAN_FILE, PrivacyPlan

    run = tmp_path / "planned"
    first = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace"}, rounds=1)
    plan = first.plan
    assert plan.planned_queries == first.planned_queries() and 49.0 < plan.expected_epsilon <= 50.0
    assert PrivacyPlan.from_dict(json.loads((run / "checkpoint" / PLAN_FILE).read_text())) == plan
    first.learn_initial_states()
    assert load_checkpoint(run / "checkpoint")["privacy_plan"] == plan.to_dict()

    def no_second_plan(*args, **kwargs):
        raise AssertionError("the plan was made again")
    monkeypatch.setattr("pategail.server.privacy.plan.plan_privacy", no_second_plan)
    again = _coordinator(dataset, run, privacy={"epsilon": 50.0, "mechanism": "laplace"}, rounds=1)
    assert again.plan == plan and again.resume()
    state = load_checkpoint(run / "checkpoint")           # a checkpoint of the version before the plan
    del state["privacy_plan"]
    save_checkpoint(run / "checkpoint", state)
    with pytest.raises(PategailError, match="older version"):
        again.resume()


def test_the_action_prior_is_released_privately_and_gated_by_its_noise(dataset, tmp_path):
    """With ``action_prior`` the devices send the action-rate part (the bundle declares it) and the environment
    release is accounted at the larger L1 bound by the coordinator and every device alike. Three devices at
    ε = 50 release rates far below their noise: the coordinator decodes them but makes no warm start."""
    from pategail.sdk.action_rates import RATE_SHAPE
    from pategail.sdk.contribution import env_l1_bound
    run = tmp_path / "prior"
    prior = dict(privacy={"epsilon": 50.0, "mechanism": "laplace"}, rounds=1, environment={"action_prior": True, "action_prior_days": 24, "action_prior_epochs": 2}, ppo=PPOConfig(n_epochs=2, batch_size=3, anchor_coef=0.5))
    c = _coordinator(dataset, run, **prior)
    assert load_bundle(run / "bundle-initial").environment.action_rates
    before = _params(c).clone()
    c.releases.rebuild_accountant()
    c.learn_initial_states()
    rates = c.initial_states.action_rates
    assert rates.probs.shape == RATE_SHAPE and np.allclose(rates.probs.sum(-1), 1.0)
    assert not rates.usable and c.anchor is None and torch.equal(before, _params(c))
    values = 2 * dataset.n_cells + 2 + 2 * n_rank_bins(candidate_count(dataset.n_cells, TINY["environment"]["candidates"])) \
        + (dataset.n_cells + 3) + 320
    delta1 = 2 * env_l1_bound(True) + values / 2 ** 24
    assert c.plan.env_l1_bound == 10.0 and c.plan.env_sum_noise_scale == pytest.approx(delta1 / 5.0, rel=1e-12)
    c.train()
    for path in sorted(glob.glob(str(run / "devices" / "*" / "privacy-ledger.json"))):
        assert PrivacyLedger(path).releases == c.accountant.releases
    assert c.accountant.releases[0].sum_scale == pytest.approx(0.2, rel=1e-12)   # b_env / Δ₁(10): ε_env = 5


def test_the_action_prior_is_on_by_default_exactly_without_privacy(dataset, tmp_path):
    """``action_prior`` None (the default) is on for a run without noise (either mechanism) and off under
    privacy; what ``train`` writes into the bundle follows it."""
    from pategail.training import write_initial_bundle
    assert TrainConfig().uses_action_prior and TrainConfig().ppo.anchor_coef == 10.0
    assert not TrainConfig(privacy={"epsilon": 8.0}).uses_action_prior
    assert TrainConfig(privacy={"epsilon": 8.0}, environment={"action_prior": True}).uses_action_prior
    assert not TrainConfig(environment={"action_prior": False}).uses_action_prior
    assert TrainConfig(privacy={"mechanism": "gaussian"}).uses_action_prior
    assert not TrainConfig(privacy={"mechanism": "gaussian", "epsilon": 8.0}).uses_action_prior
    for config, declared in ((TrainConfig(**TINY), True), (TrainConfig(**TINY, privacy={"epsilon": 8.0}), False)):
        bundle = write_initial_bundle(config, dataset, 0, tmp_path / str(declared))
        assert bool(load_bundle(bundle).environment.action_rates) is declared


def test_the_action_prior_warm_starts_the_policy_and_resumes_with_its_anchor(dataset, tmp_path):
    run = tmp_path / "prior"
    prior = dict(rounds=1, environment={"action_prior": True, "action_prior_days": 24, "action_prior_epochs": 2}, ppo=PPOConfig(n_epochs=2, batch_size=3, anchor_coef=0.5))
    c = _coordinator(dataset, run, **prior)
    before = _params(c).clone()
    c.releases.rebuild_accountant()
    c.learn_initial_states()
    rates = c.initial_states.action_rates
    assert rates.usable and rates.signal is None
    assert not torch.equal(before, _params(c)) and torch.equal(_params(c), _params(c.anchor))
    c.train()
    again = _coordinator(dataset, run, **prior)                # resumes with the anchor and the rates
    assert again.resume() and torch.equal(_params(again.anchor), _params(c.anchor))
    assert np.array_equal(again.initial_states.action_rates.probs, rates.probs)


def test_the_place_law_is_on_by_default_without_privacy_over_enough_devices(dataset, tmp_path, monkeypatch):
    from pategail.server import config as config_module
    enough = config_module.PLACE_LAW_MIN_DEVICES
    assert TrainConfig().uses_place_law(enough) and TrainConfig(privacy={"mechanism": "gaussian"}).uses_place_law(enough)
    assert not TrainConfig().uses_place_law(enough - 1)
    assert not TrainConfig(privacy={"epsilon": 8.0}).uses_place_law(enough)
    assert not TrainConfig(privacy={"mechanism": "gaussian", "epsilon": 8.0}).uses_place_law(enough)
    assert TrainConfig(privacy={"epsilon": 8.0}, environment={"place_law": True}).uses_place_law(3)
    assert not TrainConfig(environment={"place_law": False}).uses_place_law(enough)
    few = _coordinator(dataset, tmp_path / "few", environment={"action_prior": False})                  # 3 devices
    few.learn_initial_states()
    assert few.place_law() is None and few.initial_states.places is not None            # released, not used
    monkeypatch.setattr(config_module, "PLACE_LAW_MIN_DEVICES", 3)
    plain = _coordinator(dataset, tmp_path / "plain", environment={"action_prior": False})
    private = _coordinator(dataset, tmp_path / "private", environment={"action_prior": False}, privacy={"epsilon": 50.0, "mechanism": "laplace"})
    for c in (plain, private):
        c.releases.rebuild_accountant()
        c.learn_initial_states()
    # the released relevance, tempered by the default exponent (a square root), is what the environment uses
    used, released = plain.place_law(), plain.initial_states.places
    assert used is not None and released is not None and used.return_last == released.return_last
    np.testing.assert_allclose(used.relevance, np.sqrt(released.relevance), rtol=1e-15)
    assert private.place_law() is None and private.initial_states.places is not None   # released, not used


def test_the_place_law_runs_on_a_rank_law_recalibrated_from_the_release(dataset, tmp_path):
    """With ``place_law`` the coordinator re-scales the released explore factors for the relevance-weighted
    law (from the released homes), writes those into the checkpoint and uses them; without it the released
    factors are used as released."""
    from pategail.server.places import rank_calibrated_factors
    classic = _coordinator(dataset, tmp_path / "classic", environment={"action_prior": False, "place_law": False})
    classic.learn_initial_states()
    places = _coordinator(dataset, tmp_path / "places", environment={"action_prior": False, "place_law": True})
    places.learn_initial_states()
    released, states = classic.initial_states, places.initial_states
    np.testing.assert_array_equal(states.home_weights, released.home_weights)    # the same release (no noise)
    expected = rank_calibrated_factors(places.geometry.neighbours, places.config.environment.alpha, released.explore_factors,
                                       places.place_law().relevance, states.home_weights)     # the tempered law
    np.testing.assert_allclose(states.explore_factors, expected, rtol=1e-12)
    assert not np.allclose(states.explore_factors, released.explore_factors, rtol=1e-3)
    again = _coordinator(dataset, tmp_path / "places", environment={"action_prior": False, "place_law": True})
    assert again.resume()
    np.testing.assert_array_equal(again.initial_states.explore_factors, states.explore_factors)


def _two_cell_data(tmp_path):
    """The embedded data with each day cut to its first two distinct cells (the slots outside them set to the
    cell before them): no day holds a third."""
    from dataclasses import replace

    from pategail.data.dataset import save_dataset
    from pategail.sdk.features import distinct_cells

    def two_cells(days):
        out = days.copy()
        for day in out:
            kept = list(dict.fromkeys(day.tolist()))[:2]
            for t in range(1, len(day)):
                if day[t] not in kept:
                    day[t] = day[t - 1]
        return out

    data = tmp_path / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", tmp_path / "full", allow_pickle=True)
    full = load_dataset(tmp_path / "full")
    save_dataset(replace(full, train_days=two_cells(full.train_days), test_days=two_cells(full.test_days)), data)
    assert distinct_cells(load_dataset(data).train_days).max() == 2 and distinct_cells(full.train_days).max() > 5
    return data


def test_days_of_few_cells_give_a_limit_that_the_run_and_its_bundle_keep(tmp_path):
    """On days cut to their first two cells (no day holds a third) the released rates give a limit of two cells: the run's synthetic days, its report and its bundle keep it, and `generate` from the bundle too;
    ``environment.day_cells_limit`` false turns it off."""
    from pategail.sdk.features import distinct_cells
    from pategail.sdk.synthetic import read_synthetic_csv

    data = _two_cell_data(tmp_path)
    thin = load_dataset(data)
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(merge_settings({k: v for k, v in TINY.items() if k != "ppo"},
                                                {"rounds": 1, "ppo": {"n_epochs": 1, "batch_size": 3}})))
    run = tmp_path / "run"
    assert main(["-q", "train", "--data", str(data), "--out", str(run), "--devices", "3", "--no-privacy",
                 "--config", str(config), "--no-downstream", "--no-progress"]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["environment"]["max_day_cells"] == 2 and report["guard"]["share"] == 0
    # the training rollouts too: the round's generated days stay within the real days' two cells
    assert "round 1: 0.0% of generated days above 2 distinct cells" in (run / "train.log").read_text()
    assert distinct_cells(read_synthetic_csv(run / "synthetic.csv")).max() <= 2
    assert load_bundle(run / "bundle").environment.max_day_cells == 2
    assert main(["-q", "generate", "--bundle", str(run / "bundle"), "--days", "30", "--out",
                 str(tmp_path / "g.csv")]) == 0
    assert distinct_cells(read_synthetic_csv(tmp_path / "g.csv")).max() <= 2
    off = _coordinator(thin, tmp_path / "off", environment={"day_cells_limit": False})
    off.releases.rebuild_accountant()
    off.learn_initial_states()
    assert off.initial_states.action_rates.max_cells == 2 and off.max_day_cells() is None


def test_the_hybrid_s_dp_fedavg_round_keeps_a_day_cells_limit(tmp_path):
    """DP-FedAvg's days come from the same environment: on days of two cells the hybrid's DP-FedAvg round (its
    statistics' rollout), then its PateGail round, its synthetic days, report and bundle keep the limit of two
    (a DP-FedAvg run takes the same round and the same final generation)."""
    from pategail.sdk.features import distinct_cells
    from pategail.sdk.synthetic import read_synthetic_csv

    data = _two_cell_data(tmp_path)
    config = tmp_path / "short.json"
    config.write_text(json.dumps(merge_settings({k: v for k, v in TINY.items() if k != "ppo"},
                                                {"ppo": {"n_epochs": 1, "batch_size": 3},
                                                 "fedavg": {"batch_size": 32, "hybrid_rounds": 1}})))
    run = tmp_path / "hybrid"
    assert main(["-q", "train", "--data", str(data), "--out", str(run), "--method", "hybrid", "--devices", "3",
                 "--no-privacy", "--config", str(config), "--no-downstream", "--no-progress"]) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["environment"]["max_day_cells"] == 2 and report["guard"]["share"] == 0
    log = (run / "train.log").read_text()
    assert "round 1: 3 of 3 devices in the release, mean delta norm" in log           # the DP-FedAvg round
    for r in (1, 2):
        assert f"round {r}: 0.0% of generated days above 2 distinct cells" in log
    assert distinct_cells(read_synthetic_csv(run / "synthetic.csv")).max() <= 2
    assert load_bundle(run / "bundle").environment.max_day_cells == 2


def test_a_run_s_marker_resumes_only_the_same_run(tmp_path):
    """``run.json`` keeps what a run's journal belongs to: a resume with other settings is refused in one line
    naming the setting, except in a section the method never reads (a PateGail run's DP-FedAvg settings)."""
    from pategail.training import check_run_marker

    config = TrainConfig(**TINY).for_devices(5).to_dict()
    identity = {"config": config, "seed": 0, "data": "/data", "users": [1, 2]}
    check_run_marker(tmp_path / "run", identity, resume=False)
    with pytest.raises(PategailError, match="holds a run already"):
        check_run_marker(tmp_path / "run", identity, resume=False)
    check_run_marker(tmp_path / "run", identity, resume=True)
    with pytest.raises(PategailError, match=r"other settings.*seed: 0 in the run, 1 now") as err:
        check_run_marker(tmp_path / "run", {**identity, "seed": 1}, resume=True)
    assert "\n" not in str(err.value)
    other_step = {**config, "fedavg": {**config["fedavg"], "server_optimizer": "fedadam", "server_lr": 0.1}}
    check_run_marker(tmp_path / "run", {**identity, "config": other_step}, resume=True)
    for method in ("hybrid", "dp-fedavg"):
        with pytest.raises(PategailError, match=f'other settings.*method: "pategail" in the run, "{method}" now'):
            check_run_marker(tmp_path / "run", {**identity, "config": {**other_step, "method": method}}, resume=True)
    fedavg_run = {**identity, "config": {**config, "method": "dp-fedavg"}}
    check_run_marker(tmp_path / "fedavg", fedavg_run, resume=False)
    with pytest.raises(PategailError, match="fedavg.server_optimizer"):
        check_run_marker(tmp_path / "fedavg", {**fedavg_run, "config": {**other_step, "method": "dp-fedavg"}},
                         resume=True)
    with pytest.raises(PategailError, match='other settings.*method: "dp-fedavg" in the run, "pategail" now'):
        check_run_marker(tmp_path / "fedavg", {**fedavg_run, "config": other_step}, resume=True)
