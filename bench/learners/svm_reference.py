#!/usr/bin/env python3
"""RBF SVM reference accuracies for the classifier stage (issue 32 item 4).

Not part of CI: it records reference numbers for bench/RESULTS.md. For each
labelled CSV (last column the integer label) it standardises the features
(population std, as the Go evaluation) and reports the 5-fold stratified
cross-validated accuracy (shuffled, random_state 1) of scikit-learn's SVC
with an rbf kernel: at the defaults (C 1, gamma 'scale') and the best of a
small grid C in {1, 10, 100} x gamma in {1/d, 'scale', 3/d, 10/d} (the best of a
grid scored on the same folds is optimistic: an upper reference).

    python3 bench/learners/svm_reference.py testdata/data/satellite.csv ...
"""
import sys

import numpy as np
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.svm import SVC


def load(path):
    data = np.genfromtxt(path, delimiter=",", skip_header=1)
    x, y = data[:, :-1], data[:, -1].astype(int)
    sd = x.std(axis=0)
    sd[sd == 0] = 1
    return (x - x.mean(axis=0)) / sd, y


def main(paths):
    for path in paths:
        x, y = load(path)
        d = x.shape[1]
        folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=1)
        base = cross_val_score(SVC(kernel="rbf"), x, y, cv=folds).mean()
        best, arg = 0.0, None
        for c in (1, 10, 100):
            for g in (1.0 / d, "scale", 3.0 / d, 10.0 / d):
                acc = cross_val_score(SVC(kernel="rbf", C=c, gamma=g), x, y, cv=folds).mean()
                if acc > best:
                    best, arg = acc, (c, g)
        print(f"{path}: n {len(y)} d {d} classes {len(set(y))}: SVC default {base:.4f}, best of grid {best:.4f} at C {arg[0]} gamma {arg[1]}")
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
