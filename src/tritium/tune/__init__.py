"""Offline tuning (``python -m tritium.tune <suite>``): sweeps on a GPU, decision trees fitted from them.

Suites: ``attention`` (paged attention's kernel knobs; trees under ``tritium/attention/tuned``). The
fit needs scikit-learn (``pip install 'tritium[tune]'``), the library at run time does not.
"""
