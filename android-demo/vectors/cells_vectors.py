"""A privately released cell table's vectors (cells.json), written by generate.py from the Python SDK: the
visited vectors a device releases for it, the public map (universe.csv) a bundle on the released table carries
and what the SDK's bundle reader makes of right and wrong ones, and a Python device on bundles derived from the
committed one — the public map's bundle (a plan declaring the cell release alone), the released table's bundle
(its public map, and a plan declaring every release) — answering the CellReleaseRequest, refusing it where it
cannot be made safely, reading its days on the released table, and refusing bundles that would read them wrong.
The derived bundles are the committed bundle's files with the manifest (and tables) given here; their policy
model is the committed one, which nothing here runs."""
from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

CELL_ROUND = 3
MAX_CELLS = 5
EVERY = 9                     # the released table: every 9th square of the committed bundle's cells


def hx(b: bytes) -> str:
    return bytes(b).hex()


def visited_cases(days: np.ndarray, n_cells: int) -> list[dict]:
    """The visited vector of real days at several max_cells, and of days whose squares tie (lower id first)."""
    from pategail.sdk.cell_universe import visited_vector

    ties = np.array([[7] * 24 + [3] * 24, [5] * 12 + [7] * 12 + [3] * 12 + [2] * 12])
    out = []
    for name, d, n, max_cells in [("user", days, n_cells, m) for m in (1, 5, 32, n_cells)] + \
            [("ties", ties, 10, m) for m in (1, 2, 3, 10)]:
        v = visited_vector(d, n, max_cells)
        out.append({"name": name, "days": d.tolist(), "n_universe": n, "max_cells": max_cells,
                    "ones": np.flatnonzero(v).tolist()})
    return out


SMALL_CELLS = [[39.9, 116.4], [39.95, 116.45], [40.0, 116.5]]
SMALL_UNIVERSE = [(39.9, 116.4, 0), (39.91, 116.41, 0), (39.95, 116.45, 1), (39.96, 116.44, 1), (40.0, 116.5, 2),
                  (40.02, 116.52, 2)]


def universe_cases() -> list[dict]:
    """universe.csv texts over a table of three cells, and the SDK's verdict: the table it reads, or its line."""
    from pategail.sdk.bundle import Environment
    from pategail.sdk.errors import BundleError

    def rows(squares, ids=None, end="\n"):
        ids = range(len(squares)) if ids is None else ids
        return "square,lat,lon,cell" + end + "".join(f"{i},{a},{b},{c}{end}" for i, (a, b, c) in zip(ids, squares))

    s = SMALL_UNIVERSE
    edit = lambda i, row: s[:i] + [row] + s[i + 1:]  # noqa: E731
    cases = [
        ("accepted", rows(s), 6),
        ("crlf", rows(s, end="\r\n"), 6),
        ("header", rows(s).replace("square,lat,lon,cell", "square,lat,lon"), 6),
        ("short_row", rows(s).replace("1,39.91,116.41,0", "1,39.91,116.41"), 6),
        ("not_a_number", rows(s).replace("39.91", "north"), 6),
        ("count", rows(s), 7),
        ("order", rows(s, ids=[0, 2, 1, 3, 4, 5]), 6),
        ("fractional_cell", rows(edit(1, (39.91, 116.41, 0.5))), 6),
        ("latitude", rows(edit(1, (91.0, 116.41, 0))), 6),
        ("nan", rows(edit(3, ("nan", 116.44, 1))), 6),
        ("infinite_cell", rows(edit(3, (39.96, 116.44, "inf"))), 6),
        ("cell_outside", rows(edit(5, (40.02, 116.52, 3))), 6),
        ("negative_cell", rows(edit(5, (40.02, 116.52, -1))), 6),
        ("cell_not_itself", rows(edit(0, (39.9, 116.4, 1))), 6),
        ("cell_moved", rows(edit(4, (40.001, 116.5, 2))), 6),
        ("empty", rows([]), 0),
    ]
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "cells.csv").write_text("cell,lat,lon\n" + "".join(f"{i},{a},{b}\n" for i, (a, b) in
                                                                    enumerate(SMALL_CELLS)), encoding="utf-8")
        section = {"cells": "cells.csv", "n_cells": 3, "alpha": 0.96, "candidates": 2, "universe": "universe.csv"}
        for name, text, n in cases:
            (root / "universe.csv").write_bytes(text.encode("utf-8"))
            try:
                with np.errstate(invalid="ignore"):          # an infinite cell id: cast, then refused as outside
                    env = Environment.read(root, section | {"n_universe": n})
                verdict = {"table": env.table.tolist(), "universe": env.universe.tolist(), "refused": None}
            except BundleError as err:
                prefix = f"{root / 'universe.csv'}: "
                assert str(err).startswith(prefix), str(err)
                verdict = {"refused": str(err)[len(prefix):]}
            out.append({"name": name, "text": text, "n_universe": n} | verdict)
    return out


