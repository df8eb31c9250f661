"""Rebuild data/default/, the embedded default data set, from the paper's preprocessed
GeoLife folder (``SRC``: pategail-geolife in the data folder beside the checkout).

The piece: the cell table (all 4,210 cells), the training days of users 0-9 (in the source's own per-user
file and in real.data, which must agree), and 400 of the 2,350 held-out days drawn without replacement with
numpy's default_rng(2023) (test.data has no user ids, so the held-out days are a sample of all users).
Run: .venv/bin/python scripts/make_default_data.py
"""
from pathlib import Path
import shutil

import numpy as np

SRC = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pategail-geolife"
OUT = Path(__file__).resolve().parents[1] / "data" / "default"
USERS = range(10)
N_TEST = 400

per_user = np.load(SRC / "real_data.npy", allow_pickle=True).item()   # the source we trust, read once here
piece = {u: per_user[u] for u in USERS}
test = np.loadtxt(SRC / "test.data", dtype=np.int64)
pick = np.sort(np.random.default_rng(2023).choice(len(test), N_TEST, replace=False))
OUT.mkdir(parents=True, exist_ok=True)
shutil.copy(SRC / "gps", OUT / "gps")
shutil.copy(SRC / "LICENSE", OUT / "LICENSE")
np.save(OUT / "real_data.npy", np.array(piece, dtype=object), allow_pickle=True)
np.savetxt(OUT / "real.data", np.concatenate([piece[u] for u in USERS]), fmt="%d")
np.savetxt(OUT / "test.data", test[pick], fmt="%d")
print(f"{sum(len(v) for v in piece.values())} training days of {len(piece)} users, {N_TEST} test days -> {OUT}")
