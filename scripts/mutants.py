"""The mutation check of the safety-critical modules (``make mutants``; docs/testing.md).

Each mutant of ``scripts/mutant_list.py`` is applied, alone, to a COPY of the tree (``git
archive`` of a revision, HEAD by default, unpacked under /tmp — never the checkout itself,
which others edit live), the tests it names are run against that copy, and the file is put
back. A mutant is caught when its tests fail. The tests are first run once unmutated: a
mutant "caught" by tests that fail anyway proves nothing. Prints each outcome, the
survivors, and the caught share; exits 1 below the floor (90 %), 2 when the catalogue no
longer matches the code (a mutant's text is not found exactly once) or the unmutated tests
fail.

    python scripts/mutants.py                  # every mutant
    python scripts/mutants.py --only rbac-api-groups steps-timeout-stops-the-shell
    python scripts/mutants.py --list
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from mutant_list import MUTANTS, Mutant  # noqa: E402 - a script beside its data

FLOOR = 0.90
TEST_TIMEOUT_S = 900
#: pytest's exit codes: 1 tests failed, 2 interrupted (a collection error counts: the
#: mutant broke an import the tests need); 4 and 5 are a catalogue mistake (bad path).
CAUGHT_CODES = (1, 2)


def copy_tree(rev: str, into: Path) -> None:
    """The files of ``rev`` under ``into``, and the compiled read path built in the checkout."""
    archive = subprocess.Popen(["git", "-C", str(ROOT), "archive", rev], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"git archive {rev} failed")
    for built in (ROOT / "src/testbed/clients").glob("_readpath*.so"):
        shutil.copy2(built, into / "src/testbed/clients" / built.name)


def environment(tree: Path) -> dict[str, str]:
    """The copy's sources first on the path (before the checkout's editable install)."""
    return {
        **os.environ,
        # testbed, kubemu (the emulator) and kubefacts of the copy, not the editable installs
        "PYTHONPATH": os.pathsep.join(
            [str(tree / d) for d in ("src", "emulator/src", "kubefacts/src", ".")]
        ),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def check_imports_the_copy(tree: Path) -> None:
    names = ("testbed", "tests", "kubemu", "kubefacts")
    code = f"import {', '.join(names)}; print({', '.join(n + '.__file__' for n in names)})"
    probe = [sys.executable, "-c", code]
    out = subprocess.run(
        probe, cwd=tree, env=environment(tree), capture_output=True, text=True, check=True
    ).stdout
    if any(not Path(p).resolve().is_relative_to(tree.resolve()) for p in out.split()):
        raise SystemExit(f"the copy's tests would import the checkout's code: {out.strip()}")


def run_tests(tree: Path, tests: tuple[str, ...]) -> tuple[int, float, str]:
    """pytest's exit code (-1 on timeout), the seconds it took, its last lines."""
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    began = time.monotonic()
    try:
        done = subprocess.run(
            command, cwd=tree, env=environment(tree), capture_output=True, text=True,
            timeout=TEST_TIMEOUT_S, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, time.monotonic() - began, f"no answer in {TEST_TIMEOUT_S} s"
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    return done.returncode, time.monotonic() - began, tail


def stale(tree: Path, mutants: list[Mutant]) -> list[str]:
    """The mutants whose text is not found exactly once in the copy's file."""
    out = []
    for mutant in mutants:
        path = tree / mutant.file
        count = path.read_text().count(mutant.old) if path.is_file() else 0
        if count != 1:
            out.append(f"{mutant.name}: its text is found {count} times in {mutant.file}")
    return out


def try_mutant(tree: Path, mutant: Mutant) -> tuple[str, float, str]:
    """Apply ``mutant``, run its tests, restore the file: (outcome, seconds, tail)."""
    path = tree / mutant.file
    original = path.read_text()
    path.write_text(original.replace(mutant.old, mutant.new, 1))
    try:
        code, seconds, tail = run_tests(tree, mutant.tests)
    finally:
        path.write_text(original)
    if code == -1:
        return "caught (timeout)", seconds, tail
    if code in CAUGHT_CODES:
        return "caught", seconds, tail
    if code == 0:
        return "SURVIVED", seconds, tail
    return f"error (pytest exit {code})", seconds, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these mutants only")
    parser.add_argument("--rev", default="HEAD", help="the revision to copy (default HEAD)")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    unknown = set(args.only or ()) - {m.name for m in MUTANTS}
    if unknown:
        parser.error(f"no mutant named {', '.join(sorted(unknown))} (see --list)")
    if args.list:
        for mutant in MUTANTS:
            print(f"{mutant.name:34} {mutant.file}: {mutant.breaks}")
        return 0
    with tempfile.TemporaryDirectory(prefix="testbed-mutants-") as tmp:
        tree = Path(tmp)
        copy_tree(args.rev, tree)
        check_imports_the_copy(tree)
        return _check(tree, chosen, args.rev)


def _check(tree: Path, chosen: list[Mutant], rev: str) -> int:
    broken = stale(tree, chosen)
    if broken:
        print("the catalogue no longer matches the code (scripts/mutant_list.py):")
        print("\n".join(f"  {line}" for line in broken))
        return 2
    every_test = tuple(dict.fromkeys(t for m in chosen for t in m.tests))
    code, seconds, tail = run_tests(tree, every_test)
    print(f"unmutated {rev}: pytest exit {code} in {seconds:.0f} s")
    if code != 0:
        print(f"the tests fail without any mutant; fix them first:\n{tail}")
        return 2
    outcomes: dict[str, str] = {}
    for mutant in chosen:
        outcome, seconds, tail = try_mutant(tree, mutant)
        outcomes[mutant.name] = outcome
        print(f"{outcome:18} {seconds:5.0f} s  {mutant.name}: {mutant.breaks}", flush=True)
        if outcome.startswith("error"):
            print(f"    {tail}")
    return _summary(chosen, outcomes)


def _summary(chosen: list[Mutant], outcomes: dict[str, str]) -> int:
    caught = sum(o.startswith("caught") for o in outcomes.values())
    survivors = [m for m in chosen if outcomes[m.name] == "SURVIVED"]
    errors = [m for m in chosen if outcomes[m.name].startswith("error")]
    share = caught / len(chosen)
    print(f"\ncaught {caught} of {len(chosen)} mutants: {share:.1%} (floor {FLOOR:.0%})")
    for mutant in survivors:
        print(f"  survived: {mutant.name} ({mutant.file}) — {mutant.breaks}; tests {mutant.tests}")
    for mutant in errors:
        print(f"  error: {mutant.name}: its tests could not run — check their paths")
    if errors:
        return 2
    return 0 if share >= FLOOR else 1


if __name__ == "__main__":
    raise SystemExit(main())
