"""scikit-learn's estimator checks for PUICLClassifier: every check passes, or is expected to
fail for the reason written next to it. (Sample-order and subset invariance pass exactly:
new rows are scored alone, puicl_model.passes.query_rows.)"""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from puicl_model import PUICLClassifier

# What a PU classifier does differently from a supervised one, on purpose.
_PU_LABELS = (
    "fit takes s, the PU labels (1 = labeled positive, 0 = unlabeled), which must be 0 or 1; "
    "the check fits binary labels of other values"
)
EXPECTED_FAILURES = {
    "check_fit_score_takes_y": "fit's second argument is named s, not y: it holds the PU "
                               "labels (labeled or unlabeled), not the classes",
    "check_estimators_dtypes": _PU_LABELS,
    "check_classifier_data_not_an_array": _PU_LABELS,
    "check_classifiers_classes": _PU_LABELS + " (strings)",
}


# The bundled checkpoint; the checks use tables of a few dozen rows, one pass each.
@parametrize_with_checks([PUICLClassifier(progress=False)],
                         expected_failed_checks=lambda estimator: EXPECTED_FAILURES)
def test_sklearn_estimator_checks(estimator, check) -> None:
    check(estimator)
