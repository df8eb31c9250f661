"""The feasibility verdict by hand: the noise std on a released mean (Laplace √2·b/N, Gaussian σ/N), the
comparison with the measured tolerance at its boundary, and the verdict's wording in each case."""
from __future__ import annotations

import math
from types import SimpleNamespace


from pategail.server.privacy.feasibility import (MEASURED_TOLERANCE, Feasibility, plan_feasibility,
                                                 tolerance_for)


def test_measured_tolerances_are_the_benchmarked_ones():
    # BENCHMARKS.md "Noise tolerance": pair ≥ 3, block:8 none met the bar, day 0.3
    assert MEASURED_TOLERANCE == {"pair": 3.0, "block:8": 0.0, "day": 0.3}
    assert tolerance_for("day") == 0.3 and tolerance_for("pair") == 3.0 and tolerance_for("block:8") == 0.0
    assert tolerance_for("block:3") is None


def test_plan_feasibility_uses_the_mechanism_s_std_over_the_devices():
    laplace = SimpleNamespace(is_gaussian=False, sum_noise_scale=3.0, mechanism_name="laplace", granularity="pair",
                              gaussian=None, env_sum_noise_scale=0.5)
    f = plan_feasibility(laplace, 12)
    # the environment release (one vector query) has its own Laplace scale: std √2·b_env on each cell sum
    assert f == Feasibility("laplace", "pair", 12, math.sqrt(2) * 3.0 / 12, 3.0, math.sqrt(2) * 0.5)
    assert "noise std 0.707 on each cell sum, a home cell is seen from 2.12 device weights" in f.line()
    per_value = SimpleNamespace(**{**vars(laplace), "env_sum_noise_scale": 0.0})     # a plan made before
    assert plan_feasibility(per_value, 12).env_noise_std == math.sqrt(2) * 3.0
    gauss = SimpleNamespace(is_gaussian=True, sum_noise_scale=99.0, mechanism_name="gaussian", granularity="day",
                            gaussian={"noise_std": 1.5, "env_noise_std": 4.0})
    f = plan_feasibility(gauss, 6)
    # the environment's std is per released sum: not divided by the devices
    assert f == Feasibility("gaussian", "day", 6, 0.25, 0.3, 4.0)
    assert f.can_learn is True


def test_can_learn_at_the_boundary_and_each_line():
    at = Feasibility("gaussian", "day", 10, 0.3, 0.3)
    assert at.can_learn is True                                        # at most the tolerance
    assert Feasibility("gaussian", "day", 10, 0.3000001, 0.3).can_learn is False
    assert at.line() == "gaussian day      noise std       0.3 on each released mean, below the measured tolerance 0.3"
    above = Feasibility("laplace", "pair", 3, 4.25, 3.0).line()
    assert above == ("laplace  pair     noise std      4.25 on each released mean, ABOVE the measured tolerance 3: "
                     "the generator is not expected to learn")
    none = Feasibility("gaussian", "block:3", 3, 0.125, None).line()
    assert none == ("gaussian block:3  noise std     0.125 on each released mean (no tolerance measured at this "
                    "granularity)")
    zero = Feasibility("gaussian", "block:8", 3, 0.0, 0.0)
    assert zero.line().endswith("did not beat epr on >= 4 of 5 metrics at this granularity even without noise "
                                "(measured tolerance 0)")
    assert zero.can_learn is True and "below" not in zero.line()
