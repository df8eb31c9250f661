"""A device's own privacy budget: its ledger (``privacy-ledger.json`` in the device directory), budgeted by the
privacy plan its bundle declares, and the check a request passes before the device prepares anything.

The secure round checks the signed configuration's scales against the ledger again
(:class:`~pategail.sdk.secagg.ledger.PrivacyLedger`, :class:`~pategail.sdk.secagg.policy.DevicePolicy`); this
earlier check answers a RoundRequest or InitialStatesRequest that the device could not afford with an
ErrorReply ``budget`` and nothing changed — no training, no pending vector.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

from pategail.sdk.files import write_atomic
from pategail.sdk.messages import BUDGET, MessageError
from pategail.sdk.secagg.errors import RoundRefused
from pategail.sdk.secagg.ledger import PrivacyLedger
from pategail.sdk.secagg.policy import DeclaredPlan

log = logging.getLogger(__name__)
LEDGER_FILE = "privacy-ledger.json"
"""The releases this device took part in (:mod:`pategail.sdk.secagg.ledger`), budgeted by the declared plan."""
PLAN_FILE = "privacy-plan.json"
"""The last privacy plan a bundle of this device declared: still in force when a later bundle declares none."""


def plan_in_force(root: Path, declared: DeclaredPlan | None) -> DeclaredPlan | None:
    """The privacy plan the device at ``root`` holds itself to: the one its bundle ``declared``, remembered on
    disk; or, when the bundle declares none, the one remembered from the last bundle that did. A coordinator
    cannot lift a device's floors or budget by serving a bundle without a privacy section — only the owner can,
    with :func:`forget_plan`. An unreadable remembered plan is treated as a refusal to go on without one
    (MessageError ``budget``)."""
    path = Path(root) / PLAN_FILE
    if declared is not None:
        text = json.dumps(declared.to_manifest(), sort_keys=True) + "\n"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            write_atomic(path, text.encode("utf-8"))
        return declared
    if not path.exists():
        return None
    try:
        remembered = DeclaredPlan.from_manifest(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise MessageError(BUDGET, f"{path}: the remembered privacy plan cannot be read ({err}); refusing "
                                   "until the owner resets it") from None
    log.info("the bundle declares no privacy plan; keeping the one this device took part under (ε = %g)",
             remembered.target_epsilon)
    return remembered


def forget_plan(root: Path) -> bool:
    """The owner's explicit reset: drop the remembered privacy plan, so that a bundle without one is served
    without floors or budget. The ledger of past releases is kept. Returns whether a plan was remembered."""
    path = Path(root) / PLAN_FILE
    if path.exists():
        path.unlink()
        return True
    return False


def device_ledger(root: Path, plan: DeclaredPlan | None) -> PrivacyLedger:
    """The ledger of the device at ``root``: its budget is the declared plan's target (none without a plan:
    the record is kept, nothing is refused)."""
    return PrivacyLedger(Path(root) / LEDGER_FILE, None if plan is None else plan.target_epsilon,
                         1e-5 if plan is None else plan.target_delta)


def check_request_budget(root: Path, plan: DeclaredPlan | None, round_: int, n_queries: int,
                         environment: bool = False, cells: bool = False) -> None:
    """Raise MessageError ``budget`` when answering a request of ``n_queries`` queries (the environment
    request when ``environment``, the cell-table release when ``cells``), at the declared plan's noise, would
    take the device at ``root`` past its own budget (or its ledger cannot be read), or when the plan plans no
    release of that kind (the plan of a bundle on a public map plans the cell-table release alone)."""
    if plan is None:
        return
    try:
        release = plan.request_release(n_queries, environment, cells)
    except ValueError:                      # no noise planned for it: ε = ∞
        kind = "cell-table" if cells else "environment" if environment else "reward"
        raise MessageError(BUDGET, f"round {round_}: the privacy plan in force plans no {kind} release; "
                                   "refused") from None
    try:
        after = device_ledger(root, plan).epsilon(release)
    except RoundRefused as err:             # an unreadable ledger: refusing is the safe answer
        raise MessageError(BUDGET, str(err)) from None
    if after > plan.target_epsilon:
        raise MessageError(BUDGET, f"round {round_}: answering would take this device to ε = {after:.4g}, past "
                                   f"its budget {plan.target_epsilon:g}; refused")
