"""k-means clustering of embeddings with k chosen by elbow + silhouette (scikit-learn,
imported when a clustering runs, so the conformal core loads without it)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from scoreband.errors import InputError

__all__ = ["choose_k", "fit_kmeans", "assign_clusters", "KSelection"]

#: below this many items k-means runs on one thread: the OpenMP pool costs more than it
#: gives on a few points (157 ms against 6 ms a fit on 30 items here)
ONE_THREAD_BELOW = 5000


def _threads(n: int):
    """A context that runs scikit-learn's k-means on one thread for small inputs."""
    if n >= ONE_THREAD_BELOW:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(1)


@dataclass
class KSelection:
    """The outcome of :func:`choose_k`: the chosen k and the curves behind it."""

    k: int
    ks: list[int]
    inertia: list[float]
    silhouette: list[float]
    elbow: int


def _elbow(ks: np.ndarray, inertia: np.ndarray) -> int:
    """Knee of the inertia curve: the point farthest below the chord from first to last."""
    if len(ks) < 3:
        return int(ks[0])
    x = (ks - ks[0]) / (ks[-1] - ks[0])
    span = inertia[0] - inertia[-1]
    y = (inertia - inertia[-1]) / span if span > 0 else np.zeros_like(inertia)
    # chord from (0, 1) to (1, 0): distance is proportional to 1 - x - y
    return int(ks[int(np.argmax(1 - x - y))])


def choose_k(X, k_range=range(2, 11), seed: int = 0, sample_size: int = 2000) -> KSelection:
    """Choose the number of clusters by elbow + silhouette.

    The elbow of the inertia curve gives a neighbourhood ``[elbow - 1, elbow + 1]``; the k
    with the best silhouette (on at most ``sample_size`` points) inside it is chosen.
    """
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    X = np.asarray(X, dtype=float)
    ks = [k for k in k_range if 2 <= k < len(X)]
    if not ks:
        raise InputError(f"need more than 2 items to choose k, got {len(X)}")
    rng = np.random.default_rng(seed)
    inertia, sil = [], []
    for k in ks:
        with _threads(len(X)):
            km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(X)
        inertia.append(float(km.inertia_))
        if len(set(km.labels_)) < 2:
            sil.append(-1.0)
            continue
        ss = min(sample_size, len(X))
        sil.append(float(silhouette_score(X, km.labels_, sample_size=ss,
                                          random_state=int(rng.integers(2**31)))))
    elbow = _elbow(np.array(ks, dtype=float), np.array(inertia))
    near = [i for i, k in enumerate(ks) if abs(k - elbow) <= 1]
    best = max(near, key=lambda i: sil[i])
    return KSelection(k=ks[best], ks=ks, inertia=inertia, silhouette=sil, elbow=elbow)


def fit_kmeans(X, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k-means; returns ``(labels, centers)``."""
    from sklearn.cluster import KMeans

    X = np.asarray(X, dtype=float)
    if k < 1 or k > len(X):
        raise InputError(f"k must be between 1 and the number of items ({len(X)}), got {k}")
    with _threads(len(X)):
        km = KMeans(n_clusters=k, n_init=4, random_state=seed).fit(X)
    return km.labels_.astype(int), km.cluster_centers_


def assign_clusters(X, centers) -> np.ndarray:
    """Index of the nearest center for each row of X."""
    X = np.asarray(X, dtype=float)
    C = np.asarray(centers, dtype=float)
    if X.shape[1] != C.shape[1]:
        raise InputError(f"embeddings have {X.shape[1]} dims, the clusters were fitted on {C.shape[1]}")
    # einsum without BLAS: a row's distances never depend on the other rows of the call, so
    # a row gets the same cluster alone or in a table (BLAS can differ in the last digit)
    d = (np.einsum("ij,ij->i", X, X, optimize=False)[:, None]
         - 2 * np.einsum("ij,kj->ik", X, C, optimize=False) + (C**2).sum(1)[None, :])
    return np.argmin(d, axis=1)
