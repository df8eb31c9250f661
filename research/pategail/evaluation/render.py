"""The downstream results as Markdown tables and one PNG figure per experiment."""
from __future__ import annotations

from pathlib import Path

import numpy as np

ARM_LABELS = {"real": "(a) real", "synthetic": "(b) synthetic", "real+synthetic": "(c) real + synthetic"}
PRED_METRICS = ("acc1", "acc5", "mrr")
GROUP_LABELS = {"members": "members (training days)", "nonmembers": "non-members (held-out users)",
                "test": "test days"}
ATTACK_LABELS = {"membership_whitebox": "white-box (policy log-probs)",
                 "membership_whitebox_reference": "white-box on a never-trained policy (reference)",
                 "membership_blackbox": "black-box (closest synthetic days)"}


def _f(v, digits=4):
    return "-" if v is None else f"{v:.{digits}f}"


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(result: dict) -> str:
    """The ``utility`` and ``attacks`` sections of a report as Markdown."""
    pred = result["utility"]["prediction"]
    cfg = pred["config"]
    out = ["## Downstream utility", "",
           f"Next-location prediction on {pred['test_days']} real test days: a GRU with a stay gate (early-stopped "
           f"on {cfg['validation_share']:.0%} of each arm's own days, at most {cfg['steps']} steps of "
           f"{cfg['batch_size']} days, seed {cfg['seed']}) and a first-order Markov chain (back-off β = "
           f"{cfg['markov_prior']:g}), each trained on every arm:", ""]
    rows = [["stay (next cell = current)", "", "", _f(pred["persistence"]["acc1"]), "-", "-"]]
    for name, label, res in (("recurrent", "GRU", pred), ("markov", "Markov", pred["markov"])):
        rows += [[label, ARM_LABELS[a], str(pred["training_days"][a])] + [_f(res["arms"][a][m]) for m in PRED_METRICS]
                 for a in ARM_LABELS]
    out += _table(["predictor", "training days", "days", "Acc@1", "Acc@5", "MRR"], rows)
    ratio, gain = pred["ratio_synthetic_to_real"], pred["gain_real_plus_synthetic"]
    beats = pred["arms"]["real"]["acc1"] > max(pred["persistence"]["acc1"], pred["markov"]["arms"]["real"]["acc1"])
    out += ["", f"GRU (b)/(a): Acc@1 {_f(ratio['acc1'], 3)}, Acc@5 {_f(ratio['acc5'], 3)}, MRR {_f(ratio['mrr'], 3)}; "
            f"(c) − (a): Acc@1 {gain['acc1']:+.4f}, Acc@5 {gain['acc5']:+.4f}, MRR {gain['mrr']:+.4f}. "
            + ("On real days the GRU beats both stay and Markov." if beats else
               "On real days the GRU does not beat both stay and Markov: read its arms with care."), ""]
    rec = result["utility"]["recommendation"]
    if rec.get("available"):
        out += [f"Location recommendation (implicit ALS, top {rec['k']} new cells) for {rec['query_users']} real "
                f"users ({rec['query_source']}):", ""]
        out += _table(["fitted on", f"Recall@{rec['k']}", f"NDCG@{rec['k']}", "users"],
                      [[ARM_LABELS[a], _f(rec["arms"][a]["recall"]), _f(rec["arms"][a]["ndcg"]),
                        str(rec["arms"][a]["users"])] for a in ARM_LABELS])
    else:
        out += [f"Location recommendation: not available ({rec['reason']})."]
    out += ["", "## Privacy attacks", ""]
    attacks = result["attacks"]
    rows = []
    for key, label in ATTACK_LABELS.items():
        a = attacks.get(key, {"available": False, "reason": "not computed"})
        if not a.get("available"):
            rows.append([label, f"not available: {a['reason']}", "", "", ""])
            continue
        rows.append([label, f"{a['auc']:.3f} [{a['auc_interval'][0]:.3f}, {a['auc_interval'][1]:.3f}]",
                     f"{a['accuracy']:.3f} [{a['accuracy_interval'][0]:.3f}, {a['accuracy_interval'][1]:.3f}]",
                     f"{a['users']['members']} / {a['users']['nonmembers']}", f"{a['auc_days']:.3f}"])
    out += ["Membership inference (users: members vs non-members, 5-fold cross-validation grouped by user, "
            "bootstrap 95% intervals; 0.5 = chance):", ""]
    out += _table(["attack", "AUC (users)", "accuracy (users)", "members / non-members", "AUC (days)"], rows)
    uniq = attacks["uniqueness"]
    out += ["", f"Uniqueness: each real day's highest overlap rate with a synthetic day (share of equal slots); "
            f"reproduced = overlap >= {uniq['threshold']:.0%}:", ""]
    out += _table(["real days", "days", "mean", "median", "90th pct", "reproduced"],
                  [[GROUP_LABELS[g], str(uniq[g]["days"]), _f(uniq[g].get("mean"), 3), _f(uniq[g].get("median"), 3),
                    _f(uniq[g].get("p90"), 3), _f(uniq[g].get("share_reproduced"), 3)]
                   for g in GROUP_LABELS if g in uniq])
    return "\n".join(out) + "\n"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")                       # files only, no screen
    import matplotlib.pyplot as plt
    return plt


