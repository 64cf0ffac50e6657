"""``PUICLClassifier``: in-context PU classification with scikit-learn conventions.

``fit(X, s)`` (``s = 1`` labeled positive, ``0`` unlabeled) trains no parameter: it encodes the
table (:mod:`~.preprocessing`), plans the pretrained model's forward passes over it (paper §5,
"Inference"; :mod:`puicl_model.passes.planning`), scores the pool, runs the portfolio of learners
beside the model and chooses its blend (:mod:`~.portfolio`), all into one fitted object,
``fitted_`` (:mod:`~.fitted_table`), that predictions only read:

* ``predict_proba(X)``: ``[P(y=0), P(y=1)]`` per row. A row equal to a fitted unlabeled row gets
  its transductive score; any other row is a *new row*, scored as one more unlabeled row next to
  the fitted pool (:mod:`puicl_model.passes.query_rows`), the same bytes in any batch. A pool of
  more than ``pool_sample`` rows is fitted on a seeded sample (:mod:`~.pool_sample`).
* ``predict(X)``: P(y=1) cut at 0.5, or with ``threshold="prior"`` so that the share of the pool
  predicted negative is π̂.
* ``estimate_class_prior()``, ``class_prior_report()``: π̂ and what the data identify about π
  (:mod:`~.prior`, :mod:`~.prior_report`); ``plot_report(path)``: one HTML page to look at
  (:mod:`~.report`); ``save(folder)`` / ``load(folder)``: without pickle (:mod:`~.saved_model`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin

from puicl_common.runtime import resolve_device
from puicl_model.estimator.class_prior_methods import ClassPriorMethods
from puicl_model.estimator.dask_frames import dask_frame, dask_kind
from puicl_model.estimator.ensemble import MEMBERS, Member
from puicl_model.estimator.fitted_scorer import (
    SAVED_CLASSIFIER,
    FittedScorer,
    NoTrainingDataError,
    Runtime,
    no_table,
)
from puicl_model.estimator.fitted_table import FittedTable
from puicl_model.estimator.input_checks import (
    _check_feature_names,
    check_pu_table,
    check_settings,
    check_table_after_fit,
    has_mixed_names,
    root_seed,
)
from puicl_model.estimator.pool_sample import fitted_table
from puicl_model.estimator.portfolio import Choice
from puicl_model.estimator.preprocessing import (
    CategoricalStrategy,
    MissingStrategy,
    NumericStrategy,
)
from puicl_model.estimator.prior import DEFAULT_FOLDS
from puicl_model.net.weights import NoBundledWeightsError, load_model
from puicl_model.passes.inference import PassScorer
from puicl_model.passes.query_rows import DEFAULT_CACHE_BYTES
from puicl_model.passes.settings import InferenceSettings, LargePool, PortfolioChoice

__all__ = ["InferenceSettings", "NoBundledWeightsError", "NoTrainingDataError",
           "PUICLClassifier"]


def fitted_part(name: str, doc: str) -> property:
    """A read-only view of the fitted object's ``name``: NotFittedError (an AttributeError)
    before ``fit``; where a classifier saved without its table lacks it, an AttributeError
    that says so."""
    def read(self: PUICLClassifier) -> Any:
        self._check_fitted()
        try:
            return getattr(self.fitted_, name)
        except AttributeError:
            raise AttributeError(str(no_table(f"{name}_"))) from None
    return property(read, doc=doc)


class PUICLClassifier(ClassPriorMethods, ClassifierMixin, BaseEstimator):
    """In-context positive-unlabeled classifier (paper §3–§5).

    Parameters
    ----------
    weights : path, PUICLModel or None
        A checkpoint directory or ``.safetensors`` file (or a loaded ``PUICLModel``). None
        uses the checkpoint bundled with the package (docs/model_card.md). Each ``fit``
        gets a model of its own; files already checked in this process, byte for byte, are
        not read and checked again (:mod:`puicl_model.net.weights.kept`).
    device : "auto", "cpu", "cuda", "cuda:1", "mps", ...
        "auto" picks CUDA when available, else Apple's GPU (MPS) when available, else the CPU
        (:func:`puicl_common.runtime.resolve_device`).
    n_estimators : int or None
        Ensemble members: the first ``n_estimators`` of
        :data:`puicl_model.estimator.ensemble.MEMBERS` (they differ in the table's encoding, labeled
        rows and features), averaged. 1 is the single-pass classifier. None (the default) chooses by
        the table: 1 member for numeric-only tables, 2 (adding the power-ordinal member) for tables
        with categorical columns (:func:`puicl_model.estimator.ensemble.default_n_estimators`);
        after ``fit``, ``n_estimators_`` holds the members that run. At most 100
        (``InferenceSettings.MAXIMUM``). Each member scores every row with every feature it
        sees (several passes for wide tables and large pools; the words member, view,
        feature group, chunk and pass are :mod:`puicl_model.passes.planning`'s).
    single_pass_limit : int
        Pools of at most this many unlabeled rows are scored in one forward pass.
    chunk_size : int
        Pool rows of a larger pool's shared context, or the most of each chunk (next to at
        most ``min(max_labeled, chunk_size // 2)`` labeled positives) where it is chunked.
    max_labeled : int
        Most labeled positives in one forward pass; more are subsampled per pass.
    threshold : float in (0, 1) or "prior"
        ``predict`` cut on P(y=1), or "prior" to predict the share π̂ of the pool negative.
    categorical, missing, numeric : preprocessing strategies
        (:mod:`puicl_model.estimator.preprocessing`): categories one-hot encoded, missing numbers
        filled with the median, numeric columns mapped to normal scores of their ranks.
    portfolio : "auto" or "none"
        "auto" (the default): on tables with at least ``MIN_LABELED_FOR_PORTFOLIO`` (20)
        labeled positives and ``MIN_POOL_FOR_PORTFOLIO`` (100) unlabeled rows, a logistic
        regression of labeled against unlabeled rows and PU bagging of random forests
        (both scored out of fold on every row) join the model, and the candidate blend chosen
        per table on held-out labeled positives orders the pool
        (:mod:`puicl_model.estimator.portfolio`, docs/classifier.md "Tables of every size").
        From ``MIN_LABELED_FOR_HOLD_OUT`` (600) labeled positives, a fifth of them (at most
        ``MAX_HELD_OUT``, 1,000) are the evidence, scored beside a sample of the pool by
        passes that set them apart from their context (the pool itself is scored by passes
        of every labeled positive, as the model alone scores it); below, on a pool of more than
        2,000 rows scored through shared contexts, the class prior's two cross-fitted folds are
        the evidence (what they scored is kept for π̂), and on a smaller pool the fallback
        blend stands with no evidence read. Where evidence is read, PU bagging of short
        boostings joins as a member. After ``fit``:
        ``portfolio_``, ``n_held_out_`` and, once the pool is scored, ``choice_`` (what was
        chosen and why) and ``blend_weight_`` (the model's weight). "none": the model alone.
    pool_sample : int or None
        A pool of more than ``pool_sample`` (20,000) unlabeled rows is fitted on a seeded
        sample of that many (:mod:`puicl_model.estimator.pool_sample`): the chunks, the portfolio
        and π̂ come from the sample, and every pool row is still scored, the others as new rows, by
        ``predict_proba``. ``n_pool_in_`` counts the pool's unlabeled rows (see ``fit``). None
        fits the whole pool (docs/classifier.md, "Large tables").
    large_pool : "shared" or "chunks"
        A pool of more than ``single_pass_limit`` rows is scored against one enriched context
        per member and feature group ("shared", the default), or in random chunks ("chunks")
        (docs/classifier.md, "Outside the trained range").
    random_state : int, numpy RandomState or Generator, or None
        Seeds every random choice (feature groups and shares, chunks, labeled subsets). An integer
        gives the same predictions on every machine; a RandomState or Generator gives
        ``fit`` one root seed drawn from it (advancing it, as in scikit-learn); None draws
        fresh entropy at ``fit``.
    precision : "auto", "float32" or "bfloat16"
        "auto" runs bfloat16 autocast on CUDA and float32 elsewhere
        (:mod:`puicl_common.runtime`, the trainer's words too).
    n_threads : int or None
        torch CPU threads in inference (None: torch's), and the portfolio's fits run at once;
        1 to 1024 (``puicl_common.runtime.MAX_THREADS``), checked at ``fit`` and where used.
    progress : bool or None
        tqdm progress bar over forward passes; None shows it on a terminal when there are
        more than a few passes.
    keep_columns : list of column names or None
        Columns to keep as features although they look like identifiers (whole numbers or
        text with a different value in nearly every row, :mod:`puicl_model.estimator.identifiers`),
        which ``fit`` otherwise drops with a warning naming them. A numpy array's columns are
        named by their position ("0", "1", ... or 0, 1, ...). None (the default) keeps none.
    context_cache_bytes : int
        Memory kept for the fitted contexts' caches (:mod:`puicl_model.passes.query_rows`), so
        that later calls scoring new rows skip the contexts' forward passes (1 GiB by
        default; 0 keeps none). Scores are the same bytes either way. The caches are not saved
        or sent to other processes: each process builds its own as it scores (but
        ``save(..., training_data=False)`` saves every one, in place of the table).
    partner : "auto", "none" or None
        The former name of ``portfolio``: set, it stands for it and warns; to be removed.
    """

    def __init__(
        self,
        weights: str | Path | torch.nn.Module | None = None,
        device: str = "auto",
        n_estimators: int | None = InferenceSettings.n_estimators,
        single_pass_limit: int = InferenceSettings.single_pass_limit,
        chunk_size: int = InferenceSettings.chunk_size,
        max_labeled: int = InferenceSettings.max_labeled,
        threshold: float | Literal["prior"] = 0.5,
        categorical: CategoricalStrategy = "onehot",
        missing: MissingStrategy = "median",
        numeric: NumericStrategy = "quantile",
        portfolio: PortfolioChoice = InferenceSettings.portfolio,
        pool_sample: int | None = InferenceSettings.pool_sample,
        large_pool: LargePool = InferenceSettings.large_pool,
        random_state: int | None = 0,
        precision: Literal["auto", "float32", "bfloat16"] = "auto",
        n_threads: int | None = None,
        progress: bool | None = None,
        keep_columns: list[str | int] | None = None,
        context_cache_bytes: int = DEFAULT_CACHE_BYTES,
        partner: PortfolioChoice | None = None,
    ) -> None:
        # scikit-learn convention: the constructor only stores its arguments; fit checks them
        self.weights = weights
        self.device = device
        self.n_estimators = n_estimators
        self.single_pass_limit = single_pass_limit
        self.chunk_size = chunk_size
        self.max_labeled = max_labeled
        self.threshold = threshold
        self.categorical = categorical
        self.missing = missing
        self.numeric = numeric
        self.portfolio = portfolio
        self.pool_sample = pool_sample
        self.large_pool = large_pool
        self.random_state = random_state
        self.precision = precision
        self.n_threads = n_threads
        self.progress = progress
        self.keep_columns = keep_columns
        self.context_cache_bytes = context_cache_bytes
        self.partner = partner

    # the ensemble members n_estimators takes from (studies/ensemble_members.py measures
    # other lists through a subclass)
    _member_catalogue: tuple[Member, ...] = MEMBERS

    # ------------------------------------------------------------------------------ fit
    def fit(self, X: Any, s: Any, *, sampled_from: int | None = None) -> PUICLClassifier:
        """Fit on the PU table (``s[i] = 1`` if row ``i`` is a labeled positive, else 0): encode
        it, plan the passes, score the pool, fit the portfolio's learners and choose its blend
        (and, with ``threshold="prior"``, estimate π̂), into one fitted object, ``fitted_``
        (:class:`~puicl_model.estimator.fitted_table.FittedTable`), that predictions only read.
        A fit that fails leaves the classifier unfitted. ``sampled_from=n``: X's unlabeled rows
        are already the seeded sample of a pool of ``n`` (``pool_sample.sampled_pool_rows`` by
        this fit's seed), which fit keeps whole."""
        self._forget_fit()  # a fit that fails leaves no fitted classifier (an earlier's neither)
        try:
            return self._fit(X, s, sampled_from)
        except BaseException:
            self._forget_fit()
            raise

    def _fit(self, X: Any, s: Any, sampled_from: int | None) -> PUICLClassifier:
        settings = check_settings(self)
        if sampled_from is not None and not isinstance(self.random_state, (int, np.integer)):
            raise ValueError("fit(..., sampled_from=n) needs an integer random_state: the seed "
                             "the sample was drawn from")
        labeled = check_pu_table(X, s, sampled_from, settings.pool_sample)
        entropy = root_seed(self.random_state)
        n_pool_in = int((~labeled).sum()) if sampled_from is None else int(sampled_from)
        sampled = fitted_table(X, labeled, settings.pool_sample, entropy, sampled_from)
        if sampled is not None:  # a large pool: fitted on its seeded sample
            X, labeled = sampled
        device = resolve_device(self.device, training=False)
        model = load_model(self.weights, device)
        table = FittedTable.build(
            X, labeled, settings, entropy, max_features=int(model.config.max_features),
            catalogue=self._member_catalogue, n_estimators=self.n_estimators,
            encoding={"numeric": self.numeric, "categorical": self.categorical,
                      "missing": self.missing, "keep_columns": self.keep_columns},
            n_threads=self.n_threads)
        base = table.views[0].preprocessor
        self.device_, self.model_ = device, model
        self.n_pool_in_ = n_pool_in
        self.n_features_in_ = base.n_features_in_
        # scikit-learn's rule: feature_names_in_ only for DataFrames whose column names are all
        # strings (it refuses mixed names, which the preprocessor matches as text anyway)
        if not has_mixed_names(X):
            _check_feature_names(self, X, reset=True)
        self.classes_ = np.array([0, 1])
        self.n_estimators_ = len(table.planners)  # members that run (None resolved)
        runtime = self._runtime()
        table.score(runtime)
        if self.threshold == "prior":
            table.estimate_class_prior(DEFAULT_FOLDS, runtime)
        self.fitted_: FittedScorer = table
        return self

    def _forget_fit(self) -> None:  # what a fit sets (an earlier fit's too), nothing else
        for name in (*SAVED_CLASSIFIER, "device_", "model_", "fitted_"):
            self.__dict__.pop(name, None)

    # -------------------------------------------------------------------------- scoring
    def _check_fitted(self) -> None:
        if "fitted_" not in vars(self):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("this PUICLClassifier is not fitted yet; call fit(X, s) first")

    def _runtime(self) -> Runtime:
        """How the model runs now (:meth:`Runtime.of`: the settings as they are, checked)."""
        return Runtime.of(self)

    @property
    def scorer_(self) -> PassScorer:
        """Scores rows of the fitted table by planned passes, with the fitted model and the
        current ``precision``, ``n_threads`` and ``progress`` (:class:`PassScorer`)."""
        self._check_fitted()
        return self._runtime().scorer()

    # the fitted object's parts, by the names scikit-learn users read them under
    views_ = fitted_part("views", "The fitted views: each member's encoding of the table.")
    planners_ = fitted_part("planners", "One pass planner per member that runs.")
    planner_ = property(lambda self: self.fitted_.planners[0],
                        doc="The first member's pass planner.")
    preprocessor_ = property(lambda self: self.fitted_.views[0].preprocessor,
                             doc="The first view's column encoding (the configured one).")
    portfolio_ = fitted_part("portfolio", "The portfolio (None: the model alone).")
    n_held_out_ = fitted_part("n_held_out",
                              "Labeled positives set apart from the evidence's passes.")
    x_labeled_ = fitted_part("x_labeled", "The labeled rows the passes' context draws from "
                             "(every one, but in a folder saved before held-out positives "
                             "stayed in the context).")
    x_pool_ = fitted_part("x_pool", "The fitted unlabeled rows, encoded.")
    n_passes_ = fitted_part("n_passes", "Forward passes run by fit's scoring of the pool.")
    inference_seconds_ = fitted_part("inference_seconds", "Seconds fit spent scoring.")
    _entropy = fitted_part("entropy", "The fit's root seed.")

    def prepare(self) -> PUICLClassifier:
        """Nothing left to do (``fit`` does the work); kept for code written for the lazy fit:
        it warns, and will be removed."""
        import warnings

        warnings.warn("PUICLClassifier.prepare() is no longer needed: fit() scores the pool "
                      "and chooses the blend; prepare() will be removed", FutureWarning,
                      stacklevel=2)
        self._check_fitted()
        return self

    @property
    def choice_(self) -> Choice | None:
        """What the portfolio chose on this table (members, weights, each candidate's held-out
        AUC, why), or None where the model alone runs (``portfolio="none"``, or a table below
        the portfolio's sizes)."""
        self._check_fitted()
        return self.fitted_.choice

    @property
    def blend_weight_(self) -> float:
        """The model's weight in the chosen blend (1.0: the model alone)."""
        choice = self.choice_
        return 1.0 if choice is None else float(choice.weights.get("model", 0.0))

    def _positive_probability(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """P(y=1) per row of X, and the fitted-pool index of each row (-1 for new rows)."""
        self._check_fitted()
        check_table_after_fit(self, X)
        return self.fitted_.probability(X, self._runtime())

    def predict_proba(self, X: Any) -> np.ndarray:
        """``[P(y=0), P(y=1)]`` per row of ``X`` (float64 [n, 2]). A dask DataFrame gives a
        lazy dask array [n, 2] with declared ``meta``, as dask-ml's ``ParallelPostFit`` does:
        its rows are scored partition by partition at ``compute()``, the bytes of one process
        (:mod:`puicl_model.estimator.dask_frames`)."""
        if dask_kind(X):
            from puicl_model.estimator.dask_frames import predict_proba

            return predict_proba(self, dask_frame(X))
        positive, _ = self._positive_probability(X)
        return np.stack([1.0 - positive, positive], axis=1)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """``log(predict_proba(X))``: ``[log P(y=0), log P(y=1)]`` per row (a probability of 0
        gives -inf, as in scikit-learn's classifiers); lazy for a dask DataFrame."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    def decision_function(self, X: Any) -> np.ndarray:
        """Log-odds log(P(y=1) / P(y=0)) per row; > 0 means positive at threshold 0.5."""
        positive, _ = self._positive_probability(X)
        eps = np.finfo(np.float64).eps
        clipped = np.clip(positive, eps, 1.0 - eps)
        return np.log(clipped) - np.log1p(-clipped)

    def predict(self, X: Any) -> np.ndarray:
        """0/1 labels (``classes_``) per row of ``X``, cut as set by ``threshold``; for a dask
        DataFrame a lazy dask array [n] (see :meth:`predict_proba`)."""
        if dask_kind(X):
            from puicl_model.estimator.dask_frames import predict

            return predict(self, dask_frame(X))
        return self._labels(*self._positive_probability(X))

    def predict_and_proba(self, X: Any, pool_rows: Any = None,
                          ) -> tuple[np.ndarray, np.ndarray]:
        """``(predict_proba(X), predict(X))`` from one scoring of ``X``.

        ``pool_rows``: per row of ``X``, its position among the fitted unlabeled rows (those of
        ``x_pool_``, in ``fit``'s order: the row gets its own transductive score, in any batch,
        and its values are not read), -1 (found by its values as ``predict_proba`` finds it:
        every copy of a duplicated row gets the first copy's score) or -2
        (``pool_sample.NEW_ROW``: a new row, whatever it equals). A reader that streams the
        fitted table knows each row's position (:mod:`puicl_model.files.large_tables`)."""
        if pool_rows is None:
            positive, match = self._positive_probability(X)
        else:
            self._check_fitted()
            check_table_after_fit(self, X)
            positive, match = self.fitted_.placed_probability(X, pool_rows, self._runtime())
        return np.stack([1.0 - positive, positive], axis=1), self._labels(positive, match)

    def _labels(self, positive: np.ndarray, match: np.ndarray) -> np.ndarray:
        """The labels of rows of P(y=1) ``positive`` (``match``: their fitted-pool rows)."""
        runtime = self._runtime()  # (checks the threshold, which may be set after fit)
        if self.threshold != "prior":
            self._check_the_cut(float(self.threshold), runtime)
            return (positive > float(self.threshold)).astype(np.int64)
        pool_labels, cut = self.fitted_.prior_cut(runtime)
        labels = (positive > cut).astype(np.int64)
        known = match >= 0
        labels[known] = pool_labels[match[known]]
        return labels

    # ---------------------------------------------------------------------- saving
    def save(self, directory: str | Path, training_data: bool = True) -> Path:
        """Write this fitted classifier to ``directory`` without pickle, atomically, over
        nothing but an earlier save (:mod:`puicl_model.estimator.saved_model`): its settings
        and the fitted object's declared state (``SAVED``) as JSON and safetensors, each file's
        sha256 in a manifest; the loaded classifier returns the same bits.

        ``training_data=False`` leaves the encoded table and its rows' scores out, for scoring
        new rows only: every fitted context's cache is saved instead (far larger: ~40 MB per
        context of a 1,000-row chunk with 20 features for the bundled model), and the loaded
        classifier scores every row as a new row, the bytes this one gives rows new to it (on
        the same device). π̂ and the prior cut are fixed at save time; what reads the table
        (``class_prior_report``, ``plot_report``, ``fitted_pool_proba``, ``held_out_scores``,
        ``estimate_class_prior`` with other ``n_folds``, ``pool_rows``) raises
        :class:`NoTrainingDataError` on the loaded one."""
        from puicl_model.estimator.saved_model import save

        return save(self, directory, training_data)

    @classmethod
    def load(cls, directory: str | Path, device: str = "auto") -> PUICLClassifier:
        """A classifier written by :meth:`save`, its model on ``device``; a damaged, changed or
        missing file, or another format, is refused in one line naming it."""
        from puicl_model.estimator.saved_model import load

        return load(cls, directory, device)

    def __sklearn_tags__(self):  # scikit-learn >= 1.6 estimator tags
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        # s is binary by definition (labeled positive or unlabeled)
        tags.classifier_tags.multi_class = False
        return tags

