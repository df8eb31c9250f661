"""The run's setting for the policy's attention heads (``TrainConfig.n_heads``) reaches the policy, its exported
incremental model and the sampler, and a bad value is one clear error."""
import pytest
import torch

from pategail.server.errors import PategailError
from pategail.export.bundle import export_bundle
from pategail.export.discriminator import Discriminator
from pategail.sdk.bundle import load_bundle, open_generation_session
from pategail.sdk.decoding import CacheLayout
from pategail.server.config import TrainConfig
from pategail.server.coordinator import policy_config
from pategail.server.policy import Policy


def test_the_policy_of_a_one_head_run_has_one_head_and_attends_differently():
    one = Policy(policy_config(TrainConfig(policy={"n_heads": 1, "d_model": 16}), n_cells=9))
    four = Policy(policy_config(TrainConfig(policy={"n_heads": 4, "d_model": 16}), n_cells=9))
    assert four.config.n_heads == 4 and one.config.n_heads == 1
    assert all(block.attn.n_heads == 1 and block.attn.head_dim == 16 for block in one.blocks)
    # the heads change no parameter's shape, only how the same weights attend: a run resumed or exported with
    # another head count would load silently and compute something else
    with torch.no_grad():                   # spread the queries so that the attention is far from uniform
        one.blocks[0].attn.qkv.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(1))
    four.load_state_dict(one.state_dict())
    x = torch.randn(3, 6, 16, generator=torch.Generator().manual_seed(2))
    assert not torch.allclose(one.blocks[0].attn(x), four.blocks[0].attn(x), atol=1e-4)


def test_the_exported_incremental_model_declares_the_runs_heads(tmp_path):
    policy = Policy(policy_config(TrainConfig(policy={"n_heads": 2, "d_model": 16, "n_layers": 1}), n_cells=12))
    bundle = load_bundle(export_bundle(policy, Discriminator(), tmp_path / "bundle"))
    assert CacheLayout.of_session(open_generation_session(bundle)) == CacheLayout(1, 2, 8)


@pytest.mark.parametrize("heads", [0, 3, -4])
def test_a_head_count_that_does_not_divide_the_width_is_one_error_naming_the_setting(heads):
    with pytest.raises(PategailError, match=r"policy.n_heads must be >= 1 and divide policy.d_model \(64\), got") as err:
        TrainConfig.from_dict({"policy": {"n_heads": heads}})
    assert "\n" not in str(err.value)
