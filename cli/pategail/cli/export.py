"""`pategail export`: write a model bundle (policy inference model + discriminator training artifacts +
manifest) for devices, from a freshly initialised or a saved policy."""
from __future__ import annotations

from pathlib import Path

from pategail.server.errors import PategailError


def register(sub) -> None:
    p = sub.add_parser("export", help="write an ONNX model bundle (policy + discriminator training artifacts)",
                       description="Write a model bundle for devices: the policy inference model, the "
                                   "discriminator's ONNX Runtime training artifacts and inference model, and "
                                   "manifest.json (versions, SHA-256 of every file, inputs and outputs). The "
                                   "environment it writes is the default one for the cell table (no released "
                                   "homes, laws or day-cells limit): a trained run's own bundle is RUN/bundle, "
                                   "which `pategail generate` and devices use as it is.")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="bundle directory to write (an existing bundle there is replaced)")
    size = p.add_mutually_exclusive_group()
    size.add_argument("--n-cells", type=int, default=None, metavar="N", help="number of cells of a fresh policy")
    size.add_argument("--data", type=Path, default=None, metavar="DIR",
                      help="prepared data set directory: its cell table goes into the bundle (devices need it) and sizes a "
                           "fresh policy; without it (--n-cells) the bundle holds the models only")
    p.add_argument("--policy-checkpoint", type=Path, default=None, metavar="PATH",
                   help="a policy saved by pategail.server.policy.save_policy (instead of a fresh one)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the fresh policy's and discriminator's weights")
    p.set_defaults(func=run_export)


def run_export(args) -> int:
    import torch

    from pategail.export.bundle import export_bundle
    from pategail.export.discriminator import Discriminator
    from pategail.server.policy import Policy, PolicyConfig, load_policy

    n_cells = args.n_cells
    environment = None
    if args.data is not None:
        from pategail.data.dataset import load_dataset
        from pategail.sdk.bundle import Environment
        from pategail.sdk.epr import DEFAULT_ALPHA, DEFAULT_CANDIDATES
        cells = load_dataset(args.data).cells
        n_cells = len(cells)
        environment = Environment(cells=cells, alpha=DEFAULT_ALPHA, candidates=DEFAULT_CANDIDATES)
    if n_cells is not None and n_cells < 2:
        raise PategailError(f"--n-cells must be at least 2, got {n_cells}")

    # fork_rng: seed the initial weights without touching the caller's global torch RNG
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(args.seed)
        if args.policy_checkpoint is not None:
            if not args.policy_checkpoint.is_file():
                raise PategailError(f"{args.policy_checkpoint}: no such policy checkpoint")
            try:
                policy = load_policy(args.policy_checkpoint)
            except Exception as e:                           # torch raises many types for a bad file
                raise PategailError(f"{args.policy_checkpoint}: not a policy checkpoint ({e})") from None
            if n_cells is not None and n_cells != policy.config.n_cells:
                raise PategailError(f"{args.policy_checkpoint} has {policy.config.n_cells} cells, "
                                    f"but {n_cells} were asked for")
        elif n_cells is None:
            raise PategailError("say how many cells the policy has: --n-cells N, --data DIR or --policy-checkpoint")
        else:
            policy = Policy(PolicyConfig(n_cells=n_cells))
        discriminator = Discriminator()
    out = export_bundle(policy, discriminator, args.out, environment=environment)
    print(f"bundle written to {out} (policy: {policy.n_parameters:,} parameters, {policy.config.n_cells} cells)")
    return 0
