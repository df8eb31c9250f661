"""`pategail train --method dp-fedavg --epsilon 8` as a new user types it on the embedded data (a short config),
then `pategail generate` from the run's bundle; and the refusals of settings that cannot work."""
from __future__ import annotations

import json
import math

import pytest

from pategail.cli import main
from pategail.data.prepare import prepare_dataset
from pategail.server.errors import PategailError
from pategail.server.config import TrainConfig

from .conftest import ROOT


def test_train_dp_fedavg_epsilon_8_then_generate(tmp_path, capsys):
    data = tmp_path / "data"
    prepare_dataset("pategail", ROOT / "data" / "default", data, allow_pickle=True)
    config = tmp_path / "short.json"
    config.write_text(json.dumps({"rounds": 2, "days_per_round": 8, "policy": {"d_model": 16, "n_layers": 1}, "environment": {"candidates": 50}, "fedavg": {"local_epochs": 1, "batch_size": 32}}))
    run = tmp_path / "run"
    argv = ["-q", "train", "--data", str(data), "--out", str(run), "--method", "dp-fedavg", "--epsilon", "8",
            "--data-derived-cells", "--config", str(config), "--devices", "3", "--no-downstream", "--no-progress"]
    assert main(argv) == 0
    report = json.loads((run / "report.json").read_text())
    assert report["training"]["config"]["method"] == "dp-fedavg" and report["training"]["rounds"] == 2
    assert (run / "report.md").read_text().startswith("# DP-FedAvg run")
    privacy = report["privacy"]
    assert privacy["granularity"] == "model-delta" and privacy["epsilon_total"] <= 8.0
    assert "model deltas" in privacy["mechanism"] and "DP-FedAvg" in privacy["mechanism"]
    guarantee = privacy["guarantees"]["against_the_coordinator"]
    assert guarantee["epsilon_zero_out"] <= 8.0 < guarantee["epsilon_replace_one"]
    assert report["communication"]["bytes_up_per_device_per_round"] > 8 * 2 * privacy["plan"]["reward_values"]
    assert "| ours |" in capsys.readouterr().out
    out = tmp_path / "synthetic.csv"
    assert main(["-q", "generate", "--bundle", str(run / "bundle"), "--days", "5", "--out", str(out)]) == 0
    rows = out.read_text().splitlines()
    assert rows[0].startswith("agent,day,slot,cell") and len(rows) == 1 + 5 * 48

    # privacy-plan says beforehand what the run reported: both relations' ε, and the noise on each parameter
    # of the mean model delta (the plan's σ on the sum of deltas in clip norms, × the clip norm / devices)
    capsys.readouterr()
    assert main(["privacy-plan", "--method", "dp-fedavg", "--devices", "3", "--epsilon", "8", "--data", str(data),
                 "--config", str(config)]) == 0
    said = capsys.readouterr().out
    assert "laplace" not in said and "gaussian day" not in said and "granularity model-delta" in said
    assert f"ε = {guarantee['epsilon_zero_out']:.3g} under zero-out" in said
    assert f"{guarantee['epsilon_replace_one']:.3g} under replace-one" in said
    plan = privacy["plan"]
    per_value = plan["gaussian"]["noise_std"] * 0.5 / 3                     # fedavg.clip_norm's default
    assert f"noise std {per_value:9.4g} on each of the mean model delta's {plan['reward_values']:,} parameters" in said


def test_settings_that_cannot_work_are_refused_in_one_line():
    with pytest.raises(PategailError, match="method must be one of"):
        TrainConfig(method="fedprox")
    with pytest.raises(PategailError, match="Gaussian mechanism"):
        TrainConfig(method="dp-fedavg", privacy={"epsilon": 8.0, "mechanism": "laplace"})
    with pytest.raises(PategailError, match="fedavg.clip_norm"):
        TrainConfig.from_dict({"method": "dp-fedavg", "fedavg": {"clip_norm": 0}})
    with pytest.raises(PategailError, match="fedavg.server_optimizer"):
        TrainConfig.from_dict({"fedavg": {"server_optimizer": "sgd"}})
    with pytest.raises(PategailError, match="unexpected keyword|fedavg"):
        TrainConfig.from_dict({"fedavg": {"clipnorm": 1.0}})


