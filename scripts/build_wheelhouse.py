#!/usr/bin/env python3
"""Build a wheelhouse: puicl's wheel and every wheel it needs, for a machine without an index.

Many GPU clusters cannot reach a package index. Run this where one can be reached, for the
cluster's Python version and platform, copy the folder over, and install from it there:

    python scripts/build_wheelhouse.py --out wheelhouse --extras train \\
        --python-version 3.12 --platform manylinux_2_28_x86_64 --exclude torch
    # on the cluster, in a venv that already has the cluster's own CUDA build of torch:
    pip install --no-index --find-links wheelhouse "puicl[train]"

What it does (docs/training.md, "Offline nodes"):

1. ``pip wheel --no-deps`` builds puicl's own wheel from a clean copy of this checkout (pure
   Python: it fits every platform);
2. the wheel's metadata gives the requirements of the core and of the chosen extras
   (``--extras``; an extra that names ``puicl[...]`` pulls in those extras too), with their
   environment markers evaluated for the *target* Python and platform, not this machine's;
3. ``pip download --only-binary=:all:`` fetches those requirements and all of theirs as wheels
   for the target (``--python-version``, ``--platform``, repeatable; a ``manylinux_2_X`` tag
   also admits wheels for an older glibc), except the packages named by ``--exclude``
   (clusters usually provide torch built for their CUDA), and with ``--require`` replacing
   a requirement (for example a torch build of one's own choice).

Only wheels are fetched, so nothing is compiled on the cluster; a requirement that has no wheel
for the target fails here, at build time, with pip's message naming it.
"""

from __future__ import annotations

import argparse
import email.parser
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # a bare venv: pip carries its own copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PROJECT = "puicl"
# what the copy of the checkout that the wheel is built from leaves out: caches anywhere, and
# the output folders at the root only (prior_gen/shards is a package, not generated shards)
NOT_SOURCE_ANYWHERE = ("*.egg-info", "__pycache__", ".*_cache")
NOT_SOURCE_AT_ROOT = (".git", ".venv", "build", "dist", "shards", "runs", "results", "wheelhouse")


def not_source(directory: str, names: list[str]) -> set[str]:
    """``shutil.copytree``'s ``ignore``: the names in ``directory`` the wheel's source lacks."""
    ignored = set(shutil.ignore_patterns(*NOT_SOURCE_ANYWHERE)(directory, names))
    if Path(directory).resolve() == ROOT:
        ignored |= {name for name in names if name in NOT_SOURCE_AT_ROOT}
    return ignored


def target_environment(python_version: str, platform: str) -> dict[str, str]:
    """The environment-marker values of the target (PEP 508), from its version and tag."""
    if not re.fullmatch(r"3\.\d+", python_version):
        raise ValueError(f"--python-version must look like 3.12, got {python_version!r}")
    if platform.startswith(("manylinux", "musllinux", "linux")):
        system, sys_platform, os_name = "Linux", "linux", "posix"
        machine = re.sub(r"^(manylinux|musllinux)(_\d+_\d+|\d+)?_|^linux_", "", platform)
    elif platform.startswith("macosx"):
        system, sys_platform, os_name = "Darwin", "darwin", "posix"
        machine = platform.split("_")[-1]
    elif platform.startswith("win"):
        system, sys_platform, os_name = "Windows", "win32", "nt"
        machine = {"win_amd64": "AMD64", "win32": "x86", "win_arm64": "ARM64"}.get(platform, "")
    else:
        raise ValueError(f"unknown platform tag {platform!r} (e.g. manylinux_2_28_x86_64)")
    return {
        "python_version": python_version,
        "python_full_version": f"{python_version}.0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "implementation_version": f"{python_version}.0",
        "platform_system": system,
        "sys_platform": sys_platform,
        "os_name": os_name,
        "platform_machine": machine,
        "platform_release": "",
        "platform_version": "",
    }


def expand_platforms(platforms: list[str]) -> list[str]:
    """Each ``manylinux_2_X_ARCH`` tag with the older glibc tags it runs (down to 2.5, and
    their legacy names manylinux2014/2010/1): pip's ``--platform`` takes tags literally, and
    many wheels are still tagged for an old glibc only."""
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    expanded: list[str] = []
    for platform in platforms:
        expanded.append(platform)
        match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
        if match:
            glibc_minor, arch = int(match.group(1)), match.group(2)
            for minor in range(glibc_minor - 1, 4, -1):
                expanded.append(f"manylinux_2_{minor}_{arch}")
            expanded += [f"{name}_{arch}" for minor, name in legacy.items() if minor <= glibc_minor]
    return list(dict.fromkeys(expanded))


