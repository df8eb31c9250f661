"""A config file's values are checked against each setting's type, with a one-line error naming the setting."""
import json

import pytest

from pategail.server.errors import PategailError
from pategail.server.config import TrainConfig, setting_differences


@pytest.mark.parametrize("settings, message", [
    ({"place_law": "false"}, r'"place_law" must be true or false or null, got \'false\''),   # a string is truthy
    ({"action_prior": 1}, r'"action_prior" must be true or false or null'),
    ({"n_heads": True}, r'"n_heads" must be a whole number, got True'),
    ({"rounds": 2.5}, r'"rounds" must be a whole number'),
    ({"alpha": "0.8"}, r'"alpha" must be a number'),
    ({"mechanism": 3}, r'"mechanism" must be a string'),
    ({"ppo": {"anchor_coef": "10"}}, r'"ppo.anchor_coef" must be a number'),
])
def test_a_value_of_the_wrong_type_is_a_one_line_error(tmp_path, settings, message):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(settings))
    with pytest.raises(PategailError, match=message) as err:
        TrainConfig.from_file(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_values_of_the_right_type_are_read():
    c = TrainConfig.from_dict({"place_law": None, "action_prior": False, "alpha": 1, "target_epsilon": 8,
                               "first_cell_alpha": None, "ppo": {"anchor_coef": 10}})
    assert c.target_epsilon == 8 and c.alpha == 1 and c.ppo.anchor_coef == 10
    assert not c.uses_place_law(1000) and not c.uses_action_prior    # private: null resolves to off


def test_setting_differences_name_each_changed_setting_nested_ones_by_path():
    recorded = TrainConfig(n_layers=2, place_law=None).to_dict()
    now = TrainConfig.from_dict({"n_layers": 1, "place_law": False, "ppo": {"n_epochs": 3}}).to_dict()
    assert setting_differences({"config": recorded, "seed": 0}, {"config": now, "seed": 0}, "the run") == [
        "config.n_layers: 2 in the run, 1 now",
        "config.place_law: null in the run, false now",
        f"config.ppo.n_epochs: {recorded['ppo']['n_epochs']} in the run, 3 now"]
    assert setting_differences({"a": 1}, {"a": 1, "b": "x"}, "the checkpoint") == ['b: null in the checkpoint, "x" now']
    assert setting_differences(recorded, recorded, "the run") == []
    # a long value (a run's device ids) is cut, so the error stays one short line
    assert setting_differences({"users": list(range(1000))}, {"users": list(range(1, 1001))}, "the run") == [
        "users: [0, 1, 2, … (1,000 values)] in the run, [1, 2, 3, … (1,000 values)] now"]
    cut = setting_differences({"data": "/d/" + "x" * 500 + "/city-a"}, {"data": "/d/city-b"}, "the run")[0]
    assert len(cut) < 100 and 'x/city-a" in the run, "/d/city-b" now' in cut
