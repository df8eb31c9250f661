"""`pategail evaluate`: the five metrics and the spatial metrics of a synthetic data file against a data set's test days."""
from __future__ import annotations

import json
from pathlib import Path

from pategail.evaluation.options import add_arguments as add_downstream_arguments


def register(sub) -> None:
    p = sub.add_parser("evaluate", help="score synthetic days against the test days (both metric modes + floor)")
    p.add_argument("--data", required=True, type=Path, help="prepared data set directory")
    p.add_argument("--synthetic", required=True, type=Path, help="synthetic data file (agent,day,slot,cell,lat,lon)")
    p.add_argument("--json", type=Path, default=None, help="write the numbers as JSON here")
    p.add_argument("--seed", type=int, default=0, help="seed choosing the training days of the floor (and of the "
                   "downstream experiments)")
    p.add_argument("--bundle", type=Path, default=None, metavar="DIR",
                   help="the generator's published model bundle: enables the white-box membership attack")
    p.add_argument("--figures", type=Path, default=None, metavar="DIR",
                   help="write the downstream figures (prediction, recommendation, membership, uniqueness) here")
    p.add_argument("--reference-bundle", type=Path, default=None, metavar="DIR",
                   help="a bundle whose policy never trained (a run's bundle-initial): the white-box attack on it "
                        "is the level to read the trained policy's against")
    add_downstream_arguments(p)
    p.set_defaults(func=run_evaluate)


def run_evaluate(args) -> int:
    from pategail.data.dataset import load_dataset
    from pategail.metrics.evaluate import evaluate, format_table
    from pategail.metrics.guard import guard_line
    from pategail.metrics.spatial import format_spatial_table
    from pategail.sdk.synthetic import read_synthetic_csv

    config = None
    if not args.no_downstream:
        from pategail.evaluation.options import config_from_args
        config = config_from_args(args, args.seed)                 # bad budgets stop before any work
    dataset = load_dataset(args.data)
    days = read_synthetic_csv(args.synthetic, n_cells=dataset.n_cells, slots=dataset.train_days.shape[1])
    res = evaluate(days, dataset, seed=args.seed)
    print(f"{len(days)} synthetic days vs {len(dataset.test_days)} test days (JSD, lower is better)\n")
    print("km mode:")
    print(format_table({"synthetic": res["metrics"], "floor": res["floor"]}))
    print("\npaper mode:")
    print(format_table({"synthetic": res["metrics_paper"], "floor": res["floor_paper"]}, mode="paper"))
    print("\nspatial (Density, Trips: JSD, lower is better; Hot-k: overlap of the top-k cells, higher is better):")
    print(format_spatial_table({"synthetic": res["spatial"], "floor": res["floor_spatial"]}))
    print(f"\nInvented-mode guard: {guard_line(res['guard'])}")
    if not args.no_downstream:
        res.update(_downstream(args, dataset, days, config))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(res, indent=2) + "\n")
    return 0


def _downstream(args, dataset, days, config) -> dict:
    """The ``utility`` and ``attacks`` sections (pategail.evaluation), printed as tables."""
    from pategail.evaluation.downstream import downstream
    from pategail.evaluation.options import policy_session_from_bundle
    from pategail.evaluation.render import markdown, write_figures

    session = policy_session_from_bundle(args.bundle) if args.bundle is not None else None
    reference = policy_session_from_bundle(args.reference_bundle) if args.reference_bundle is not None else None
    result = downstream(dataset, days, policy_session=session, reference_session=reference, config=config)
    print("\n" + markdown(result))
    if args.figures is not None:
        write_figures(result, args.figures)
    return result