def wheel_metadata(wheel: Path) -> tuple[list[Requirement], set[str]]:
    """The ``Requires-Dist`` entries and the extras (``Provides-Extra``) of a wheel."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = email.parser.Parser().parsestr(archive.read(name).decode("utf-8"))
    requirements = [Requirement(text) for text in metadata.get_all("Requires-Dist") or []]
    extras = {canonicalize_name(e) for e in metadata.get_all("Provides-Extra") or []}
    return requirements, extras


def unknown_extras(extras: list[str], known: set[str]) -> str | None:
    """The error message for extras the project does not have (None: all known)."""
    unknown = sorted({canonicalize_name(e) for e in extras} - known)
    if not unknown:
        return None
    return f"{PROJECT} has no extra {', '.join(unknown)}; its extras: {', '.join(sorted(known))}"


def select_requirements(
    requirements: list[Requirement],
    extras: list[str],
    environment: dict[str, str],
    exclude: list[str],
) -> list[str]:
    """The requirements the core and ``extras`` need on the target, without their markers
    (decided here), the project's references to its own extras followed, ``exclude`` left
    out."""
    pending = ["", *(canonicalize_name(e) for e in extras)]  # "": the core
    seen = set(pending)
    chosen: dict[str, Requirement] = {}
    while pending:
        extra = pending.pop()
        for req in requirements:
            if req.marker is not None and not req.marker.evaluate({**environment, "extra": extra}):
                continue
            if canonicalize_name(req.name) == PROJECT:  # e.g. dev = ["puicl[train,bench]"]
                new = {canonicalize_name(e) for e in req.extras} - seen
                seen |= new
                pending.extend(sorted(new))
                continue
            chosen[canonicalize_name(req.name) + str(req.specifier) + str(sorted(req.extras))] = req
    skipped = {canonicalize_name(name) for name in exclude}
    lines = set()
    for req in chosen.values():
        if canonicalize_name(req.name) not in skipped:
            extras_text = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            lines.add(f"{req.name}{extras_text}{req.specifier}")
    return sorted(lines)


def with_requirements(requirements: list[str], added: list[str]) -> list[str]:
    """``requirements`` plus ``added``, which replace those of the same name."""
    replaced = {canonicalize_name(Requirement(text).name) for text in added}
    kept = [t for t in requirements if canonicalize_name(Requirement(t).name) not in replaced]
    return sorted(kept + [str(Requirement(text)) for text in added])


def run(command: list[str]) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/build_wheelhouse.py",
        description="Download puicl's wheel and its dependencies' wheels for an offline "
        "machine; install there with: pip install --no-index --find-links OUT 'puicl[EXTRAS]'",
    )
    parser.add_argument("--out", type=Path, required=True, help="wheelhouse folder")
    parser.add_argument(
        "--extras",
        default="",
        help="comma-separated extras to include, e.g. train or train,bench (default: none)",
    )
    parser.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        help="the target's Python, e.g. 3.12 (default: this Python's)",
    )
    parser.add_argument(
        "--platform",
        action="append",
        default=None,
        help="a platform tag of the target, e.g. manylinux_2_28_x86_64 (repeatable; default: "
        "manylinux_2_28_x86_64); a manylinux_2_X tag admits the wheels of older glibc too",
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        help="a package to leave out, with what only it needs, e.g. torch (repeatable)",
    )
    parser.add_argument(
        "--require",
        action="append",
        default=[],
        help="a requirement to fetch as well, replacing the project's own of that name, e.g. "
        "'torch==2.13.0+cpu' for a CPU build that pip finds in a --find-links folder of its "
        "configuration (repeatable)",
    )
    parser.add_argument(
        "--pip",
        default=f"{sys.executable} -m pip",
        help="the pip command to run (default: this Python's pip)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    platforms = args.platform or ["manylinux_2_28_x86_64"]
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    try:
        environment = target_environment(args.python_version, platforms[0])
    except ValueError as err:
        build_parser().error(str(err))
    pip = args.pip.split()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory() as scratch:
        # from a clean copy: setuptools would package what a stale build/ holds
        source = Path(scratch) / PROJECT
        shutil.copytree(ROOT, source, ignore=not_source)
        run([*pip, "wheel", "--no-deps", "--wheel-dir", str(out), str(source)])
    wheels = sorted(out.glob(f"{PROJECT}-*.whl"), key=lambda p: p.stat().st_mtime)
    requirements, known = wheel_metadata(wheels[-1])
    unknown = unknown_extras(extras, known)
    if unknown:
        build_parser().error(unknown)
    requirements = with_requirements(
        select_requirements(requirements, extras, environment, args.exclude), args.require
    )
    target = ["--only-binary=:all:", "--python-version", args.python_version,
              "--implementation", "cp"]
    for platform in expand_platforms(platforms):
        target += ["--platform", platform]
    run([*pip, "download", *target, "--dest", str(out), *requirements])

    extra_text = f"[{','.join(extras)}]" if extras else ""
    print(f"\nwheelhouse ready: {out} ({len(list(out.glob('*.whl')))} wheels)")
    if args.exclude:
        print(f"left out: {', '.join(args.exclude)} (install them on the target first)")
    print(f"install with: pip install --no-index --find-links {out} '{PROJECT}{extra_text}'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
