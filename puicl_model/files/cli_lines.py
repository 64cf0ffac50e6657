"""What ``puicl predict`` prints of a fit beside its scores: the portfolio's choice, the
class-prior report, and the cut's check, each as the lines a person reads on the terminal."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from puicl_model.estimator.classifier import PUICLClassifier
    from puicl_model.estimator.prior_report import ClassPriorReport

__all__ = ["portfolio_line", "prior_lines", "say_the_cut"]


def portfolio_line(classifier: PUICLClassifier) -> str:
    """What the portfolio chose on the table, in one line."""
    choice = classifier.choice_
    if choice is None:
        return "scored by: the model alone (portfolio none, or a table below the portfolio's sizes)"
    return f"scored by: {choice.describe()}"


def prior_lines(report: ClassPriorReport) -> list[str]:
    """The class-prior report as printed: the bound, the point with its interval, the note."""
    bound = "none" if report.lower_bound is None else f"{report.lower_bound:.4f}"
    low, high = report.interval
    return [f"π bound (identified lower bound of the negative share): {bound}; "
            f"π̂ {report.estimate:.4f}, {report.level:.0%} sampling interval [{low:.4f}, "
            f"{high:.4f}] (the estimate's noise, not its bias); "
            f"read π in [{report.lower_bound or 0.0:.4f}, {report.upper:.4f}]",
            report.note]  # says whether π is identified, and what that means for the cut


def say_the_cut(classifier: PUICLClassifier) -> None:
    """The cut's check (``FittedTable.threshold_note``) as one note line, never silently and
    never as a Python warning with its file and line; a classifier saved without its table has
    no pool to check it on."""
    from puicl_model.estimator.fitted_table import FittedTable

    if classifier.threshold == "prior" or not isinstance(classifier.fitted_, FittedTable):
        return
    note = classifier.fitted_.threshold_note(float(classifier.threshold), classifier._runtime())
    if note is not None:
        print(f"puicl predict: note: {note}", file=sys.stderr)