def write_figures(result: dict, out_dir: Path, prefix: str = "") -> list[Path]:
    """prediction.png, recommendation.png, membership.png (ROC over users) and uniqueness.png (the share of
    real days whose highest overlap is at least x); returns the paths written."""
    plt = _pyplot()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []

    def save(fig, name):
        path = out_dir / f"{prefix}{name}"
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)

    pred = result["utility"]["prediction"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for i, arm in enumerate(ARM_LABELS):
        ax.bar(np.arange(3) + (i - 1) * 0.27, [pred["arms"][arm][m] for m in PRED_METRICS], 0.27,
               label=ARM_LABELS[arm])
    ax.hlines(pred["persistence"]["acc1"], -0.45, 0.45, color="black", lw=1.2, ls="--", zorder=3,
              label="stay (Acc@1)")
    ax.set_xticks(range(3), ["Acc@1", "Acc@5", "MRR"])
    ax.set_title("Next-location prediction (GRU) on real test days")
    ax.legend(fontsize=8, loc="lower right")
    save(fig, "prediction.png")

    rec = result["utility"]["recommendation"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if rec.get("available"):
        for i, arm in enumerate(ARM_LABELS):
            vals = [rec["arms"][arm][m] or 0.0 for m in ("recall", "ndcg")]
            ax.bar(np.arange(2) + (i - 1) * 0.27, vals, 0.27, label=ARM_LABELS[arm])
        ax.set_xticks(range(2), [f"Recall@{rec['k']}", f"NDCG@{rec['k']}"])
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "not available:\n" + rec["reason"], ha="center", va="center", wrap=True)
        ax.set_axis_off()
    ax.set_title("Location recommendation for real users")
    save(fig, "recommendation.png")

    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="grey", lw=0.8, ls="--", label="chance")
    for key, label in ATTACK_LABELS.items():
        a = result["attacks"].get(key, {})
        if a.get("available"):
            ax.step(a["roc"]["fpr"], a["roc"]["tpr"], where="post", label=f"{label}: AUC {a['auc']:.2f}")
    ax.set_xlabel("false-positive rate (non-member users)")
    ax.set_ylabel("true-positive rate (member users)")
    ax.set_title("Membership inference (ROC over users)")
    ax.legend(fontsize=7, loc="lower right")
    save(fig, "membership.png")

    uniq = result["attacks"]["uniqueness"]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for group, label in GROUP_LABELS.items():
        hist = uniq.get(group, {}).get("histogram")
        if not hist:
            continue
        hist = np.asarray(hist, dtype=float)
        share_at_least = hist[::-1].cumsum()[::-1] / hist.sum()
        ax.step(np.arange(len(hist)) / (len(hist) - 1), share_at_least, where="post", label=label)
    ax.axvline(uniq["threshold"], color="grey", lw=0.8, ls="--")
    ax.set_xlabel("highest overlap rate with a synthetic day")
    ax.set_ylabel("share of real days with at least this overlap")
    ax.set_title("Uniqueness")
    ax.legend(fontsize=8)
    save(fig, "uniqueness.png")
    return paths
