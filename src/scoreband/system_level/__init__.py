"""System-level inference (``scoreband systems``); the maths is in :mod:`.ppi`, the study in
:mod:`.systems`. Only the constants live here, so that the command line can name them
without loading scipy."""

#: labels below which a system gets no interval: Student's t (n - 1 degrees of freedom,
#: n - 2 when PPI++ fits its weight) covers within 0.02 of nominal from here on in the
#: simulations of ``tests/system_level`` (5 labels: 0.88-0.89 at nominal 0.90; the normal
#: interval with ddof = 0 variances gave 0.69-0.78)
MIN_LABELS = 5
