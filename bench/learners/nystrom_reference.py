#!/usr/bin/env python3
"""Batch fits on a fixed span of B landmarks (issue 32 item 4): what a
classifier on B whitened dictionary coordinates can reach at best, by loss.

For each budget B and kernel width gamma = g/d it standardises the rows (as
svm_reference.py), and on each of the same 5 stratified folds (shuffled,
random_state 1) picks B landmarks from the training rows (random, seed 1,
or k-means centres), maps every row to its Nystroem coordinates
z = K_DD^(-1/2) k_D(x), and fits a ridge classifier (alpha 0.1, the
stage's default ridge), a one-vs-rest squared-hinge LinearSVC (C 10) and
the ridge on (z, x). Prints the mean accuracy of each.

    /usr/bin/python3 bench/learners/nystrom_reference.py testdata/data/satellite.csv 200,400
"""
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import LinearSVC


def rbf(a, b, g):
    aa = (a * a).sum(1)[:, None]
    bb = (b * b).sum(1)[None, :]
    return np.exp(-g * np.maximum(aa + bb - 2 * a @ b.T, 0))


def main(path, budgets):
    data = np.genfromtxt(path, delimiter=",", skip_header=1)
    x, y = data[:, :-1], data[:, -1].astype(int)
    sd = x.std(0)
    sd[sd == 0] = 1
    x = (x - x.mean(0)) / sd
    d = x.shape[1]
    folds = StratifiedKFold(5, shuffle=True, random_state=1)
    for b in budgets:
        for gm in (1, 3):
            g = gm / d
            res = {}
            for tr, te in folds.split(x, y):
                rng = np.random.default_rng(1)
                picks = {
                    "random": x[tr][rng.choice(len(tr), b, replace=False)],
                    "kmeans": KMeans(b, n_init=1, random_state=1).fit(x[tr]).cluster_centers_,
                }
                for name, lm in picks.items():
                    w, v = np.linalg.eigh(rbf(lm, lm, g) + 1e-8 * np.eye(b))
                    m = v / np.sqrt(np.maximum(w, 1e-10))
                    ftr, fte = rbf(x[tr], lm, g) @ m, rbf(x[te], lm, g) @ m
                    for cn, clf in (("ridge", RidgeClassifier(alpha=0.1)), ("sq. hinge", LinearSVC(C=10, max_iter=20000))):
                        clf.fit(ftr, y[tr])
                        res.setdefault((name, cn), []).append((clf.predict(fte) == y[te]).mean())
                    clf = RidgeClassifier(alpha=0.1).fit(np.hstack([ftr, x[tr]]), y[tr])
                    res.setdefault((name, "ridge on (z, x)"), []).append((clf.predict(np.hstack([fte, x[te]])) == y[te]).mean())
            cells = ", ".join(f"{k[0]} {k[1]} {np.mean(v):.4f}" for k, v in res.items())
            print(f"{path}: B {b} gamma {gm}/d: {cells}")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], [int(v) for v in sys.argv[2].split(",")])
