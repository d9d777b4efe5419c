#!/usr/bin/env python3
"""Runs the fixture generators of fixtures_lib/generators.py: all of them, the named ones, or
(--missing, what scripts/test.sh does) those whose fixtures are not there. It first checks
that README.md names every one of them and that docs/development.md has their table.

Each generator runs as its own process with this interpreter, in the listed order, and a
failing one stops the run with its exit status: later families may read what it writes.

  .venv/bin/python scripts/regenerate_fixtures.py --missing      # what test.sh runs
  .venv/bin/python scripts/regenerate_fixtures.py make_library_fixtures.py
  .venv/bin/python scripts/regenerate_fixtures.py --list         # the table in the README
"""

import argparse
import os
import subprocess
import sys
import time

from fixtures_lib.generators import GENERATORS

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(SCRIPTS)


def missing(generator):
    return not os.path.exists(os.path.join(REPO, generator.marker))


def table():
    """The generators as the Markdown table docs/development.md holds."""
    rows = ["| script | writes | size | in git | time |", "|---|---|---|---|---|"]
    rows += [f"| `scripts/{g.script}` | {g.writes} | {g.size} "
             f"| {'yes' if g.committed else 'no'} | {g.seconds} s |" for g in GENERATORS]
    return rows


def docs_out_of_date():
    """What the docs say wrongly about the generators, one line each.

    README.md names every generator (its Development section) and docs/development.md holds
    `table()`, so that what test.sh regenerates and what a reader is told are the same list.
    """
    def read(path):
        with open(os.path.join(REPO, path), encoding="utf-8") as f:
            return f.read()
    readme, development = read("README.md"), read("docs/development.md").splitlines()
    problems = [f"README.md does not name scripts/{g.script}" for g in GENERATORS
                if f"`scripts/{g.script}`" not in readme]
    if any(row not in development for row in table()):
        problems.append("docs/development.md's generator table is not the one --list prints")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="generator scripts to run (default: all)")
    ap.add_argument("--missing", action="store_true",
                    help="run only the generators whose marker file is missing")
    ap.add_argument("--list", action="store_true",
                    help="print the generators as the Markdown table of "
                         "docs/development.md and exit")
    args = ap.parse_args()
    if args.list:
        print("\n".join(table()))
        return 0
    problems = docs_out_of_date()
    if problems:
        for problem in problems:
            print(f"regenerate_fixtures: {problem}", file=sys.stderr)
        print("regenerate_fixtures: the generators are fixtures_lib/generators.py; update the "
              "docs to match (--list prints the table)", file=sys.stderr)
        return 1
    known = {g.script for g in GENERATORS}
    unknown = [n for n in args.names if os.path.basename(n) not in known]
    if unknown:
        ap.error(f"unknown generator(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    chosen = [g for g in GENERATORS
              if (not args.names or g.script in {os.path.basename(n) for n in args.names})
              and (not args.missing or missing(g))]
    for g in chosen:
        state = "missing" if missing(g) else "present"
        print(f"regenerate_fixtures: {g.script} ({g.marker} {state})", flush=True)
        t0 = time.time()
        status = subprocess.run([sys.executable, os.path.join(SCRIPTS, g.script), *g.args],
                                cwd=REPO, stdout=subprocess.DEVNULL if g.quiet else None
                                ).returncode
        if status != 0:
            print(f"regenerate_fixtures: {g.script} failed (exit {status})", file=sys.stderr)
            return status
        print(f"regenerate_fixtures: {g.script} done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
