"""Best Bin Estimation (BBE) of the mixture proportion, Garg et al. (NeurIPS 2021), Alg. 1:
the implementation of :mod:`puicl_model.estimator.prior`, which the classifier's π̂ uses too, under
the name the baselines use."""

from __future__ import annotations

from puicl_model.estimator.prior import best_bin_alpha as bbe_alpha

__all__ = ["bbe_alpha"]
