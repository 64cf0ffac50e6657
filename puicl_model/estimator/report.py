"""A report a person looks at: one self-contained HTML page of a fitted classifier's figures
(``PUICLClassifier.plot_report``, ``puicl predict --report FILE.html``).

Three figures, each drawn from what the classifier already computed (no further pass of the
model beyond the class prior's cross-fitted scorings, which ``puicl predict`` pays anyway):

* ``scores``: P(y = 1) of the held-out labeled positives against the pool's, the two samples
  scored by the same passes (``held_out_scores()``: the class prior's folds, or the positives
  held out of the passes; with the portfolio, the chosen blend's probabilities). Where the
  model separates them the positives sit to the right of most of the pool.
* ``prior``: π's identified lower bound, the estimate π̂, its interval and the upper end on one
  axis (``class_prior_report``, :mod:`puicl_model.estimator.prior_report`).
* ``choice``: what the portfolio chose on this table
  (:class:`puicl_model.estimator.portfolio.Choice`):
  every candidate's held-out AUC, the chosen one highlighted, the bar a candidate had to clear
  to replace the fallback, and the chosen members' weights. Where the model alone runs, the
  page says why in words instead.

The figures are PNG (matplotlib's Agg canvas, no pyplot: no global backend state), embedded in
the page as base64 and, where the page is written, written beside it. matplotlib is an extra
(``pip install 'puicl[report]'``): it is imported here only when a report is drawn.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from puicl_common.atomic import atomic_write_files
from puicl_common.output_paths import check_output_path
from puicl_model.estimator.fitted_table import table_of
from puicl_model.estimator.input_checks import portfolio_setting
from puicl_model.estimator.portfolio import EVIDENCE_Z, Choice
from puicl_model.estimator.portfolio_gate import alone_reason
from puicl_model.estimator.prior import DEFAULT_FOLDS, MIN_LABELED_FOR_ESTIMATES
from puicl_model.estimator.prior_report import ClassPriorReport, held_out_auc

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier

__all__ = ["EXTRA", "FIGURES", "Report", "figure_paths", "plot_report", "require_matplotlib"]

# the extra that brings matplotlib (pyproject.toml)
EXTRA = "report"
# the figures, in the page's order; written beside the page as STEM_NAME.png
FIGURES = ("scores", "prior", "choice")
_DPI = 110
# colours that stay apart for the common colour-vision deficiencies (Okabe & Ito)
_BLUE, _ORANGE, _GREEN, _GREY, _VERMILION = "#0072B2", "#E69F00", "#009E73", "#999999", "#D55E00"


@dataclass(frozen=True)
class Report:
    """A drawn report: the page (``html``, the figures embedded), each figure as PNG bytes,
    and where they were written (``path`` None: nothing was written)."""

    html: str
    figures: Mapping[str, bytes]
    path: Path | None = None
    figure_paths: Mapping[str, Path] = field(default_factory=dict)


def require_matplotlib() -> Any:
    """matplotlib, or an ImportError in one line naming the extra that installs it."""
    try:
        import matplotlib
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    except ImportError:
        raise ImportError(f"the report draws with matplotlib, which is not installed: "
                          f"pip install 'puicl[{EXTRA}]'") from None
    return matplotlib


def figure_paths(path: str | Path) -> dict[str, Path]:
    """The PNG files written beside the page ``path``: ``STEM_scores.png`` and so on."""
    path = Path(path)
    return {name: path.with_name(f"{path.stem}_{name}.png") for name in FIGURES}


# ------------------------------------------------------------------------------ figures
def _new_figure(width: float, height: float) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _png(figure: Any) -> bytes:
    buffer = io.BytesIO()
    # no creation date or version in the file: the same report gives the same bytes
    figure.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _scores_figure(folds: Sequence[tuple[np.ndarray, np.ndarray]] | None,
                   pool: np.ndarray, threshold: float | None) -> bytes:
    """``folds``: per fold (held-out positives' P, the pool's P scored beside them); the pool's
    histogram then pools the folds' scorings, so both samples come from the same passes."""
    figure = _new_figure(7.0, 3.8)
    axes = figure.add_subplot()
    bins = np.linspace(0.0, 1.0, 41)
    n_pool = len(pool)
    how_pool = ""
    if folds:
        pool = np.concatenate([np.asarray(u, dtype=np.float64) for _, u in folds])
        how_pool = ", scored beside each fold" if len(folds) > 1 else ""
    # each sample's bars sum to 1, so samples of different sizes compare by shape
    axes.hist(pool, bins=bins, weights=np.full(len(pool), 1.0 / len(pool)),
              color=_GREY, alpha=0.6, label=f"unlabeled pool ({n_pool:,} rows{how_pool})")
    title = "P(y = 1) of the pool"
    if folds:
        held = np.concatenate([np.asarray(h, dtype=np.float64) for h, _ in folds])
        auc = held_out_auc(folds)
        how = ("held out of the passes" if len(folds) == 1
               else f"cross-fitted in {len(folds)} folds")
        axes.hist(held, bins=bins, weights=np.full(len(held), 1.0 / len(held)),
                  histtype="step", linewidth=2.0, color=_BLUE,
                  label=f"held-out labeled positives ({len(held):,}, {how})")
        title = (f"Held-out labeled positives against the pool: AUC {auc:.3f} "
                 "(0.5: no separation)")
    else:
        title += f" (no held-out positives: fewer than {MIN_LABELED_FOR_ESTIMATES} labeled)"
    if threshold is not None:
        axes.axvline(threshold, color=_VERMILION, linestyle="--", linewidth=1.2,
                     label=f"cut of predict ({threshold:g})")
    axes.set_xlim(0.0, 1.0)
    axes.set_xlabel("P(y = 1), the predicted probability of being positive")
    axes.set_ylabel("share of the sample's rows per bin\n(bins of 0.025)")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper left", fontsize=8, frameon=False)
    return _png(figure)


