"""Write the part of a real-table corpus (``prior.real_tables``) whose tables come from given
R packages, or from every package but those.

A corpus built by ``scripts/build_real_corpus.py`` names each table ``package::item``. Which of
its tables carry what a model learns from them is asked by training on parts of it
(docs/recipe.md, "Prior v2"); building the part from the whole corpus, not from the packages
again, keeps every kept entry's bytes and its order, so a part differs from the whole only by
the tables it leaves out.

    python scripts/subset_real_corpus.py data/real_corpus.npz SHA256 --packages AER,Ecdat \\
        --out data/real_corpus_econ.npz
    python scripts/subset_real_corpus.py data/real_corpus.npz SHA256 --packages AER,Ecdat \\
        --invert --out data/real_corpus_other.npz
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from prior_gen.mechanisms.real_tables import RealCorpus, load_corpus, write_corpus


def package_of(table: str) -> str:
    """The R package of a corpus table's name ``package::item``."""
    return table.split("::", 1)[0]


Entries = list[tuple[np.ndarray, np.ndarray]]


def subset(corpus: RealCorpus, packages: set[str],
           invert: bool) -> tuple[Entries, list[int], list[dict[str, Any]]]:
    """The entries, their tables' indices and the tables' names of the kept tables, in the
    corpus's order."""
    known = {package_of(name["table"]) for name in corpus.names}
    unknown = sorted(packages - known)
    if unknown:
        raise ValueError(f"--packages: the corpus has no table of {', '.join(unknown)}")
    entries: Entries = []
    tables: list[int] = []
    names: list[dict[str, Any]] = []
    for table, name in enumerate(corpus.names):
        if (package_of(name["table"]) in packages) == invert:
            continue
        for entry in corpus.entries_of_table[table]:
            entries.append((corpus.x[entry], corpus.y[entry]))
            tables.append(len(names))
        names.append(name)
    if not names:
        raise ValueError("--packages: no table is left")
    return entries, tables, names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="a corpus build_real_corpus.py wrote")
    parser.add_argument("sha256", help="the corpus's SHA-256 (as the config names it)")
    parser.add_argument("--packages", required=True,
                        help="comma-separated R packages whose tables are kept")
    parser.add_argument("--invert", action="store_true",
                        help="keep the tables of every other package instead")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    packages = {p.strip() for p in args.packages.split(",") if p.strip()}
    if not packages:
        parser.error("--packages: name at least one package")
    if args.out.resolve() == args.corpus.resolve():
        parser.error("--out: the part cannot replace the corpus it is cut from")
    try:
        entries, tables, names = subset(load_corpus(args.corpus, args.sha256), packages,
                                        args.invert)
    except (ValueError, FileNotFoundError) as err:
        parser.error(str(err))
    digest = write_corpus(args.out, entries, tables, names)
    print(f"{len(names)} tables, {len(entries)} entries -> {args.out}\nsha256 {digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
