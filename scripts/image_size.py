#!/usr/bin/env python
"""Installed size of what the Airflow image's requirements pull in, before and after the split.

    .venv/bin/python scripts/image_size.py [--before-rev REV] [--top N]

"after" is requirements.txt (what Astro's ONBUILD step and the compose image install). "before"
is the Airflow requirements as they were when one file held everything: requirements.txt plus
requirements-model.txt plus requirements-dev.txt, or requirements.txt as it is at git revision
``--before-rev``. Each set is resolved to its distributions through the installed packages'
own metadata (``Requires-Dist``, markers and extras evaluated for this interpreter), and each
distribution's size is the sum of the sizes its RECORD file lists (what pip installed; files
compiled later, e.g. ``__pycache__``, are not counted). Prints sizes only; exit 1 if a
requirement is not installed in this environment (run ``make venv``).
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import subprocess
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
AFTER = ("requirements.txt",)
BEFORE = ("requirements.txt", "requirements-model.txt", "requirements-dev.txt")


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_requirements(text: str) -> list[Requirement]:
    out = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            out.append(Requirement(line))
    return out


def installed() -> dict[str, md.Distribution]:
    dists: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        dists.setdefault(norm(dist.metadata["Name"]), dist)
    return dists


def closure(roots: list[Requirement], dists: dict[str, md.Distribution]) -> set[str]:
    """Names of every distribution ``roots`` resolve to (with the extras they ask for)."""
    env = default_environment()
    seen: set[tuple[str, str]] = set()
    names: set[str] = set()
    todo = [(norm(r.name), sorted(r.extras)) for r in roots if r.marker is None or r.marker.evaluate(env)]
    while todo:
        name, extras = todo.pop()
        key = (name, ",".join(extras))
        if key in seen:
            continue
        seen.add(key)
        if name not in dists:
            raise SystemExit(f"image_size: {name} is not installed in {sys.prefix} (run `make venv`)")
        names.add(name)
        for spec in dists[name].requires or []:
            req = Requirement(spec)
            wanted = [""] + extras
            if req.marker is not None and not any(req.marker.evaluate({**env, "extra": e}) for e in wanted):
                continue
            todo.append((norm(req.name), sorted(req.extras)))
    return names


def installed_size(dist: md.Distribution) -> int:
    """Bytes of the files the distribution's RECORD lists (sizes as recorded, else on disk)."""
    total = 0
    for path in dist.files or []:
        if path.size is not None:
            total += path.size
        else:
            try:
                total += Path(dist.locate_file(path)).stat().st_size
            except OSError:
                pass
    return total


def mb(n: int) -> str:
    return f"{n / 1e6:,.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before-rev", help="git revision whose requirements.txt is the 'before' set")
    parser.add_argument("--top", type=int, default=8, help="largest packages listed for the difference")
    args = parser.parse_args(argv)

    dists = installed()
    after_reqs = [r for f in AFTER for r in read_requirements((REPO / f).read_text())]
    if args.before_rev:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{args.before_rev}:requirements.txt"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        before_reqs, before_label = read_requirements(text), f"requirements.txt at {args.before_rev}"
    else:
        before_reqs = [r for f in BEFORE for r in read_requirements((REPO / f).read_text())]
        before_label = " + ".join(BEFORE)
    before, after = closure(before_reqs, dists), closure(after_reqs, dists)
    sizes = {name: installed_size(dists[name]) for name in before | after}
    total_before, total_after = sum(sizes[n] for n in before), sum(sizes[n] for n in after)

    print(f"before: {mb(total_before):>12}  {len(before):4d} packages  ({before_label})")
    print(f"after:  {mb(total_after):>12}  {len(after):4d} packages  ({' + '.join(AFTER)})")
    dropped = sorted(before - after, key=lambda n: -sizes[n])
    for name in dropped[: args.top]:
        print(f"  - {name:<34} {mb(sizes[name]):>12}")
    if len(dropped) > args.top:
        rest = sum(sizes[n] for n in dropped[args.top :])
        print(f"  - {len(dropped) - args.top} more packages{'':<19} {mb(rest):>12}")
    if after - before:
        print(f"  + {', '.join(sorted(after - before))}")
    if not args.before_rev:  # what each file moved out of the image adds on top of requirements.txt
        for name in BEFORE[len(AFTER) :]:
            extra = closure(after_reqs + read_requirements((REPO / name).read_text()), dists) - after
            print(f"  {name} alone adds {mb(sum(sizes[n] for n in extra))} ({len(extra)} packages)")
    print(f"smaller by: {mb(total_before - total_after)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
