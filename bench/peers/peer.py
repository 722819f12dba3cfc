#!/usr/bin/env python3
"""scikit-learn peer of kpcastream: Nystroem(B) + IncrementalPCA(k), and batch KernelPCA.

    peer.py all OUTDIR KPCASTREAM_BIN SIMILARITY_BIN   write the data, run both sides, print the tables
    peer.py kpca CSV N K GAMMA                         (internal) fit batch KernelPCA on the first N rows

Both sides read the same CSV rows. Similarity to batch kernel PCA is the mean squared cosine of the
principal angles between the model's and the reference's k-dimensional feature-space subspaces, the
definition of learners/kpcaeval, computed here with numpy from Gram matrices (and, as a cross-check,
by the Go tool on every model, which this script exports in kpcastream's model format).
"""
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


def rbf(x, y, g):
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2 * x @ y.T
    return np.exp(-g * np.maximum(sq, 0))


def similarity(z, a, x, g, k):
    """Mean squared cosine of the principal angles between span{Φ_Z a_i} and batch KPCA of x."""
    kk = rbf(x, x, g)
    kc = kk - kk.mean(0)[None, :] - kk.mean(1)[:, None] + kk.mean()
    w, u = np.linalg.eigh(kc)
    idx = np.argsort(w)[::-1][:k]
    lam = w[idx]
    keep = lam > 1e-12 * lam[0]
    alpha = u[:, idx][:, keep] / np.sqrt(lam[keep])          # α_iᵀ K̃ α_i = 1
    kxz = rbf(x, z, g)
    kxz -= kxz.mean(0)[None, :]                               # centre on the x side
    utw = alpha.T @ kxz @ a
    wtw = a.T @ rbf(z, z, g) @ a
    e, v = np.linalg.eigh((wtw + wtw.T) / 2)
    inv = np.where(e > 1e-12 * e.max(), 1 / np.sqrt(np.maximum(e, 1e-300)), 0)
    m = utw @ (v * inv) @ v.T
    s = np.clip(np.linalg.svd(m, compute_uv=False), 0, 1)
    cos = np.zeros(k)
    cos[: len(s)] = s[:k]
    return float((cos ** 2).mean())


def load(path):
    with open(path) as f:
        head = f.readline().strip().split(",")
    return head, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def write(path, head, x):
    with open(path, "w") as f:
        f.write(",".join(head) + "\n")
        for row in x:
            f.write(",".join(repr(float(v)) for v in row) + "\n")


def make_data(out, datadir):
    head, w = load(os.path.join(datadir, "wine.csv"))
    feats = [i for i, h in enumerate(head) if h != "label"]
    x = w[:, feats]
    x = (x - x.mean(0)) / x.std(0)
    x = x[np.random.default_rng(0).permutation(len(x))]       # the file is sorted by class
    write(os.path.join(out, "wine_std.csv"), [head[i] for i in feats], x)
    rng = np.random.default_rng(64)
    n, d = 10000, 64
    u = rng.standard_normal((n, 4))
    w1 = rng.standard_normal((4, 16))
    w2 = rng.standard_normal((16, d)) / 4
    x = np.tanh(u @ w1) @ w2 + 0.1 * rng.standard_normal((n, d))
    x = (x - x.mean(0)) / x.std(0)
    hd = ["x%d" % j for j in range(d)]
    write(os.path.join(out, "synth64.csv"), hd, x)
    write(os.path.join(out, "synth64_eval.csv"), hd, x[-2000:])
    for m in (1000, 2000, 5000, 10000):
        write(os.path.join(out, "synth64_%d.csv" % m), hd, x[:m])


def peer_stream(x, b, k, g, bs):
    """Nystroem(B) fitted on the first B rows, then IncrementalPCA(k).partial_fit over all rows in
    batches of bs (bs=1: one sample at a time, buffered until k are there). Returns samples/s,
    the model (Z, A, offsets, eigenvalues)."""
    from sklearn.decomposition import IncrementalPCA
    from sklearn.kernel_approximation import Nystroem
    nys = Nystroem(kernel="rbf", gamma=g, n_components=b, random_state=0).fit(x[:b])
    ipca = IncrementalPCA(n_components=k)
    t0 = time.perf_counter()
    if bs == 1:
        buf = []
        for i in range(len(x)):
            buf.append(nys.transform(x[i:i + 1]))
            if len(buf) >= k:
                ipca.partial_fit(np.vstack(buf))
                buf = []
    else:
        for i in range(0, len(x), bs):
            chunk = x[i:i + bs]
            if len(chunk) < k:
                break
            ipca.partial_fit(nys.transform(chunk))
    dt = time.perf_counter() - t0
    z = nys.components_
    a = nys.normalization_.T @ ipca.components_.T               # w_i = Φ_Z Nᵀ v_i
    off = ipca.components_ @ ipca.mean_
    return len(x) / dt, z, a, off, ipca.explained_variance_


def export(path, z, a, off, eig, g, seen):
    m = {"format": "kpcastream.model/v1", "learner": "ikpca", "kernel": {"name": "rbf", "gamma": g},
         "points": z.tolist(), "coefficients": a.tolist(), "offsets": off.tolist(),
         "eigenvalues": [float(max(e, 1e-300)) for e in eig], "seen": seen}
    with open(path, "w") as f:
        json.dump(m, f)