def _derive(src: Path, dst: Path, privacy: dict | None, environment=None, drop_universe: bool = False) -> dict:
    """A copy of the bundle at ``src`` with the manifest's privacy plan (and cell tables) replaced; what a
    reader needs to make the same bundle from the committed one: the manifest's text and the tables' texts."""
    from pategail.sdk.bundle import load_bundle, sha256_file

    shutil.copytree(src, dst)
    manifest = json.loads((dst / "manifest.json").read_text(encoding="utf-8"))
    manifest.pop("privacy", None)
    if privacy is not None:
        manifest["privacy"] = privacy
    texts = {}
    if environment is not None:
        section = environment.write(dst)
        manifest["environment"] = section
        manifest["policy"]["config"]["n_cells"] = len(environment.cells)
        for key in ("cells", "universe"):
            name = section[key]
            manifest["files"][name] = {"sha256": sha256_file(dst / name), "bytes": (dst / name).stat().st_size}
            texts[name] = (dst / name).read_text(encoding="utf-8")
    if drop_universe:
        env = manifest["environment"]
        del manifest["files"][env.pop("universe")], env["n_universe"]
        (dst / "universe.csv").unlink()
        texts["cells.csv"] = (dst / "cells.csv").read_text(encoding="utf-8")
    text = json.dumps(manifest, indent=2) + "\n"
    (dst / "manifest.json").write_text(text, encoding="utf-8")
    return {"manifest": text, "files": texts, "sha256": load_bundle(dst).sha256}


def _refusal(err: Exception, bundle_dir: Path) -> str:
    """The line of a bundle refusal without the path of the bundle it names."""
    prefix = f"{bundle_dir}: "
    assert str(err).startswith(prefix), str(err)
    return str(err)[len(prefix):]


def device_cases(bundle_dir: Path, days: np.ndarray) -> dict:
    from pategail.sdk.bundle import Environment, load_bundle
    from pategail.sdk.cell_universe import release_mapping
    from pategail.sdk.device import Device
    from pategail.sdk.errors import BundleError
    from pategail.sdk.messages import CellReleaseRequest, InitialStatesRequest
    from pategail.sdk.secagg.policy import DeclaredPlan

    env = load_bundle(bundle_dir).environment
    released = np.arange(0, len(env.cells), EVERY)
    mapping = release_mapping(env.cells, released)
    public = DeclaredPlan(20.0, 1e-5, 0.0, 0.0, 0.6, colluders=1, mechanism="gaussian", cells_noise_multiplier=1.2)
    run = replace(public, noise_multiplier=1.1, env_noise_multiplier=2.0)
    out: dict = {"released": released.tolist(), "max_cells": MAX_CELLS, "round": CELL_ROUND, "plans": {
        "public_map": public.to_manifest(), "run": run.to_manifest()}}
    cell_request = CellReleaseRequest(CELL_ROUND, MAX_CELLS).to_bytes()
    out["request"] = hx(cell_request)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        table = Environment(cells=env.cells[released], alpha=env.alpha, candidates=env.candidates,
                            universe=env.cells, table=mapping)
        bundles = {"public_map": _derive(bundle_dir, tmp / "public_map", public.to_manifest()),
                   "tight": _derive(bundle_dir, tmp / "tight", replace(public, target_epsilon=1.0).to_manifest()),
                   "released": _derive(bundle_dir, tmp / "released", run.to_manifest(), table)}
        bundles["released_without_map"] = _derive(tmp / "released", tmp / "released_without_map",
                                                  run.to_manifest(), drop_universe=True)
        out["bundles"] = bundles

        def device(name: str, bundle: str, with_days=days) -> Device:
            d = Device(tmp / "devices" / name, 1, rng=np.random.default_rng(0))
            d.install_bundle(tmp / bundle)
            d.add_days(with_days)
            return d

        answers = {}
        d = device("release", "public_map")
        answers["release"] = {"reply": hx(d.handle(cell_request)), "ones": np.flatnonzero(d.pending).tolist()}
        # under the public map's plan nothing but the cell release is planned: the environment request is refused
        answers["environment_under_public_map"] = {"reply": hx(d.handle(InitialStatesRequest(4).to_bytes()))}
        plain = Device(tmp / "devices" / "plain", 1, rng=np.random.default_rng(0))
        plain.install_bundle(bundle_dir)
        plain.add_days(days)
        answers["no_plan"] = {"reply": hx(plain.handle(cell_request))}
        answers["past_budget"] = {"reply": hx(device("tight", "tight").handle(cell_request))}
        d = device("moved", "public_map")
        d.install_bundle(tmp / "released")
        answers["on_released_table"] = {"reply": hx(d.handle(cell_request))}
        moved = d.days()
        ack = d.handle(InitialStatesRequest(4).to_bytes())
        contribution = d.pending
        out["moved"] = {"days": moved.tolist(), "home": int(d.home), "environment_ack": hx(ack),
                        "environment_length": len(contribution),
                        "environment_nonzero": {str(i): float(contribution[i]) for i in np.flatnonzero(contribution)},
                        "positive_column_sums": d.positive_pairs().astype(np.float64).sum(axis=0).tolist()}
        assert (moved != days).any() and np.array_equal(moved, mapping[days])
        out["answers"] = answers
        refusals = {}
        try:
            d.install_bundle(tmp / "released_without_map")
        except BundleError as err:
            refusals["table_without_its_map"] = _refusal(err, tmp / "released_without_map")
        other = device("other_map", "released_without_map", with_days=mapping[days])
        try:
            other.install_bundle(tmp / "released")
        except BundleError as err:
            refusals["released_from_another_map"] = _refusal(err, tmp / "released")
        assert len(refusals) == 2, refusals
        out["install_refused"] = refusals
    return out


def cells_vectors(bundle_dir: Path, days: np.ndarray, n_cells: int) -> dict:
    return {"visited": visited_cases(days, n_cells), "universe": {"cells": SMALL_CELLS, "cases": universe_cases()},
            "device": device_cases(bundle_dir, days)}