def _prior_figure(report: ClassPriorReport) -> bytes:
    figure = _new_figure(7.5, 3.4)
    axes = figure.add_subplot()
    bound = report.lower_bound
    low = 0.0 if bound is None else bound
    unbounded = " (no identified bound)" if bound is None else ""
    axes.axvspan(low, report.upper, ymin=0.3, ymax=0.7, color=_ORANGE, alpha=0.25,
                 label=f"range to read π in [{low:.3f}, {report.upper:.3f}]{unbounded}")
    axes.hlines(0.5, *report.interval, color=_BLUE, linewidth=6,
                label=f"π̂'s {report.level:.0%} sampling interval [{report.interval[0]:.3f}, "
                      f"{report.interval[1]:.3f}] (sampling only)")
    axes.plot([report.estimate], [0.5], "D", color="black", markersize=8,
              label=f"estimate π̂ = {report.estimate:.3f}")
    if bound is not None:
        axes.axvline(bound, color=_GREEN, linewidth=2.0,
                     label=f"identified lower bound {bound:.3f} (π ≥ this, "
                           f"≥ {1 - 2 * report.delta:.0%} sure)")
    axes.axvline(report.upper, color=_VERMILION, linewidth=2.0, linestyle="--",
                 label=f"upper end {report.upper:.3f} (interval + {report.allowance:g} "
                       "for the model's error)")
    axes.set_xlim(0.0, 1.0)
    axes.set_ylim(0.0, 1.0)
    axes.set_yticks([0.5], ["π"])
    axes.set_xlabel("π, the negative share of the unlabeled pool (fraction of its rows)")
    status = "poorly identified" if report.status == "not bounded" else report.status
    axes.set_title(f"The class prior: π is {status}"
                   + (" (no bound: too few labeled positives)" if bound is None else ""),
                   fontsize=10)
    # below the axes, where the constrained layout makes room for it
    figure.legend(loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return _png(figure)


def _weights_panel(axes: Any, choice: Choice, title: str) -> None:
    members = list(choice.weights)
    axes.bar(members, [choice.weights[m] for m in members], color=_BLUE, label=choice.name)
    axes.set_ylim(0.0, 1.1)
    axes.set_xlabel("member")
    axes.set_ylabel("weight in the chosen blend (fraction)")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper right", fontsize=8, frameon=False)


def _choice_figure(choice: Choice, fallback: str) -> bytes:
    from matplotlib.lines import Line2D

    if not choice.read_evidence:  # a small table's fallback: its weights alone
        figure = _new_figure(4.5, 4.2)
        _weights_panel(figure.subplots(), choice, "The fallback blend (no evidence read)")
        return _png(figure)
    figure = _new_figure(9.0, 4.2)
    auc_axes, weight_axes = figure.subplots(1, 2, width_ratios=(2.2, 1.0))
    names = list(choice.held_out_auc)  # in the order of the candidates
    aucs = np.array([choice.held_out_auc[name] for name in names])
    rows = np.arange(len(names))[::-1]  # the first candidate on top
    # dots, not bars: the axis is zoomed to the AUCs, where a bar's length would mislead
    chosen = np.array([name == choice.name for name in names])
    auc_axes.plot(aucs[~chosen], rows[~chosen], "o", color=_GREY, markersize=8)
    auc_axes.plot(aucs[chosen], rows[chosen], "D", color=_BLUE, markersize=10)
    base = choice.held_out_auc[fallback]
    auc_axes.axvline(base, color=_GREY, linestyle=":", linewidth=1.0)
    # what each candidate had to clear to replace the fallback
    bars = np.array([base + EVIDENCE_Z * choice.lead_se[name] if name != fallback else np.nan
                     for name in names])
    auc_axes.plot(bars, rows, "|", color=_VERMILION, markersize=14, markeredgewidth=2.0)
    values = np.r_[aucs, bars[np.isfinite(bars)]]
    span = max(float(values.max() - values.min()), 0.01)
    auc_axes.set_xlim(max(0.0, float(values.min()) - 0.15 * span),
                      min(1.0, float(values.max()) + 0.15 * span))
    auc_axes.set_ylim(-0.7, len(names) - 0.3)
    auc_axes.set_yticks(rows, [f"{name} (fallback)" if name == fallback else name
                               for name in names])
    auc_axes.set_xlabel("held-out AUC: labeled positives against the pool")
    auc_axes.set_ylabel("candidate blend")
    # below the axes, where it covers no candidate
    figure.legend(handles=[
        Line2D([], [], color=_BLUE, marker="D", linestyle="none", label=f"chosen: {choice.name}"),
        Line2D([], [], color=_GREY, marker="o", linestyle="none", label="other candidates"),
        Line2D([], [], color=_GREY, linestyle=":", label=f"fallback ({fallback})"),
        Line2D([], [], color=_VERMILION, marker="|", linestyle="none", markersize=12,
               markeredgewidth=2.0, label=f"needed to replace it (+{EVIDENCE_Z:g} SE)")],
        loc="outside lower center", ncol=4, fontsize=8, frameon=False)
    auc_axes.set_title(f"Candidates on {choice.n_held_out:,} held-out labeled positives",
                       fontsize=10)
    _weights_panel(weight_axes, choice, "Chosen blend: weights")
    return _png(figure)


# ---------------------------------------------------------------------------------- page
def _facts(classifier: PUICLClassifier, report: ClassPriorReport,
           choice: Choice | None) -> list[tuple[str, str]]:
    bound = "none" if report.lower_bound is None else f"{report.lower_bound:.4f}"
    facts = [("labeled positives", f"{classifier.fitted_.n_labeled:,}"),
             ("unlabeled rows fitted", f"{len(classifier.x_pool_):,}"),
             ("π̂ (negative share of the pool)", f"{report.estimate:.4f}"),
             (f"π̂'s {report.level:.0%} sampling interval (its noise, not its bias)",
              f"[{report.interval[0]:.4f}, {report.interval[1]:.4f}]"),
             ("identified lower bound of π", bound),
             ("read π in", f"[{report.lower_bound or 0.0:.4f}, {report.upper:.4f}]"),
             ("π", report.note)]
    if choice is None:
        facts.append(("scored by", "the model alone"))
    else:
        facts += [("scored by", choice.describe()), ("why", choice.reason)]
    return facts


_STYLE = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}"
          "table{border-collapse:collapse}td,th{padding:.2em .8em;text-align:left;"
          "vertical-align:top;border-bottom:1px solid #ddd}img{max-width:100%}"
          "figcaption{color:#555;font-size:.9em}")


