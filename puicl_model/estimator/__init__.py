"""The estimator: the scikit-learn classifier and what it fits around the passes, namely the
table encoding, the ensemble's views, the per-table portfolio, the class prior and its
report, and saving a fitted classifier.

Imports ``net`` and ``passes``, never ``files``.
"""