def model_za(path):
    with open(path) as f:
        m = json.load(f)
    return np.array(m["points"]), np.array(m["coefficients"])


def timed_child(cmd):
    """Runs cmd under GNU time; returns (wall seconds, peak RSS MiB of cmd, stdout). The peak comes
    from time(1), whose own small fork is what cmd inherits (a fork of this python process would
    report python's RSS as the child's peak)."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M"] + cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (cmd, p.returncode, p.stderr))
    kb = [l for l in p.stderr.splitlines() if l.startswith("maxrss_kb=")][-1]
    return dt, int(kb.split("=")[1]) / 1024, p.stdout


def main_all(out, kbin, simbin):
    datadir = os.environ.get("KPCASTREAM_DATA", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "data"))
    os.makedirs(out, exist_ok=True)
    make_data(out, datadir)
    import sklearn
    print("scikit-learn %s, numpy %s" % (sklearn.__version__, np.__version__))
    sets = [("wine_std", "wine_std.csv", "wine_std.csv", 64, 4), ("synth64", "synth64.csv", "synth64_eval.csv", 128, 8)]
    print("\n| data | B | k | side | samples/s | similarity (numpy) | similarity (Go kpcaeval) |")
    print("|---|---|---|---|---|---|---|")
    for name, stream, evalf, b, k in sets:
        _, x = load(os.path.join(out, stream))
        _, xe = load(os.path.join(out, evalf))
        g = 1.0 / x.shape[1]
        rows = []
        models = []
        for bs in (1, 10, 100):
            rate, z, a, off, eig = peer_stream(x, b, k, g, bs)
            path = os.path.join(out, "%s_peer_bs%d.json" % (name, bs))
            export(path, z, a, off, eig, g, len(x))
            models.append(path)
            rows.append(("Nystroem+IncrementalPCA, batches of %d%s" % (bs, " (buffered to k)" if bs == 1 else ""), rate,
                         similarity(z, a, xe, g, k)))
        ours = os.path.join(out, "%s_ours.json" % name)
        dt, rss, _ = timed_child([kbin, "replay", "--in", os.path.join(out, stream), "--learner", "ikpca", "--budget", str(b),
                                  "--components", str(k), "--gamma", repr(g), "--model-out", ours, "--progress", "0"])
        z, a = model_za(ours)
        rows.append(("kpcastream replay, ikpca, one at a time (whole process: start, CSV parse, learn)", len(x) / dt, similarity(z, a, xe, g, k)))
        models.append(ours)
        ours10 = os.path.join(out, "%s_ours_passes10.json" % name)
        dt, rss, _ = timed_child([kbin, "replay", "--in", os.path.join(out, stream), "--learner", "ikpca", "--budget", str(b),
                                  "--components", str(k), "--gamma", repr(g), "--model-out", ours10, "--progress", "0", "--passes", "10"])
        z, a = model_za(ours10)
        rows.append(("kpcastream replay, ikpca, one at a time, 10 passes (steady-state rate)", 10 * len(x) / dt, similarity(z, a, xe, g, k)))
        models.append(ours10)
        _, _, sims = timed_child([simbin, "--in", os.path.join(out, evalf)] + models)
        gos = [json.loads(l)["similarity"] for l in sims.strip().splitlines()]
        for (side, rate, sim), gsim in zip(rows, gos):
            print("| %s | %d | %d | %s | %.0f | %.4f | %.4f |" % (name, b, k, side, rate, sim, gsim))
    print("\nBatch KernelPCA (sklearn, rbf, k=8, first N rows of synth64) vs kpcastream replay (ikpca B=128, k=8) on the same rows")
    print("\n| N | KernelPCA fit s | KernelPCA peak RSS MiB | replay s | replay peak RSS MiB |")
    print("|---|---|---|---|---|")
    for n in (1000, 2000, 5000, 10000):
        f = os.path.join(out, "synth64_%d.csv" % n)
        dt, rss, fit = timed_child([sys.executable, __file__, "kpca", f, str(n), "8", repr(1 / 64)])
        rdt, rrss, _ = timed_child([kbin, "replay", "--in", f, "--learner", "ikpca", "--budget", "128", "--components", "8",
                                    "--gamma", repr(1 / 64), "--model-out", os.path.join(out, "replay_%d.json" % n), "--progress", "0"])
        print("| %d | %s | %.0f | %.2f | %.0f |" % (n, fit.strip(), rss, rdt, rrss))


def main_kpca(path, n, k, g):
    from sklearn.decomposition import KernelPCA
    _, x = load(path)
    x = x[:n]
    t0 = time.perf_counter()
    KernelPCA(n_components=k, kernel="rbf", gamma=g).fit(x)
    print("%.2f" % (time.perf_counter() - t0))


if __name__ == "__main__":
    if sys.argv[1] == "all":
        main_all(*sys.argv[2:5])
    elif sys.argv[1] == "kpca":
        main_kpca(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
