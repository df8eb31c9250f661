"""A config file: sections of settings, each value checked against its setting's type, with a one-line error
naming the setting (and, for a setting outside its section, the section it belongs in)."""
import json

import pytest

from pategail.server.errors import PategailError
from pategail.server.config import TrainConfig, setting_differences


@pytest.mark.parametrize("settings, message", [
    ({"environment": {"place_law": "false"}},                                  # a string is truthy
     r'"environment.place_law" must be true or false or null, got \'false\''),
    ({"environment": {"action_prior": 1}}, r'"environment.action_prior" must be true or false or null'),
    ({"policy": {"n_heads": True}}, r'"policy.n_heads" must be a whole number, got True'),
    ({"rounds": 2.5}, r'"rounds" must be a whole number'),
    ({"environment": {"alpha": "0.8"}}, r'"environment.alpha" must be a number'),
    ({"privacy": {"mechanism": 3}}, r'"privacy.mechanism" must be a string'),
    ({"ppo": {"anchor_coef": "10"}}, r'"ppo.anchor_coef" must be a number'),
    ({"privacy": 8}, r'"privacy" must be an object of privacy settings'),
    ({"mechanism": "laplace"}, r'unknown setting \'mechanism\' \(it is a setting of the \'privacy\' section'),
    ({"privacy": {"n_heads": 2}}, r"unknown setting privacy.n_heads \(it is a setting of the 'policy' section"),
    ({"disc_replay_share": 0.5}, r"unknown setting 'disc_replay_share'$"),
])
def test_a_value_of_the_wrong_type_is_a_one_line_error(tmp_path, settings, message):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(settings))
    with pytest.raises(PategailError, match=message) as err:
        TrainConfig.from_file(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_values_of_the_right_type_are_read():
    c = TrainConfig.from_dict({"environment": {"place_law": None, "action_prior": False, "alpha": 1},
                               "privacy": {"epsilon": 8}, "ppo": {"anchor_coef": 10}})
    assert c.privacy.epsilon == 8 and c.environment.alpha == 1 and c.ppo.anchor_coef == 10
    assert not c.uses_place_law(1000) and not c.uses_action_prior    # private: null resolves to off


def test_setting_differences_name_each_changed_setting_nested_ones_by_path():
    recorded = TrainConfig(policy={"n_layers": 2}, environment={"place_law": None}).to_dict()
    now = TrainConfig.from_dict({"policy": {"n_layers": 1}, "environment": {"place_law": False},
                                 "ppo": {"n_epochs": 3}}).to_dict()
    assert setting_differences({"config": recorded, "seed": 0}, {"config": now, "seed": 0}, "the run") == [
        "config.environment.place_law: null in the run, false now",
        "config.policy.n_layers: 2 in the run, 1 now",
        f"config.ppo.n_epochs: {recorded['ppo']['n_epochs']} in the run, 3 now"]
    assert setting_differences({"a": 1}, {"a": 1, "b": "x"}, "the checkpoint") == ['b: null in the checkpoint, "x" now']
    assert setting_differences(recorded, recorded, "the run") == []
    # a long value (a run's device ids) is cut, so the error stays one short line
    assert setting_differences({"users": list(range(1000))}, {"users": list(range(1, 1001))}, "the run") == [
        "users: [0, 1, 2, … (1,000 values)] in the run, [1, 2, 3, … (1,000 values)] now"]
    cut = setting_differences({"data": "/d/" + "x" * 500 + "/city-a"}, {"data": "/d/city-b"}, "the run")[0]
    assert len(cut) < 100 and 'x/city-a" in the run, "/d/city-b" now' in cut


def test_a_file_overrides_section_by_section_and_options_merge_into_its_sections(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"rounds": 5, "privacy": {"mechanism": "laplace", "kappa": 3.0}}))
    c = TrainConfig.from_file(path, {"privacy": {"epsilon": 4.0}})
    assert (c.rounds, c.privacy.mechanism, c.privacy.kappa, c.privacy.epsilon) == (5, "laplace", 3.0, 4.0)
    assert c.ppo == TrainConfig().ppo and c.policy == TrainConfig().policy         # every other default kept


def test_every_setting_has_one_default():
    """The PPO settings' defaults are the training runs': a TrainConfig and a bare PPOConfig agree."""
    from pategail.server.ppo import PPOConfig

    assert TrainConfig().ppo == PPOConfig()
    assert (PPOConfig().n_epochs, PPOConfig().gamma, PPOConfig().gae_lambda) == (10, 0.9, 0.9)


def test_a_value_out_of_its_range_is_a_one_line_error():
    with pytest.raises(PategailError, match=r"^environment.relevance_exponent must be in \[0, 1\], got 2$"):
        TrainConfig.from_dict({"environment": {"relevance_exponent": 2}})
