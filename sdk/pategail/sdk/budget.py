"""A device's own privacy budget: its ledger (``privacy-ledger.json`` in the device directory), budgeted by the
privacy plan its bundle declares, and the check a request passes before the device prepares anything.

The secure round checks the signed configuration's scales against the ledger again
(:class:`~pategail.sdk.secagg.ledger.PrivacyLedger`, :class:`~pategail.sdk.secagg.policy.DevicePolicy`); this
earlier check answers a RoundRequest or InitialStatesRequest that the device could not afford with an
ErrorReply ``budget`` and nothing changed — no training, no pending vector.
"""
from __future__ import annotations

from pathlib import Path

from pategail.sdk.messages import BUDGET, MessageError
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.sdk.secagg.policy import DeclaredPlan

LEDGER_FILE = "privacy-ledger.json"
"""The releases this device took part in (:mod:`pategail.sdk.secagg.ledger`), budgeted by the declared plan."""


def device_ledger(root: Path, plan: DeclaredPlan | None) -> PrivacyLedger:
    """The ledger of the device at ``root``: its budget is the declared plan's target (none without a plan:
    the record is kept, nothing is refused)."""
    return PrivacyLedger(Path(root) / LEDGER_FILE, None if plan is None else plan.target_epsilon,
                         1e-5 if plan is None else plan.target_delta)


def check_request_budget(root: Path, plan: DeclaredPlan | None, round_: int, n_queries: int,
                         environment: bool = False) -> None:
    """Raise MessageError ``budget`` when answering a request of ``n_queries`` queries (the environment
    request when ``environment``), at the declared plan's noise, would take the device at ``root`` past its
    own budget (or its ledger cannot be read)."""
    if plan is None:
        return
    try:
        after = device_ledger(root, plan).epsilon(plan.request_release(n_queries, environment))
    except RoundRefused as err:             # an unreadable ledger: refusing is the safe answer
        raise MessageError(BUDGET, str(err)) from None
    if after > plan.target_epsilon:
        raise MessageError(BUDGET, f"round {round_}: answering would take this device to ε = {after:.4g}, past "
                                   f"its budget {plan.target_epsilon:g}; refused")
