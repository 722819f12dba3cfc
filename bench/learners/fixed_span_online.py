#!/usr/bin/env python3
"""One pass of the classifier stage's recursion on a FIXED span of B landmarks
(issue 32 item 4, thirteenth session): how much of the gap to the SVM at a
small budget is the loss, how much the landmarks, and how much the landmarks
moving during the stream.

Rows standardised as svm_reference.py; for each shuffle (numpy seeds 1-5)
the landmarks are chosen once, the rows mapped to whitened Nystroem
coordinates z = K_DD^(-1/2) k_D(x) (plus a bias), and the stage's recursion
is replayed in one pass, prequential, accuracy over the last half (as
TestSVMGapFigures): RLS with the squared loss, the one-vs-rest squared
hinge on the shared P (the stage's `loss: hinge`), and the same hinge with
one P per class (C times the memory). Also a batch squared-hinge LinearSVC
(C 10) fitted on the first half and scored on the last.

Landmarks: the first B rows of the shuffle (kha `dictionary: first`);
MacQueen's online k-means over the first half started from them (kha
`dictionary: kmeans` at its last rebase before the last half); Lloyd's
k-means of the first half; Lloyd's k-means of the whole file (an oracle:
it has seen the rows it is scored on, unlabelled).

    /usr/bin/python3 bench/learners/fixed_span_online.py testdata/data/satellite.csv 200 3
"""
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.svm import LinearSVC


def rbf(a, b, g):
    aa = (a * a).sum(1)[:, None]
    bb = (b * b).sum(1)[None, :]
    return np.exp(-g * np.maximum(aa + bb - 2 * a @ b.T, 0))


def one_pass(z, y, classes, mode, lam=0.1):
    n = z.shape[1]
    w = np.zeros((classes, n))
    ps = [np.eye(n) / lam for _ in range(classes if mode == "per-class" else 1)]
    hits = np.zeros(len(y), bool)
    for i, (zi, t) in enumerate(zip(z, y)):
        s = w @ zi
        hits[i] = s.argmax() == t
        e = -s
        e[t] += 1
        keep = np.ones(classes, bool) if mode == "squared" else np.where(np.arange(classes) == t, e > 0, e <= 0)
        if mode == "per-class":
            for r in np.flatnonzero(keep):
                k = ps[r] @ zi
                den = 1 + zi @ k
                w[r] += e[r] * k / den
                ps[r] -= np.outer(k, k) / den
            continue
        k = ps[0] @ zi
        den = 1 + zi @ k
        w += np.outer(e * keep, k / den)
        ps[0] -= np.outer(k, k) / den
    return hits


def macqueen(xs, b):
    c = xs[:b].copy()
    cnt = np.ones(b)
    for xi in xs[b:]:
        j = ((c - xi) ** 2).sum(1).argmin()
        cnt[j] += 1
        c[j] += (xi - c[j]) / cnt[j]
    return c


def main(path, b, gm):
    data = np.genfromtxt(path, delimiter=",", skip_header=1)
    x, y = data[:, :-1], data[:, -1].astype(int)
    sd = x.std(0)
    sd[sd == 0] = 1
    x = (x - x.mean(0)) / sd
    classes = y.max() + 1
    g = gm / x.shape[1]
    res = {}
    whole = KMeans(b, n_init=1, random_state=1).fit(x).cluster_centers_
    for seed in range(1, 6):
        p = np.random.default_rng(seed).permutation(len(x))
        h = len(x) // 2
        for name, lm in (("first B", x[p[:b]]), ("MacQueen, first half", macqueen(x[p[:h]], b)),
                         ("Lloyd, first half", KMeans(b, n_init=1, random_state=1).fit(x[p[:h]]).cluster_centers_),
                         ("Lloyd, whole file (oracle)", whole)):
            ev, v = np.linalg.eigh(rbf(lm, lm, g) + 1e-8 * np.eye(b))
            m = v / np.sqrt(np.maximum(ev, 1e-10))
            z = np.hstack([rbf(x[p], lm, g) @ m, np.ones((len(x), 1))])
            for mode in ("squared", "hinge", "per-class"):
                res.setdefault((name, mode), []).append(one_pass(z, y[p], classes, mode)[h:].mean())
            clf = LinearSVC(C=10, max_iter=20000).fit(z[:h, :-1], y[p][:h])
            res.setdefault((name, "batch sq. hinge, first half"), []).append((clf.predict(z[h:, :-1]) == y[p][h:]).mean())
    for (name, mode), v in res.items():
        print(f"{path} B {b} gamma {gm}/d, {name}, {mode}: {np.mean(v):.4f} ({min(v):.4f}-{max(v):.4f})")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))
