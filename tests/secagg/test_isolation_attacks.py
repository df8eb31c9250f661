"""A malicious aggregator with no colluding device cannot open one device's input, nor the sum of a small group:
the attacks that chose what each device is delivered and shown, reproduced through the public protocol.

Each attack is run to its payoff (``MaliciousAggregator.open_sum``); the harness itself is checked on an
honest round (it opens the full sum exactly), and against a device without the defence the same attack
opens the victim's input — so "opens nothing" below means the defence held, not that the harness is blind.
"""
from __future__ import annotations

import numpy as np
import pytest

from pategail.sdk.secagg.config import RoundConfig
from pategail.sdk.secagg.policy import DevicePolicy

from .malicious import MaliciousAggregator


def _honest(agg: MaliciousAggregator) -> None:
    agg.deliver()
    agg.show(lambda d: agg.inputs.keys())
    agg.unmask()


@pytest.mark.parametrize("n, degree", [(10, 0), (24, 4), (40, 12)])
def test_the_harness_opens_the_honest_sum_and_no_part_of_it(federation, rng, n, degree):
    agg = MaliciousAggregator(federation, n, degree, n // 2, rng)
    _honest(agg)
    assert not agg.refusals
    np.testing.assert_array_equal(agg.open_sum(agg.ids), agg.true_sum(agg.ids))
    assert agg.open_sum(agg.ids[:1]) is None and agg.open_sum(agg.ids[:-1]) is None


# -- 1. isolation by an empty (or short) share delivery -------------------------------------------------------------
@pytest.mark.parametrize("n, degree", [(10, 0), (24, 4)])
def test_a_device_given_too_few_shares_does_not_send_its_input(federation, rng, n, degree):
    agg = MaliciousAggregator(federation, n, degree, n // 2 + 1, rng)
    victim = agg.ids[3]
    t = agg.cfg.threshold
    agg.deliver({victim: set()})
    assert victim not in agg.inputs and "shares from only 0 neighbours" in agg.refusals[victim]
    agg.show(lambda d: agg.inputs.keys() | {victim})     # everyone else is told the victim survived
    agg.unmask()
    assert agg.open_sum([victim]) is None
    assert victim not in agg.revealed["b"] or len(agg.revealed["b"][victim]) < t or victim not in agg.inputs


@pytest.mark.parametrize("n, degree", [(10, 0), (24, 4), (40, 8)])
def test_the_share_floor_is_exactly_t_minus_one_neighbours(federation, rng, n, degree):
    short = MaliciousAggregator(federation, n, degree, n // 2, rng)
    victim = short.ids[0]
    t = short.cfg.threshold
    partners = sorted(short.neighbours(victim))
    short.deliver({victim: set(partners[:t - 2])})
    assert victim in short.refusals and victim not in short.inputs
    enough = MaliciousAggregator(federation, n, degree, n // 2, rng)
    victim = enough.ids[0]
    enough.deliver({victim: set(sorted(enough.neighbours(victim))[:t - 1])})
    assert victim in enough.inputs and victim not in enough.refusals


# -- 2. the two-view split ---------------------------------------------------------------------------------------
def _split_choices(agg: MaliciousAggregator, victim: int) -> list[set[int]]:
    """Ways to pick P, the t − 1 neighbours the victim is delivered: one side of the ring first, alternate
    positions, the farthest neighbours first."""
    ring = agg.ring()
    pos = {d: i for i, d in enumerate(ring)}
    n, half = len(ring), agg.cfg.degree // 2
    by_offset = {o: ring[(pos[victim] + o) % n] for o in range(-half, half + 1) if o}
    need = agg.cfg.threshold - 1
    one_side = [by_offset[o] for o in list(range(1, half + 1)) + list(range(-1, -half - 1, -1))]
    alternate = [by_offset[o] for o in sorted(by_offset, key=lambda o: (o % 2, abs(o)))]
    farthest = [by_offset[o] for o in sorted(by_offset, key=lambda o: -abs(o))]
    return [set(order[:need]) for order in (one_side, alternate, farthest)]


def _split(agg: MaliciousAggregator, victim: int, partners: set[int]) -> None:
    """Deliver the victim only ``partners`` (P); show the victim and P a view where the victim's other
    neighbours (Q) dropped, and everyone else one where P dropped."""
    q = agg.neighbours(victim) - partners
    agg.deliver({victim: partners})
    everyone = set(agg.ids)
    agg.show(lambda d: everyone - q if d in partners | {victim} else everyone - partners)
    agg.unmask()


@pytest.mark.parametrize("degree", [4, 8, 12])
def test_a_two_view_split_opens_nothing(federation, rng, degree):
    attacks = []
    for choice in range(3):
        agg = MaliciousAggregator(federation, 40, degree, 16, rng)
        victim = agg.ids[5]
        _split(agg, victim, _split_choices(agg, victim)[choice])
        attacks.append((agg, victim))
    assert [agg.open_sum([victim]) is None for agg, victim in attacks] == [True] * 3
    for agg, victim in attacks:
        assert victim in agg.inputs                                    # it had t − 1 partners: it sent its input
        assert "certified" in agg.refusals.get(victim, "")             # the victim's view was not certified


def test_a_two_view_split_opens_the_input_of_a_device_without_the_certificate(federation, rng, monkeypatch):
    """The same attack against devices that count only t confirmations from their neighbours (no majority
    certificate) and accept a strict-majority threshold: it reads the victim's input."""
    monkeypatch.setattr(RoundConfig, "certificate_size", property(lambda self: 1))
    degree = 4
    opened = 0
    for choice in range(3):
        agg = MaliciousAggregator(federation, 40, degree, 16, rng, threshold=degree // 2 + 1,
                                  federation_args={"policy": DevicePolicy(min_threshold_share=0.5)})
        victim = agg.ids[5]
        _split(agg, victim, _split_choices(agg, victim)[choice])
        got = agg.open_sum([victim])
        if got is not None:
            np.testing.assert_array_equal(got, agg.true_sum([victim]))
            opened += 1
    assert opened >= 1


# -- 3. a window of the ring cut off by devices declared dropped --------------------------------------------------
def _window(agg: MaliciousAggregator, start: int, size: int) -> tuple[list[int], set[int]]:
    """``size`` consecutive ring positions from ``start`` and the degree/2 positions on each side of them."""
    ring, half, n = agg.ring(), agg.cfg.degree // 2, len(agg.ids)
    window = [ring[(start + i) % n] for i in range(size)]
    cut = {ring[(start - i) % n] for i in range(1, half + 1)} | {ring[(start + size - 1 + i) % n]
                                                                 for i in range(1, half + 1)}
    return window, cut


@pytest.mark.parametrize("degree", [4, 8, 12])
def test_a_window_cut_off_by_declared_dropouts_opens_nothing(federation, rng, degree):
    for size in range(degree // 2 + 1, degree + 1):
        agg = MaliciousAggregator(federation, 40, degree, 16, rng)
        window, cut = _window(agg, 0, size)
        agg.deliver()
        survivors = set(agg.ids) - cut                               # one view, certified by everyone in it
        agg.show(lambda d: survivors)
        agg.unmask()
        assert agg.open_sum(window) is None, f"window of {size}"
        rest = sorted(survivors - set(window))
        assert agg.open_sum(rest) is None                          # the other part is sealed the same way


def test_a_window_cut_off_opens_under_a_strict_majority_threshold(federation, rng):
    """Why the threshold is k/2 + 2: with a strict majority (k/2 + 1) a window of k/2 + 1 devices cut off by
    declared dropouts opens on its own — the sum of three devices at k = 4."""
    degree = 4
    agg = MaliciousAggregator(federation, 40, degree, 16, rng, threshold=degree // 2 + 1,
                              federation_args={"policy": DevicePolicy(min_threshold_share=0.5)})
    window, cut = _window(agg, 0, degree // 2 + 1)
    agg.deliver()
    survivors = set(agg.ids) - cut
    agg.show(lambda d: survivors)
    agg.unmask()
    np.testing.assert_array_equal(agg.open_sum(window), agg.true_sum(window))
