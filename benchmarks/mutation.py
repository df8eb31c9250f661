"""Mutation testing of the privacy-, security- and learning-critical modules with mutmut (a benchmark).

mutmut derives a module's import name from its file path, while each distribution's code lives in its own
folder (sdk/pategail/sdk/ is pategail.sdk, server/pategail/server/ is pategail.server, and so on). So the run
happens in a staged copy laid out the way Python imports it (build/mutation/pategail/{sdk,server,...}, tests/,
data/ and a link to the development data beside the checkout), where mutmut's own machinery works unchanged: it mutates the listed
modules, records which tests reach each function (its test selection) and runs only those per mutant.

    python benchmarks/mutation.py                      # all critical modules, tests of the work tree
    python benchmarks/mutation.py --module shamir      # one module (repeatable)
    python benchmarks/mutation.py --tests-ref main     # the same code against the tests of another commit
    python benchmarks/mutation.py --report             # the per-module table of the last run

The table counts killed (including timeouts and crashes, which a test run notices) against survived
mutants; "no tests" (no test reaches the function) counts as survived.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STAGE = ROOT / "build" / "mutation"

# name -> the module's path inside the staged package (pategail/...), grouped as the report shows them (GROUPS)
MODULES = {
    "secagg.client": "pategail/sdk/secagg/client.py",
    "secagg.aggregator": "pategail/server/secagg/aggregator.py",
    "secagg.shamir": "pategail/sdk/secagg/shamir.py",
    "secagg.fixedpoint": "pategail/sdk/secagg/fixedpoint.py",
    "secagg.noise": "pategail/sdk/secagg/noise.py",
    "secagg.checksum": "pategail/sdk/secagg/checksum.py",
    "secagg.checksum_server": "pategail/server/secagg/checksum.py",
    "privacy.calibration": "pategail/server/privacy/calibration.py",
    "privacy.plan": "pategail/server/privacy/plan.py",
    "privacy.accountant": "pategail/server/privacy/accountant.py",
    "ppo": "pategail/server/ppo.py",
    "features": "pategail/sdk/features.py",
    "epr": "pategail/sdk/epr.py",
    "geo": "pategail/sdk/geo.py",
    "metrics.km": "pategail/metrics/km.py",
    "metrics.paper": "pategail/metrics/paper.py",
    "metrics.evaluate": "pategail/metrics/evaluate.py",
    # added after the modules above, so that the seeded draw of every module above stays what it was
    "privacy.gaussian": "pategail/server/privacy/gaussian.py",
    "privacy.feasibility": "pategail/server/privacy/feasibility.py",
    "privacy.sdk_accounting": "pategail/sdk/accounting.py",
    "secagg.ledger": "pategail/sdk/secagg/ledger.py",
    "secagg.round": "pategail/server/secagg/round.py",
    "contribution": "pategail/sdk/contribution.py",
    "rewards": "pategail/server/rewards.py",
    "population.ideal": "pategail/population/ideal.py",
}
GROUPS = {"secagg": "secure aggregation", "privacy": "privacy", "ppo": "PPO"}

_KILLED = {1, 3, 24, -24, 152, 255, 36, -11, -9}  # a failing, crashing or hanging test run all notice
_SURVIVED = {0, 5, 33}


def _stage_tree(tests_ref: str | None) -> None:
    """Copy the work tree into STAGE in import layout; tests from ``tests_ref`` when given."""
    if STAGE.exists():
        shutil.rmtree(STAGE)
    STAGE.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for root in ("sdk", "server", "export", "research", "cli"):
        shutil.copytree(ROOT / root / "pategail", STAGE / "pategail", ignore=ignore, dirs_exist_ok=True)
    shutil.copytree(ROOT / "data", STAGE / "data", ignore=ignore)
    if tests_ref is None:
        shutil.copytree(ROOT / "tests", STAGE / "tests", ignore=ignore)
    else:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", tests_ref, "tests"], check=True,
                                 capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(STAGE, filter="data")
    # the tests look for the development data beside the checkout (../shared); inside mutmut's copy: STAGE/shared
    shared = (ROOT.parent / "shared").resolve()
    if shared.exists():
        (STAGE / "shared").symlink_to(shared)


# The unit-level tests of these modules (the device, conformance, training and CLI tests run ONNX Runtime
# sessions and whole federations: minutes per mutant on 2 cores, so they are outside the benchmark).
SELECTION = ["tests/secagg", "tests/privacy", "tests/server", "tests/sdk", "tests/metrics", "tests/baselines"]


def _write_config(paths: list[str], selection: list[str] | None = None) -> None:
    selection = json.dumps(selection or SELECTION)
    only = ",\n    ".join(json.dumps(p) for p in paths)
    (STAGE / "pyproject.toml").write_text(f"""\