def test_the_environment_share_of_dp_fedavg_follows_the_noise_on_the_mean_delta():
    """The largest share on the 0.05 grid at which the noise on the mean model delta stays within 2 clip norms:
    at ε = 8 over the public map of Beijing, 0.1 for 82 devices (15.6 clip norms even then), 0.5 for 1,000 and
    something between for 750; without the cell count (the model's size) the smallest share."""
    from pategail.server.coordinator import policy_config
    from pategail.server.policy import Policy
    from pategail.server.privacy.defaults import DELTA_NOISE_LIMIT
    from pategail.server.privacy.gaussian import plan_gaussian

    cells = 3_621
    config = TrainConfig(method="dp-fedavg", rounds=20, privacy={"epsilon": 8.0})
    policy = Policy(policy_config(config, cells))
    values = sum(p.numel() for n, p in policy.named_parameters() if not n.startswith("value_head."))

    def noise_norm(share: float, devices: int) -> float:      # in clip norms: σ (sensitivity 1) · √P / N
        g = plan_gaussian(8.0, 1e-5, values, 21, 1, 2.0 / math.sqrt(values), share)
        return g.noise_std * math.sqrt(values) / devices

    def share(devices: int, n_cells: int | None = cells) -> float:
        return config.for_devices(devices, n_cells).privacy.env_epsilon_fraction

    assert share(82) == 0.1 and noise_norm(0.1, 82) > DELTA_NOISE_LIMIT
    assert share(1000) == 0.5 and noise_norm(0.5, 1000) <= DELTA_NOISE_LIMIT
    between = share(750)
    assert 0.1 < between < 0.5
    assert noise_norm(between, 750) <= DELTA_NOISE_LIMIT < noise_norm(round(between + 0.05, 10), 750)
    assert share(1000, None) == 0.1
    # PateGail's share does not depend on the cell count
    pategail = TrainConfig(privacy={"epsilon": 8.0})
    for devices in (82, 1000):
        assert pategail.for_devices(devices, cells).privacy == pategail.for_devices(devices).privacy


def test_the_server_optimiser_of_dp_fedavg_is_fedavg_unless_the_config_names_one():
    """FedAvg at step 1 for every device count, with or without privacy, for DP-FedAvg and the hybrid; FedAdam
    (step 0.1) where the config names it; a step in the config wins; an unresolved config cannot build a server
    optimiser, and the one built is the step asked for."""
    import torch

    from pategail.server.fedavg.coordinator import server_optimizer

    cells = 3_621
    config = TrainConfig(method="dp-fedavg", rounds=20, privacy={"epsilon": 8.0})

    def chosen(devices: int, base: TrainConfig = config, n_cells: int | None = cells) -> tuple[str, float]:
        fa = base.for_devices(devices, n_cells).fedavg
        return fa.server_optimizer, fa.server_lr

    for devices in (82, 1000, 10_000):
        assert chosen(devices) == ("fedavg", 1.0)
    assert chosen(1000, n_cells=None) == ("fedavg", 1.0)
    assert chosen(82, TrainConfig(method="dp-fedavg", rounds=20)) == ("fedavg", 1.0)              # no privacy
    assert chosen(1000, TrainConfig(method="hybrid", rounds=20, privacy={"epsilon": 8.0})) == ("fedavg", 1.0)
    adam = TrainConfig.from_dict({"method": "dp-fedavg", "rounds": 20, "privacy": {"epsilon": 8.0},
                                  "fedavg": {"server_optimizer": "fedadam"}})
    assert chosen(82, adam) == ("fedadam", 0.1)
    assert chosen(82, TrainConfig.from_dict({"method": "dp-fedavg", "privacy": {"epsilon": 8.0},
                                             "fedavg": {"server_lr": 0.5}})) == ("fedavg", 0.5)
    with pytest.raises(PategailError, match="server_optimizer must be one of"):
        TrainConfig.from_dict({"method": "dp-fedavg", "fedavg": {"server_optimizer": "fedprox"}})
    with pytest.raises(ValueError, match="for_devices"):
        server_optimizer([torch.zeros(2, requires_grad=True)], config.fedavg)
    p = [torch.zeros(2, requires_grad=True)]
    sgd = server_optimizer(p, config.for_devices(82, cells).fedavg)
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]["lr"] == 1.0
    assert isinstance(server_optimizer(p, adam.for_devices(82, cells).fedavg), torch.optim.Adam)


def test_dp_fedavg_runs_20_rounds_unless_told_otherwise():
    """The rounds every DP-FedAvg measurement used; PateGail and the hybrid keep 60; a setting wins (0 is the
    method's number)."""
    assert TrainConfig.from_dict({"method": "dp-fedavg"}).rounds == 20
    assert TrainConfig.from_dict({"method": "hybrid"}).rounds == TrainConfig().rounds == 60
    assert TrainConfig.from_dict({"method": "dp-fedavg", "rounds": 7}).rounds == 7
    with pytest.raises(PategailError, match="rounds"):
        TrainConfig.from_dict({"rounds": -1})
    resolved = TrainConfig(method="dp-fedavg").to_dict()
    assert resolved["rounds"] == 20 and TrainConfig.from_dict(resolved).rounds == 20
