"""``puicl predict``'s options for the classifier's inference settings, one per setting of
:class:`~puicl_model.passes.settings.InferenceSettings` (``--chunk-size`` for ``chunk_size``),
each with the default and limits written there; and the refusal of the fitting options that
scoring with a saved classifier (``--model``) would not use."""

from __future__ import annotations

import argparse

__all__ = ["add_setting_options", "refuse_unused_by_model"]

# what each word of a setting of choices means, ending in the docs' section
_CHOICE_HELP = {
    "portfolio": "auto: a portfolio of the model, a logistic regression and PU bagging of "
               "small random forests fitted on every row (and of short boostings where "
               "evidence is read or the table is wide), the blend chosen per table on "
               "held-out labeled positives from 600 labeled rows, on two cross-fitted folds "
               "below where the pool has more than 2,000 rows, fixed on smaller pools; none: "
               "the model alone (docs/classifier.md, \"Tables of every size\"",
    "large_pool": "shared: a pool larger than one pass is scored against one context per "
                  "member, enriched with the rows a logistic regression ranks least positive; "
                  "chunks: in random chunks, each next to its own labeled rows "
                  "(docs/classifier.md, \"Outside the trained range\"",
}


def _pool_sample_size(text: str) -> int:
    """``--pool-sample``: 0 (the whole pool) or the classifier's least sample size or more,
    said in the option's terms rather than as the classifier's ``pool_sample`` error."""
    from puicl_model.passes.settings import InferenceSettings

    least = InferenceSettings.MINIMUM["pool_sample"]
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value != 0 and value < least:
        raise argparse.ArgumentTypeError(f"expected 0 (fit the whole pool) or a whole number "
                                         f">= {least:,}, got {text!r}")
    return value


def add_setting_options(predict: argparse.ArgumentParser) -> None:
    """The options of the inference settings; every help ends with its default."""
    from puicl_model.passes.settings import InferenceSettings

    defaults = InferenceSettings()
    predict.add_argument("--n-estimators", type=int, default=defaults.n_estimators,
                         help="ensemble members, at most "
                         f"{InferenceSettings.MAXIMUM['n_estimators']} (docs/classifier.md, "
                         "\"Ensembles\"; default: 1 for numeric tables, 2 for tables with "
                         "categorical columns)")
    predict.add_argument("--single-pass-limit", type=int, default=defaults.single_pass_limit,
                         help="pools up to this many rows are scored in one pass (default: "
                         f"{defaults.single_pass_limit})")
    predict.add_argument("--chunk-size", type=int, default=defaults.chunk_size,
                         help="pool rows of a larger pool's shared context, or of each chunk "
                         f"(default: {defaults.chunk_size})")
    predict.add_argument("--max-labeled", type=int, default=defaults.max_labeled,
                         help="most labeled positives in one pass; more are subsampled "
                         f"(default: {defaults.max_labeled})")
    predict.add_argument("--pool-sample", type=_pool_sample_size, default=defaults.pool_sample,
                         help="a pool of more unlabeled rows is fitted on a seeded sample of "
                         "this many; every row is still scored (0: the whole pool; "
                         f"docs/classifier.md, \"Large tables\"; default: "
                         f"{defaults.pool_sample})")
    for name, words in InferenceSettings.CHOICES.items():  # the settings of a few words
        former = InferenceSettings.STORED_NAMES.get(name)  # (still taken: scripts name it)
        predict.add_argument(f"--{name.replace('_', '-')}",
                             *([f"--{former.replace('_', '-')}"] if former else []),
                             choices=words, default=getattr(defaults, name),
                             help=f"{_CHOICE_HELP[name]}; default: {getattr(defaults, name)})"
                             + (f"; --{former} is its former name" if former else ""))


# what a fit reads or writes, which scoring with a saved classifier would leave unused
_FITTING_OPTIONS = ("label_column", "weights", "n_estimators", "single_pass_limit",
                    "chunk_size", "max_labeled", "pool_sample", "portfolio", "large_pool",
                    "categorical", "numeric", "keep_columns", "random_state", "prior_json",
                    "report", "save_model", "no_training_data", "scheduler")


def refuse_unused_by_model(args: argparse.Namespace, defaults: argparse.Namespace) -> None:
    """``--model`` with an option it would not use (one not at its default, ``defaults``),
    refused in one line rather than ignored (``--threshold`` is used: it sets the loaded
    classifier's cut)."""
    from puicl_model.files.cli_paths import CliError

    if args.input is None or args.positives is not None or args.unlabeled is not None:
        raise CliError("--model scores the rows of --input; give --input and neither "
                       "--positives nor --unlabeled")
    given = [f"--{name.replace('_', '-')}" for name in _FITTING_OPTIONS
             if getattr(args, name) != getattr(defaults, name)]
    if given:
        raise CliError(f"--model takes no {', '.join(given)}: it scores with the classifier "
                       "as it was fitted and saved, which these options would not change "
                       "(--threshold sets its cut)")