[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "-ra --strict-markers --import-mode=importlib -p no:cacheprovider"
markers = ["slow: takes more than a few seconds"]

[tool.mutmut]
source_paths = ["pategail"]
only_mutate = [
    {only},
]
pytest_add_cli_args_test_selection = {selection}
pytest_add_cli_args = ["-m", "not slow"]
also_copy = ["data"]
use_git_change_detection = false
# torch's thread pools do not survive a fork from a process that already ran the suite: fork each mutant from
# a fresh server instead; and a hung mutant is cut off at 5x (not 15x) its tests' time
process_isolation = "forkserver"
timeout_multiplier = 5.0
""")


def stage(tests_ref: str | None, selection: list[str] | None = None) -> None:
    """Stage the tree; every module is mutated (generation takes a minute) so that the seeded draw of each
    module is the same whichever modules a run then checks. ``selection``: the test paths mutmut may choose
    from (default SELECTION)."""
    _stage_tree(tests_ref)
    _write_config(list(MODULES.values()), selection)


_GENERATE = """
import os
os.makedirs("mutants", exist_ok=True)
from mutmut.__main__ import copy_also_copy_files, copy_src_dir, create_mutants
copy_src_dir()
copy_also_copy_files()
create_mutants(2)
"""


def generate() -> None:
    """mutmut's mutant generation alone (the first step of ``mutmut run``), to know the names to sample."""
    subprocess.run([sys.executable, "-c", _GENERATE], cwd=STAGE, check=True, capture_output=True)


def mutant_names(name: str) -> list[str]:
    meta = STAGE / "mutants" / (MODULES[name] + ".meta")
    return sorted(json.loads(meta.read_text())["exit_code_by_key"]) if meta.exists() else []


def sample(names: list[str], per_module: int | None, seed: int, limit: int | None = None,
           limit_prefix: str = "") -> list[str]:
    """Up to ``per_module`` mutants of each module in ``names``, drawn with a fixed seed — always over all
    MODULES in order, so a module's draw is the same whichever modules a run selects; ``limit`` keeps the
    first ``limit`` of each module's draw (a smaller random sample nested in the larger one)."""
    rng = random.Random(seed)
    chosen = []
    for name in MODULES:
        every = mutant_names(name)
        drawn = every if per_module is None or len(every) <= per_module else rng.sample(every, per_module)
        if name in names:
            chosen += drawn[:limit] if name.startswith(limit_prefix) else drawn
    return chosen


def unchecked(chosen: list[str], names: list[str]) -> list[str]:
    """The mutants of ``chosen`` without a result yet (to resume an interrupted run)."""
    done = set()
    for name in names:
        meta = STAGE / "mutants" / (MODULES[name] + ".meta")
        if meta.exists():
            codes = json.loads(meta.read_text())["exit_code_by_key"]
            done |= {k for k, code in codes.items() if code is not None}
    return [m for m in chosen if m not in done]


def run(chosen: list[str], max_children: int) -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([str(mutmut), "run", "--max-children", str(max_children), *chosen], cwd=STAGE,
                          env=env).returncode


ONLY: set[str] | None = None
"""When set (--same-as), only these mutants are counted: the ones checked in another run."""


def _codes(meta: Path) -> dict[str, int | None]:
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    return codes if ONLY is None else {k: v for k, v in codes.items() if k in ONLY}


def checked(stage: Path) -> set[str]:
    """Every mutant with a result in the run at ``stage``."""
    out = set()
    for meta in (stage / "mutants").rglob("*.py.meta"):
        out |= {k for k, v in json.loads(meta.read_text())["exit_code_by_key"].items() if v is not None}
    return out


def results(names: list[str]) -> dict[str, Counter]:
    """Per module: Counter of killed / survived / other from mutmut's .meta files."""
    out = {}
    for name in names:
        meta = STAGE / "mutants" / (MODULES[name] + ".meta")
        if not meta.exists():
            continue
        codes = _codes(meta)
        c = Counter()
        for key, code in codes.items():
            c["killed" if code in _KILLED else "survived" if code in _SURVIVED else "not run"] += 1
        out[name] = c
    return out


def survivors(names: list[str]) -> list[str]:
    found = []
    for name in names:
        meta = STAGE / "mutants" / (MODULES[name] + ".meta")
        if meta.exists():
            found += sorted(k for k, code in _codes(meta).items() if code in _SURVIVED)
    return found


EQUIVALENT = Path(__file__).with_name("mutation_equivalent.tsv")
"""Survivors judged equivalent (no test could tell them from the original), one per line: name, tab, reason."""


def equivalent() -> set[str]:
    if not EQUIVALENT.exists():
        return set()
    return {line.split("\t")[0] for line in EQUIVALENT.read_text().splitlines() if line and not line.startswith("#")}


def report(names: list[str]) -> str:
    """Markdown table: per module and group, mutants checked, killed, survived (of them judged equivalent)
    and the score = killed / (checked - equivalent)."""
    eq = equivalent()
    lost = set(survivors(names))
    rows = ["| module | mutants | killed | survived | of them equivalent | raw score | score |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    totals: dict[str, Counter] = {}
    for name, c in results(names).items():
        c["equivalent"] = sum(1 for m in lost & eq if m.startswith(_module_name(name) + "."))
        totals.setdefault(GROUPS.get(name.split(".")[0], "other"), Counter()).update(c)
        rows.append(_row(name, c))
    rows += [_row(f"**{group}**", c) for group, c in totals.items()]
    return "\n".join(rows)


def _module_name(name: str) -> str:
    return MODULES[name][:-3].replace("/", ".")


def _row(label: str, c: Counter) -> str:
    n = c["killed"] + c["survived"]
    return (f"| {label} | {n} | {c['killed']} | {c['survived']} | {c['equivalent']} | "
            f"{100 * c['killed'] / max(n, 1):.0f}% | {100 * c['killed'] / max(n - c['equivalent'], 1):.0f}% |")


# --- Direct mode: no whole-selection pass ----------------------------------------------------------------
# mutmut 3 has no option to skip its two passes over the whole test selection (the per-function test map,
# "Running stats", then the clean run of every test the chosen mutants reach); on a loaded 2-core machine they
# did not finish in 38 minutes. Its mutants need neither: the staged mutants/ tree switches to a mutant when
# MUTANT_UNDER_TEST names it. So --direct runs each chosen mutant as one pytest process over its module's own
# unit test files (TEST_MAP, fastest first, stopping at the first failure) with a time limit. Fewer tests run
# than mutmut's map would choose, so a score is a lower bound.

_SECAGG_FAST = ["tests/secagg/test_secagg_closed_forms.py", "tests/secagg/test_noise_edges.py",
                "tests/secagg/test_ledger_hand.py", "tests/secagg/test_secagg_primitives.py",
                "tests/secagg/test_secagg_client_checks.py", "tests/secagg/test_protocol_invariants.py",
                "tests/secagg/test_isolation_attacks.py", "tests/secagg/test_secagg_boundaries.py",
                "tests/secagg/test_survivor_binding.py", "tests/secagg/test_round_binding.py",
                "tests/secagg/test_checksum_affine.py", "tests/secagg/test_plausibility.py",
                "tests/secagg/test_secagg_adversary.py", "tests/secagg/test_gaussian_mechanism.py",
                "tests/secagg/test_device_policy.py", "tests/secagg/test_device_ledger.py",
                "tests/secagg/test_secagg_statistics.py", "tests/secagg/test_round_stats.py",
                "tests/secagg/test_secagg_round.py"]
_PRIVACY = ["tests/privacy/test_feasibility_hand.py", "tests/privacy/test_plan_hand.py",
            "tests/privacy/test_accountant_hand.py", "tests/privacy/test_privacy_calibration.py",
            "tests/privacy/test_privacy_plan.py", "tests/privacy/test_gaussian_accounting.py",
            "tests/privacy/test_privacy_accountant.py", "tests/privacy/test_privacy_unequal_scales.py"]
_PLAN_CLI = ["tests/cli/test_privacy_plan_cli.py"]


def _first(path: str, files: list[str]) -> list[str]:
    return [path] + [f for f in files if f != path]


TEST_MAP = {
    "secagg.client": _first("tests/secagg/test_secagg_client_checks.py", _SECAGG_FAST),
    "secagg.aggregator": _first("tests/secagg/test_secagg_client_checks.py", _SECAGG_FAST),
    "secagg.shamir": ["tests/secagg/test_secagg_closed_forms.py", "tests/secagg/test_secagg_primitives.py",
                      "tests/secagg/test_secagg_boundaries.py", "tests/secagg/test_secagg_round.py"],
    "secagg.fixedpoint": _SECAGG_FAST,
    "secagg.noise": _SECAGG_FAST + ["tests/population/test_population_noise.py"],
    "secagg.checksum": _SECAGG_FAST,
    "secagg.checksum_server": _SECAGG_FAST,
    "secagg.ledger": ["tests/secagg/test_ledger_hand.py", "tests/secagg/test_device_ledger.py",
                      "tests/secagg/test_gaussian_mechanism.py", "tests/secagg/test_device_budget.py",
                      "tests/privacy/test_gaussian_accounting.py"],
    "secagg.round": _first("tests/secagg/test_secagg_boundaries.py", _SECAGG_FAST),
    "privacy.calibration": _PRIVACY + ["tests/server/test_rewards_hand.py", "tests/server/test_rewards.py"],
    "privacy.plan": _first("tests/privacy/test_plan_hand.py", _PRIVACY + _PLAN_CLI),
    "privacy.accountant": _first("tests/privacy/test_accountant_hand.py", _PRIVACY),
    "privacy.gaussian": _first("tests/privacy/test_gaussian_accounting.py", _PRIVACY + _PLAN_CLI),
    "privacy.feasibility": _PRIVACY + _PLAN_CLI,
    "privacy.sdk_accounting": _first("tests/privacy/test_gaussian_accounting.py", _PRIVACY + [
        "tests/secagg/test_device_ledger.py", "tests/secagg/test_gaussian_mechanism.py"]),
    "ppo": ["tests/server/test_ppo_hand.py", "tests/server/test_ppo.py"],
    "features": ["tests/sdk/test_features_hand.py", "tests/sdk/test_epr_hand.py", "tests/sdk/test_epr.py",
                 "tests/sdk/test_places.py"],
    "epr": ["tests/sdk/test_epr_hand.py", "tests/sdk/test_epr.py", "tests/sdk/test_places.py"],
    "geo": ["tests/sdk/test_features_hand.py", "tests/sdk/test_epr_hand.py", "tests/sdk/test_epr.py"],
    "metrics.km": ["tests/metrics/test_km.py", "tests/metrics/test_evaluate.py", "tests/metrics/test_spatial.py"],
    "metrics.paper": ["tests/metrics/test_paper.py", "tests/metrics/test_evaluate.py"],
    "metrics.evaluate": ["tests/metrics/test_evaluate.py", "tests/metrics/test_km.py", "tests/metrics/test_paper.py"],
    "contribution": ["tests/sdk/test_contribution_hand.py", "tests/sdk/test_contribution.py",
                     "tests/server/test_initial_states.py", "tests/server/test_rewards.py",
                     "tests/secagg/test_gaussian_mechanism.py"],
    "rewards": ["tests/server/test_rewards_hand.py", "tests/server/test_rewards.py"],
    "population.ideal": ["tests/population/test_ideal_noise.py", "tests/population/test_population_noise.py"],
}
"""Per module, its unit test files; the first one (the module's own, fast) runs alone first, the rest only
when it passes — most mutants are killed by the first file, and one file is collected in ~1 s."""
DIRECT_RESULTS = "direct-results.jsonl"
"""One JSON line per checked mutant in the stage: name, module, status, exit code, seconds (appended as each
finishes, so an interrupted run resumes where it stopped)."""


def _pytest(files: list[str], mutant: str, timeout: float, nice: int) -> tuple[str, int | None, float]:
    """(status, exit code, seconds) of the module's tests with ``mutant`` switched on, in the mutants/ tree."""
    import time
    env = dict(os.environ, MUTANT_UNDER_TEST=mutant, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = ["nice", "-n", str(nice), sys.executable, "-m", "pytest", "-x", "-q", "-m", "not slow",
           "-p", "no:cacheprovider", "-p", "no:randomly", *files]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=STAGE / "mutants", env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    _RUNNING.add(proc)
    try:
        code = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)  # the whole process group: pytest and anything it started
        proc.wait()
        return "timeout", None, time.monotonic() - start
    finally:
        _RUNNING.discard(proc)
    status = {0: "survived", 1: "killed"}.get(code, "error")
    return status, code, time.monotonic() - start


_RUNNING: set = set()
"""The test runs in flight (each in its own process group), stopped with the benchmark."""


_STOPPING: list[bool] = []


def _stop_running(*_) -> None:
    _STOPPING.append(True)  # the runs killed here are not results
    for proc in list(_RUNNING):
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
    raise SystemExit("stopped: the unfinished mutants are checked again with --resume")


def direct_results() -> dict[str, dict]:
    path = STAGE / DIRECT_RESULTS
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            out[row["mutant"]] = row
    return out


DIRECT_CLEAN = "direct-clean.json"
"""Clean-run seconds per group of test files (cached in the stage; dropped when --recheck copies the tests)."""


def _groups(name: str) -> list[tuple[str, ...]]:
    # files missing from the stage are left out: a stage made before a test file was written (a before run)
    files = [f for f in TEST_MAP[name] if (STAGE / "mutants" / f).exists()]
    return [tuple(files[:1]), tuple(files[1:])] if len(files) > 1 else [tuple(files)]


_CLEAN_LOCK = __import__("threading").Lock()


def _clean_seconds(files: tuple[str, ...], nice: int) -> float:
    """The clean run of ``files`` (must pass; cached) after the forced-failure check (MUTANT_UNDER_TEST=fail
    must fail: the tests import the staged mutants, not the installed package)."""
    path = STAGE / DIRECT_CLEAN
    key = " ".join(files)
    if _STOPPING:
        raise SystemExit("stopped")
    with _CLEAN_LOCK:
        cache = json.loads(path.read_text()) if path.exists() else {}
    if key not in cache:
        status, code, secs = _pytest(list(files), "", 1800, nice)
        if status != "survived":
            raise SystemExit(f"the clean run of {key} did not pass (exit {code})")
        forced, code, _ = _pytest(list(files), "fail", 1800, nice)
        if forced != "killed":
            raise SystemExit(f"the forced failure was not noticed by {key} (exit {code}): the tests do not run "
                             "the staged mutants")
        with _CLEAN_LOCK:
            cache = json.loads(path.read_text()) if path.exists() else {}
            cache[key] = round(secs, 1)
            path.write_text(json.dumps(cache, indent=1))
    return cache[key]


def run_direct(chosen: list[str], jobs: int, timeout: float | None, nice: int) -> None:
    """Check each of ``chosen`` not yet in DIRECT_RESULTS: its module's first test file, then (when that
    passes) the others; each group's limit is ``timeout`` or 4x its clean run + 30 s."""
    import signal
    import threading
    from concurrent.futures import ThreadPoolExecutor
    signal.signal(signal.SIGTERM, _stop_running)
    signal.signal(signal.SIGINT, _stop_running)
    done = direct_results()
    todo = [m for m in chosen if m not in done]
    by_module = {name: [m for m in todo if m.startswith(_module_name(name) + ".")] for name in MODULES}
    limits: dict[str, list[float]] = {}
    module_locks = {name: threading.Lock() for name in MODULES}

    def limits_of(name: str) -> list[float]:
        # the module's clean runs, when its first mutant comes up (overlapping other modules' mutants)
        with module_locks[name]:
            if name not in limits:
                limits[name] = [timeout or 4 * _clean_seconds(g, nice) + 30 for g in _groups(name)]
                print(f"{name}: {len(by_module[name])} mutants; limits "
                      f"{', '.join(f'{t:.0f}' for t in limits[name])} s", flush=True)
            return limits[name]

    lock = threading.Lock()
    total = sum(len(v) for v in by_module.values())
    count = [0]

    def one(name: str, mutant: str) -> None:
        if _STOPPING:
            return
        status, code, secs = "survived", 0, 0.0
        for group, limit in zip(_groups(name), limits_of(name)):
            if _STOPPING:
                return
            status, code, took = _pytest(list(group), mutant, limit, nice)
            secs += took
            if status != "survived":
                break
        if _STOPPING:
            return
        row = {"mutant": mutant, "module": name, "status": status, "exit": code, "seconds": round(secs, 1)}
        with lock:
            with open(STAGE / DIRECT_RESULTS, "a") as f:
                f.write(json.dumps(row) + "\n")
            count[0] += 1
            print(f"[{count[0]}/{total}] {status:8s} {secs:6.1f} s {mutant}", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, name, m) for name, ms in by_module.items() for m in ms]
        for future in futures:
            while True:  # wake up every second: a signal's handler runs only in the main thread
                try:
                    future.result(timeout=1)
                    break
                except TimeoutError:
                    continue


def direct_report(names: list[str]) -> str:
    """The per-module table of the direct mode: a timeout or a crash counts as killed (stated per row)."""
    eq = equivalent()
    rows = ["| module | mutants | killed | of them timeout/error | survived | of them equivalent | raw score | score |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    totals: dict[str, Counter] = {}
    got = direct_results()
    for name in names:
        mine = [r for r in got.values() if r["module"] == name and (ONLY is None or r["mutant"] in ONLY)]
        if not mine:
            continue
        c = Counter()
        for r in mine:
            c["killed" if r["status"] != "survived" else "survived"] += 1
            c["slow"] += r["status"] in ("timeout", "error")
            c["equivalent"] += r["status"] == "survived" and r["mutant"] in eq
        totals.setdefault(GROUPS.get(name.split(".")[0], "other"), Counter()).update(c)
        rows.append(_direct_row(name, c))
    rows += [_direct_row(f"**{group}**", c) for group, c in totals.items()]
    return "\n".join(rows)


def _direct_row(label: str, c: Counter) -> str:
    n = c["killed"] + c["survived"]
    return (f"| {label} | {n} | {c['killed']} | {c['slow']} | {c['survived']} | {c['equivalent']} | "
            f"{100 * c['killed'] / max(n, 1):.0f}% | {100 * c['killed'] / max(n - c['equivalent'], 1):.0f}% |")


def direct_survivors(names: list[str]) -> list[str]:
    eq = equivalent()
    return sorted(r["mutant"] for r in direct_results().values()
                  if r["module"] in names and r["status"] == "survived" and r["mutant"] not in eq)


def main(argv: list[str] | None = None) -> int:
    global STAGE, ONLY
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", action="append", choices=sorted(MODULES), help="default: all of them")
    ap.add_argument("--tests-ref", help="git ref whose tests/ to run (default: the work tree's)")
    ap.add_argument("--tests", action="append", metavar="PATH",
                    help="test paths mutmut selects from (repeatable; default: " + " ".join(SELECTION) + "); "
                         "fewer paths shorten mutmut's two whole-selection passes, and the score is a lower bound")
    ap.add_argument("--max-children", type=int, default=2, help="parallel mutant runs (default 2)")
    ap.add_argument("--stage", type=Path, default=STAGE, help=f"work folder (default {STAGE.relative_to(ROOT)})")
    ap.add_argument("--sample", type=int, help="at most this many mutants per module (seeded draw)")
    ap.add_argument("--limit", type=int, help="keep the first LIMIT of each module's draw (nested sub-sample)")
    ap.add_argument("--limit-prefix", default="", help="apply --limit only to modules whose name starts so")
    ap.add_argument("--seed", type=int, default=2026, help="seed of the sample (default 2026)")
    ap.add_argument("--resume", action="store_true", help="go on with the mutants of the last run left unchecked")
    ap.add_argument("--same-as", type=Path, help="with --report/--survivors: count only the mutants checked in "
                                                    "the run at this folder (a before/after comparison)")
    ap.add_argument("--report", action="store_true", help="only print the table of the last run")
    ap.add_argument("--survivors", action="store_true", help="only list the surviving mutants of the last run")
    ap.add_argument("--diff", action="store_true", help="with --survivors: show each one's changed lines")
    ap.add_argument("--direct", action="store_true",
                    help="without mutmut's whole-selection passes: run each mutant's module tests (TEST_MAP) "
                         "directly, resumable, a lower bound (see the module's notes)")
    ap.add_argument("--jobs", type=int, default=1, help="--direct: mutants checked at once (default 1)")
    ap.add_argument("--timeout", type=float, help="--direct: seconds per mutant (default 4x the clean run + 30)")
    ap.add_argument("--nice", type=int, default=5, help="--direct: niceness of the test runs (default 5)")
    ap.add_argument("--recheck", action="store_true",
                    help="--direct: copy the work tree's tests into the stage again and re-run the survivors "
                         "not judged equivalent (after writing tests)")
    args = ap.parse_args(argv)
    STAGE = args.stage.resolve()
    if args.same_as:
        ONLY = checked(args.same_as.resolve())
    names = args.module or list(MODULES)
    if args.direct:
        return _main_direct(args, names)
    if args.survivors:
        return _print_mutants(survivors(names), args.diff)
    if not args.report:
        if args.resume:
            chosen = unchecked(sample(names, args.sample, args.seed, args.limit, args.limit_prefix), names)
        else:
            stage(args.tests_ref, args.tests)
            generate()
            chosen = sample(names, args.sample, args.seed, args.limit, args.limit_prefix)
        rc = run(chosen, args.max_children) if chosen else 0
        if rc != 0:
            print(f"mutmut exited with {rc}", file=sys.stderr)
            return rc
    print(report(names))
    return 0


def _print_mutants(mutants: list[str], diff: bool) -> int:
    """Each mutant's name and, with ``diff``, mutmut's own rendering of it (its changed lines only)."""
    mutmut = Path(sys.executable).with_name("mutmut")
    for name in mutants:
        print(f"## {name}")
        if diff:
            shown = subprocess.run([str(mutmut), "show", name], cwd=STAGE, capture_output=True, text=True)
            print("\n".join(line for line in shown.stdout.splitlines()
                            if line[:1] in "+-" and line[:3] not in ("+++", "---")))
    return 0


def _main_direct(args, names: list[str]) -> int:
    if args.survivors:
        return _print_mutants(direct_survivors(names), args.diff)
    if not args.report:
        if args.recheck:
            for target in (STAGE / "tests", STAGE / "mutants" / "tests"):
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(ROOT / "tests", target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            (STAGE / DIRECT_CLEAN).unlink(missing_ok=True)
            chosen = direct_survivors(names)
            kept = [r for r in direct_results().values() if r["mutant"] not in set(chosen)]
            (STAGE / DIRECT_RESULTS).write_text("".join(json.dumps(r) + "\n" for r in kept))
        elif args.resume:
            chosen = sample(names, args.sample, args.seed, args.limit, args.limit_prefix)
        else:
            stage(args.tests_ref, args.tests)
            generate()
            chosen = sample(names, args.sample, args.seed, args.limit, args.limit_prefix)
        run_direct(chosen, args.jobs, args.timeout, args.nice)
    print(direct_report(names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
