"""The network: the PUICL transformer (paper §3), its dense specification, the attention
backends that lay a batch's cells out, and the bundled weights.

The lowest wing: it imports nothing else of :mod:`puicl_model`. ``passes`` runs it over a
table, ``estimator`` wraps it for scikit-learn, ``files`` serves it from the command line.
"""
