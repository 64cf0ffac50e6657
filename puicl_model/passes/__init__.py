"""Passes: how a table's rows are planned into the network's forward passes (which labeled
rows, which pool chunk, which features each pass sees) and how the passes run, with new rows
scored over a pass's cached context.

Imports :mod:`puicl_model.net` only; the encodings it reads are made in ``estimator``.
"""
