"""The ``pategail data`` command: ``pategail data prepare --format F --input PATH --out DIR [options]``."""
from __future__ import annotations

import argparse

from pategail.data.gridding import MINUTES_PER_DAY
from pategail.data.prepare import DEFAULT_MIN_OBSERVED_SLOTS, FORMATS, prepare_dataset


def _bbox(text: str) -> tuple[float, float, float, float]:
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise argparse.ArgumentTypeError(f"expected MIN_LAT,MIN_LON,MAX_LAT,MAX_LON (four numbers), got {text!r}")
    return values


def register(subparsers) -> None:
    """Add ``data`` (with its ``prepare`` subcommand) to the top-level command's subparsers."""
    data = subparsers.add_parser("data", help="prepare data sets", description="Prepare data sets.")
    sub = data.add_subparsers(dest="data_command", metavar="COMMAND", required=True)
    p = sub.add_parser(
        "prepare", help="turn raw mobility data into a data set directory",
        description="Turn raw mobility data into a data set directory (cells, training days per user, "
                    "test days). Nothing is written unless the whole input is valid.")
    p.add_argument("--format", required=True, choices=FORMATS,
                   help="pategail: the paper's preprocessed folder; gps-csv: a CSV (optionally gzipped) of fixes "
                        "user_id|uid,timestamp|ts,lat,lon (unix seconds UTC or ISO 8601; extra columns ignored); "
                        "geolife-plt: the GeoLife folder Data/NNN/Trajectory/*.plt")
    p.add_argument("--input", required=True, metavar="PATH", help="the file or folder to read")
    p.add_argument("--out", required=True, metavar="DIR", help="the data set directory to write (replaced if it "
                   "holds a data set)")
    p.add_argument("--allow-pickle", action="store_true",
                   help="pategail: read the per-user pickle real_data.npy (with a restricted unpickler that only "
                        "builds numpy arrays); only for files you trust")
    p.add_argument("--utc-offset", type=float, default=0.0, metavar="HOURS",
                   help="hours added to UTC before days are cut into slots, e.g. 8 for Beijing (default 0)")
    p.add_argument("--cell-deg", type=float, default=0.01, metavar="DEG",
                   help="side of a grid cell in degrees (default 0.01, the paper's grid)")
    p.add_argument("--slot-minutes", type=int, default=MINUTES_PER_DAY // 48, metavar="MIN",
                   help="slot length; data sets hold 48 slots a day, so only 30 is accepted (default 30)")
    p.add_argument("--min-observed-slots", type=int, default=DEFAULT_MIN_OBSERVED_SLOTS, metavar="N",
                   help=f"drop days with fewer slots holding a fix (default {DEFAULT_MIN_OBSERVED_SLOTS}: keeps "
                        f"about half of GeoLife's user-days, most users; the rest are gap-filled)")
    p.add_argument("--bbox", type=_bbox, default=None, metavar="MIN_LAT,MIN_LON,MAX_LAT,MAX_LON",
                   help="drop fixes outside this box (default: keep all)")
    p.add_argument("--public-cells", action="store_true",
                   help="make the cell table every square of --bbox at --cell-deg, visited or not (pategail data is "
                        "re-mapped onto it): a public map, which private runs (--epsilon) require; without it the "
                        "table is the squares the data visits, which reveals where someone went")
    p.add_argument("--test-fraction", type=float, default=0.2, metavar="F",
                   help="gps-csv, geolife-plt: each user's last round(F x days) days are test days, at most "
                        "all but one (default 0.2); pategail keeps the folder's own test days")
    p.add_argument("--holdout-users", type=float, default=0.0, metavar="FRACTION",
                   help="keep round(FRACTION x users) whole users out of training (their days go to "
                        "holdout_days.npy): the non-members of the membership attacks (default 0)")
    p.add_argument("--holdout-seed", type=int, default=0, metavar="S",
                   help="seed of the draw of held-out users (default 0)")
    p.add_argument("--max-fixes-per-day", type=int, default=None, metavar="N",
                   help="gps-csv, geolife-plt: keep at most N fixes of each user-day, drawn at random (--thin-seed), "
                        "before gridding: a sparse, check-in-like variant of a dense GPS data set (days then visit "
                        "at most N cells; pair it with --min-observed-slots <= N)")
    p.add_argument("--thin-seed", type=int, default=0, metavar="S",
                   help="seed of the --max-fixes-per-day draw (default 0)")
    p.set_defaults(func=run_prepare)


def run_prepare(args: argparse.Namespace) -> int:
    """Prepare the data set and print the summary; DataError propagates to the top-level handler."""
    summary = prepare_dataset(args.format, args.input, args.out, allow_pickle=args.allow_pickle,
                              utc_offset=args.utc_offset, cell_deg=args.cell_deg, slot_minutes=args.slot_minutes,
                              min_observed_slots=args.min_observed_slots, bbox=args.bbox,
                              test_fraction=args.test_fraction, holdout_fraction=args.holdout_users,
                              holdout_seed=args.holdout_seed, max_fixes_per_day=args.max_fixes_per_day,
                              thin_seed=args.thin_seed, public_cells=args.public_cells)
    print(summary)
    return 0