def _page(facts: list[tuple[str, str]], figures: Mapping[str, bytes],
          captions: Mapping[str, str], alone: str | None) -> str:
    def text(value: str) -> str:  # a text node: quotes may stay as they are
        return html.escape(value, quote=False)

    rows = "".join(f"<tr><th>{text(k)}</th><td>{text(v)}</td></tr>" for k, v in facts)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>PUICL report</title>", f"<style>{_STYLE}</style></head><body>",
             "<h1>PUICL report</h1>", f"<table>{rows}</table>"]
    for name, png in figures.items():
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<figure id="{name}"><img alt="{html.escape(captions[name])}" '
                     f'src="data:image/png;base64,{data}"><figcaption>'
                     f"{text(captions[name])}</figcaption></figure>")
    if alone is not None:
        parts.append(f'<h2>Why the model alone</h2><p id="model-alone">{text(alone)}</p>')
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def plot_report(classifier: PUICLClassifier, path: str | Path | None = None) -> Report:
    """Draw the report of a fitted ``classifier``; with ``path``, write the page there and
    the figures beside it (:func:`figure_paths`) as a group: each checked before anything is
    drawn (:func:`puicl_common.output_paths.check_output_path`), and all written whole before
    any is put in place, the page last, so that a write that fails (a full disk) leaves
    none of them."""
    require_matplotlib()
    if path is not None:
        for where in (path, *figure_paths(path).values()):
            check_output_path(where, "file", "the report's file")
    report = classifier.class_prior_report()  # scores the folds once; reused below
    table = table_of(classifier.fitted_, "plot_report()")
    folds = table.prior_evidence(DEFAULT_FOLDS, classifier._runtime())
    choice = table.choice
    threshold = None if classifier.threshold == "prior" else float(classifier.threshold)
    figures = {"scores": _scores_figure(folds, table.pool_proba, threshold),
               "prior": _prior_figure(report)}
    captions = {"scores": "Score distributions: P(y = 1) of the held-out labeled positives "
                          "and of the unlabeled pool",
                "prior": "What the data identify about π: " + report.note}
    alone = None
    if choice is None:
        alone = alone_reason(portfolio_setting(classifier), len(table.x_labeled),
                             len(table.x_pool))
    else:
        assert classifier.portfolio_ is not None
        figures["choice"] = _choice_figure(choice, classifier.portfolio_.fallback)
        captions["choice"] = f"What the classifier chose for this table: {choice.reason}"
    page = _page(_facts(classifier, report, choice), figures, captions, alone)
    if path is None:
        return Report(page, figures)
    path = Path(path)
    written = {name: where for name, where in figure_paths(path).items() if name in figures}
    atomic_write_files({path: page.encode("utf-8"),
                        **{where: figures[name] for name, where in written.items()}})
    return Report(page, figures, path, written)
