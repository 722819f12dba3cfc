"""kpcastream in Python: apply a model export and decode outputs.

One module, numpy and msgpack only (Debian: python3-numpy python3-msgpack).
Install it with ``pip install ./python`` (pyproject.toml; nothing is
downloaded when numpy and msgpack are installed), or copy it next to your
code, or put python/ on PYTHONPATH.

Model export (README, "The model export format"): a JSON object with
"format": "kpcastream.model/v1", written by ``kpcastream replay --model-out``
and by a worker's model endpoint. Component i of a row x is

    z_i(x) = sum_j coefficients[j][i] * k(points[j], x) - offsets[i]

and, when the export has a "classifier" section (a pipeline's classifier
stage, ``replay --label``), the score of class c is

    s_c(x) = sum_j alpha[j][c] * k(points[j], x) + bias[c]

with the prediction the class of the largest score (the first on ties).
The kernels are scikit-learn's: linear x.y, rbf exp(-gamma |p-x|^2),
laplacian exp(-gamma sum |p-x|), poly (gamma x.y + coef0)^degree and
sigmoid tanh(gamma x.y + coef0). With a "preprocess" section
({"standardize": {"mean": [...], "scale": [...]}}) the model applies to
x' = (x - mean)/scale, which transform, scores and predict compute first;
a "monitor" section (the key's control limits: level, learn, spe_limit,
t2_limit) is kept as the monitor attribute.

    >>> m = kpcastream.load_model("model.json")
    >>> z = m.transform(X)            # X: n x d  ->  n x k
    >>> m.predict(X)                  # class names (needs a classifier)

Outputs (README, "Outputs"): one message per projected observation on
the output subject, JSON or msgpack (the pipeline's output.encoding), with
the fields id, key, seq, ts, z, spe, t2, explained, basis_version and, when
present, y, meta, pred and scores.

    >>> out = kpcastream.decode_output(msg.data)   # either encoding
    >>> out["z"]                                   # numpy array

Command line (kpcastream-py once installed, else python3 kpcastream.py;
the CSV of ``kpcastream project`` and ``kpcastream predict``, column for
column, the numbers written as Go writes them):

    kpcastream-py project --model model.json --in data.csv [--drop label] [--id-column C] [--classify] [--out F]
    kpcastream-py predict --model model.json --in data.csv [--drop label]   # row,z1..zk,pred,score_<class>...
    kpcastream-py decode FILE...      # one output per file, printed as JSON
"""

import csv
import io
import json
import math
import sys

import msgpack
import numpy as np

FORMAT = "kpcastream.model/v1"

__all__ = ["FORMAT", "ModelError", "OutputError", "Model", "load_model", "decode_output", "read_csv", "write_csv",
           "format_float", "main"]

__version__ = "0.1.0"


class ModelError(ValueError):
    """A model export that cannot be applied; the message names the field."""


class OutputError(ValueError):
    """An output message that is not a kpcastream output."""


# kernel name -> (required parameters, allowed parameters)
_KERNELS = {
    "linear": ((), ()),
    "rbf": (("gamma",), ("gamma",)),
    "laplacian": (("gamma",), ("gamma",)),
    "poly": (("gamma", "degree", "coef0"), ("gamma", "degree", "coef0")),
    "sigmoid": (("gamma", "coef0"), ("gamma", "coef0")),
}

# Rows per block when evaluating kernels: bounds the n x p x d temporary of
# the distance kernels to about 4 million floats whatever n is.
_BLOCK_FLOATS = 1 << 22


def _matrix(v, what, cols=None):
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ModelError(f"{what}: not a matrix of numbers ({e})") from None
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ModelError(f"{what}: want a non-empty list of equal-length rows, got shape {a.shape}")
    if cols is not None and a.shape[1] != cols:
        raise ModelError(f"{what}: rows have {a.shape[1]} values, want {cols}")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{what}: holds a non-finite number")
    return a


def _vector(v, what, n):
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise ModelError(f"{what}: not a list of numbers ({e})") from None
    if a.ndim != 1 or a.shape[0] != n:
        raise ModelError(f"{what}: length {a.size if a.ndim == 1 else a.shape}, want {n}")
    if not np.all(np.isfinite(a)):
        raise ModelError(f"{what}: holds a non-finite number")
    return a


def _number(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ModelError(f"{what}: want a finite number, got {v!r}")
    return float(v)


class Model:
    """A validated kpcastream.model/v1 export.

    Attributes: learner, kernel (dict as in the file), points (p x d),
    coefficients (p x k), offsets (k), eigenvalues (k), seen, and, with a
    classifier section, classes (list of C names), alpha (p x C) and
    bias (C); classes is None without one.
    """

    def __init__(self, doc):
        if not isinstance(doc, dict):
            raise ModelError(f"model export: want a JSON object, got {type(doc).__name__}")
        if doc.get("format") != FORMAT:
            raise ModelError(f"format {doc.get('format')!r}, want {FORMAT!r}")
        for f in ("kernel", "points", "coefficients", "offsets", "eigenvalues"):
            if f not in doc:
                raise ModelError(f"model export has no {f!r}")
        known = {"format", "learner", "kernel", "points", "coefficients", "offsets", "eigenvalues", "seen", "classifier",
                 "preprocess", "monitor"}
        unknown = sorted(set(doc) - known)
        if unknown:
            raise ModelError(f"model export has unknown fields {unknown} (a newer format? this module reads {FORMAT})")
        self.learner = doc.get("learner", "")
        self.seen = doc.get("seen", 0)
        kern = doc["kernel"]
        if not isinstance(kern, dict) or kern.get("name") not in _KERNELS:
            raise ModelError(f"kernel: unknown kernel {kern.get('name') if isinstance(kern, dict) else kern!r}, want one of {sorted(_KERNELS)}")
        need, allowed = _KERNELS[kern["name"]]
        for k in kern:
            if k != "name" and k not in allowed:
                raise ModelError(f"kernel {kern['name']} has no {k}")
        for k in need:
            if k not in kern:
                raise ModelError(f"kernel {kern['name']} needs {k}")
        self.kernel = dict(kern)
        self.gamma = _number(kern["gamma"], "kernel.gamma") if "gamma" in kern else 0.0
        self.coef0 = _number(kern["coef0"], "kernel.coef0") if "coef0" in kern else 0.0
        self.degree = 0
        if "degree" in kern:
            d = kern["degree"]
            if isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ModelError(f"kernel.degree: want an integer >= 1, got {d!r}")
            self.degree = d
        self.points = _matrix(doc["points"], "points")
        p, d = self.points.shape
        k = len(doc["offsets"]) if isinstance(doc["offsets"], list) else -1
        if k < 1:
            raise ModelError("offsets: want a list of k >= 1 numbers")
        self.coefficients = _matrix(doc["coefficients"], "coefficients", cols=k)
        if self.coefficients.shape[0] != p:
            raise ModelError(f"coefficients: {self.coefficients.shape[0]} rows, want one per point ({p})")
        self.offsets = _vector(doc["offsets"], "offsets", k)
        self.eigenvalues = _vector(doc["eigenvalues"], "eigenvalues", k)
        self.classes = self.alpha = self.bias = None
        c = doc.get("classifier")
        if c is not None:
            if not isinstance(c, dict) or set(c) != {"classes", "alpha", "bias"}:
                raise ModelError("classifier: want an object with classes, alpha and bias")
            classes = c["classes"]
            if not isinstance(classes, list) or len(classes) < 2:
                raise ModelError(f"classifier.classes: want 2 or more class names, got {classes!r}")
            if any(not isinstance(n, str) or n == "" for n in classes) or len(set(classes)) != len(classes):
                raise ModelError(f"classifier.classes: names must be non-empty and distinct, got {classes!r}")
            self.classes = list(classes)
            self.alpha = _matrix(c["alpha"], "classifier.alpha", cols=len(classes))
            if self.alpha.shape[0] != p:
                raise ModelError(f"classifier.alpha: {self.alpha.shape[0]} rows, want one per point ({p})")
            self.bias = _vector(c["bias"], "classifier.bias", len(classes))
        self.mean = self.scale = None
        pp = doc.get("preprocess")
        if pp is not None:
            if not isinstance(pp, dict) or set(pp) != {"standardize"} or not isinstance(pp["standardize"], dict) \
                    or set(pp["standardize"]) != {"mean", "scale"}:
                raise ModelError("preprocess: want {\"standardize\": {\"mean\": [...], \"scale\": [...]}}")
            self.mean = _vector(pp["standardize"]["mean"], "preprocess.standardize.mean", d)
            self.scale = _vector(pp["standardize"]["scale"], "preprocess.standardize.scale", d)
            if not np.all(self.scale > 0):
                raise ModelError("preprocess.standardize.scale: every scale must be > 0")
        self.monitor = None
        mo = doc.get("monitor")
        if mo is not None:
            if not isinstance(mo, dict):
                raise ModelError("monitor: want an object")
            self.monitor = dict(mo)

    @property
    def dim(self):
        """d, the number of values of a row."""
        return self.points.shape[1]

    @property
    def components(self):
        """k, the number of components."""
        return self.offsets.shape[0]

    def _rows(self, X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"rows of {X.shape[-1] if X.ndim else 0} values, the model takes {self.dim}")
        if not np.all(np.isfinite(X)):
            raise ValueError("rows hold a non-finite number")
        if self.mean is not None:
            X = (X - self.mean) / self.scale
        return X

    def kernel_matrix(self, X):
        """K[i, j] = k(points[j], X[i]) for the n x d rows X: n x p."""
        X = self._rows(X)
        P, name, g = self.points, self.kernel["name"], self.gamma
        if name in ("linear", "poly", "sigmoid"):
            dot = X @ P.T
            if name == "linear":
                return dot
            if name == "poly":
                return (g * dot + self.coef0) ** self.degree
            return np.tanh(g * dot + self.coef0)
        n, p, d = X.shape[0], P.shape[0], P.shape[1]
        K = np.empty((n, p))
        step = max(1, _BLOCK_FLOATS // max(1, p * d))
        for i in range(0, n, step):
            diff = X[i:i + step, None, :] - P[None, :, :]
            if name == "rbf":
                K[i:i + step] = np.exp(-g * np.einsum("npd,npd->np", diff, diff))
            else:  # laplacian
                K[i:i + step] = np.exp(-g * np.abs(diff).sum(axis=2))
        return K

    def transform(self, X):
        """The projections of the rows X (n x d, or one row of d): n x k."""
        return self.kernel_matrix(X) @ self.coefficients - self.offsets

    def scores(self, X):
        """The classifier's class scores of the rows X: n x C, columns in
        the order of classes. Needs a classifier section."""
        if self.classes is None:
            raise ModelError("the model export has no classifier section (export it from a pipeline with a classifier stage, or replay --label)")
        return self.kernel_matrix(X) @ self.alpha + self.bias

    def predict(self, X):
        """The predicted class name of each row of X (the first class on ties)."""
        return [self.classes[i] for i in np.argmax(self.scores(X), axis=1)]


def load_model(src):
    """Load a model export from a path, a file object, JSON text or bytes,
    or an already decoded dict."""
    if isinstance(src, Model):
        return src
    if isinstance(src, dict):
        return Model(src)
    if isinstance(src, (bytes, bytearray)):
        src = src.decode("utf-8")
    if isinstance(src, str) and src.lstrip().startswith("{"):
        text = src
    elif hasattr(src, "read"):
        text = src.read()
    else:
        with open(src, "r", encoding="utf-8") as f:
            text = f.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ModelError(f"not a model export: {e}") from None
    return Model(doc)


# ---- outputs -----------------------------------------------------------------

_REQUIRED = ("id", "key", "seq", "ts", "z", "spe", "t2", "explained", "basis_version")


def decode_output(data, encoding=None):
    """Decode one output message (bytes) into a dict with the wire's field
    names; z and scores are numpy arrays. encoding is "json", "msgpack" or
    None to tell them apart by the first byte (a JSON object starts with
    '{', a msgpack map with 0x80-0x8f, 0xde or 0xdf). A null y or pred is
    absent, as in the Go decoder; invalid UTF-8 in a msgpack string is
    replaced by U+FFFD, as the JSON encoder does."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    data = bytes(data)
    if encoding is None:
        head = data.lstrip(b" \t\r\n")[:1]
        if head == b"{":
            encoding = "json"
        elif head and (0x80 <= head[0] <= 0x8F or head[0] in (0xDE, 0xDF)):
            encoding = "msgpack"
        else:
            raise OutputError(f"output starts with {data[:1]!r}: neither a JSON object nor a msgpack map")
    if encoding == "json":
        try:
            out = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise OutputError(f"output: not JSON: {e}") from None
    elif encoding == "msgpack":
        try:
            out = msgpack.unpackb(data, raw=False, unicode_errors="replace", strict_map_key=False)
        except Exception as e:  # msgpack raises several types
            raise OutputError(f"output: not msgpack: {e}") from None
    else:
        raise ValueError(f"encoding {encoding!r}, want 'json', 'msgpack' or None")
    if not isinstance(out, dict):
        raise OutputError(f"output is a {type(out).__name__}, want a map")
    missing = [f for f in _REQUIRED if f not in out]
    if missing:
        raise OutputError(f"output has no {', '.join(missing)}")
    for f in ("y", "pred"):
        if f in out and out[f] is None:
            del out[f]
    for f in ("z", "scores"):
        if f in out:
            try:
                out[f] = np.asarray(out[f], dtype=np.float64).reshape(-1)
            except (TypeError, ValueError):
                raise OutputError(f"output field {f} is not a list of numbers") from None
    return out


# ---- CSV (the rules of kpcastream project) ------------------------------------

def _is_number(s):
    try:
        float(s.strip())
        return True
    except ValueError:
        return False


def read_csv(f, drop=(), id_column=""):
    """Read the numeric rows of a CSV file as ``kpcastream project`` does:
    '#' lines are comments; a first row with no numeric field is the
    header; drop and id_column name columns by header name or 0-based
    index. Returns (X n x d, ids or None, kept column names or None)."""
    rows = [r for r in csv.reader(l for l in f if not l.startswith("#")) if r]
    if not rows:
        raise ValueError("empty CSV file")
    if rows[0] and rows[0][0].startswith("\ufeff"):
        rows[0][0] = rows[0][0][1:]
    header = None
    if not any(_is_number(x) for x in rows[0]):
        header, rows = [c.strip() for c in rows[0]], rows[1:]
    ncols = len(header) if header is not None else (len(rows[0]) if rows else 0)

    def col(name, what):
        if header is not None and name in header:
            return header.index(name)
        try:
            i = int(name)
        except ValueError:
            raise ValueError(f"{what} {name!r}: no such column (columns {header})") from None
        if not 0 <= i < ncols:
            raise ValueError(f"{what} {name!r}: index out of range (0..{ncols - 1})")
        return i

    skip = {col(c, "--drop") for c in drop}
    idi = col(id_column, "--id-column") if id_column else None
    if idi is not None:
        skip.add(idi)
    keep = [i for i in range(ncols) if i not in skip]
    X = np.empty((len(rows), len(keep)))
    ids = [] if idi is not None else None
    for n, r in enumerate(rows):
        if len(r) != ncols:
            raise ValueError(f"row {n}: {len(r)} fields, want {ncols}")
        for j, i in enumerate(keep):
            try:
                v = float(r[i].strip())
            except ValueError:
                raise ValueError(f"row {n}, column {i}: {r[i]!r} is not a number") from None
            if not math.isfinite(v):
                raise ValueError(f"row {n}, column {i}: {r[i]!r} is not finite")
            X[n, j] = v
        if ids is not None:
            ids.append(r[idi])
    names = [header[i] for i in keep] if header is not None else None
    return X, ids, names


def _csv_field(s):
    if any(c in s for c in ',"\n\r'):
        return '"' + s.replace('"', '""') + '"'
    return s


def format_float(v):
    """v as Go's strconv.FormatFloat(v, 'g', -1, 64) writes it (the CSV of
    ``kpcastream project``): the shortest digits that read back as v, in
    exponent form when the exponent is below -4 or 6 and above: 1, 0.5,
    1e-05, 1.234567e+06."""
    v = float(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == 0:
        return "-0" if math.copysign(1, v) < 0 else "0"
    mant, _, e = repr(abs(v)).partition("e")  # the shortest digits that read back as v
    whole, _, frac = mant.partition(".")
    allds = whole + frac
    dp = len(whole) + (int(e) if e else 0)  # the decimal point's place in allds
    stripped = allds.lstrip("0")
    dp -= len(allds) - len(stripped)
    digits = stripped.rstrip("0")
    sign = "-" if v < 0 else ""
    x = dp - 1
    if x < -4 or x >= 6:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if dp <= 0:
        return sign + "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return sign + digits + "0" * (dp - len(digits))
    return sign + digits[:dp] + "." + digits[dp:]


def write_csv(w, model, X, ids=None, classify=False):
    """Write the CSV of ``kpcastream project`` (``--classify``: of
    ``kpcastream predict``) for the rows X to w: the header
    [id,]row,z1,...,zk[,pred,score_<class>...] and one line per row, the
    numbers written as Go writes them (format_float)."""
    if classify and not model.classes:
        raise ModelError("the model has no classifier section (written by replay --label or a pipeline with a classifier stage)")
    head = ["id"] if ids is not None else []
    head += ["row"] + [f"z{i + 1}" for i in range(model.components)]
    if classify:
        head += ["pred"] + [_csv_field("score_" + str(c)) for c in model.classes]
    w.write(",".join(head) + "\n")
    if not len(X):
        return
    Z = model.transform(X)
    S = model.scores(X) if classify else None
    for n, z in enumerate(Z):
        cells = [_csv_field(ids[n])] if ids is not None else []
        cells += [str(n)] + [format_float(v) for v in z]
        if classify:
            s = S[n]
            cells += [_csv_field(str(model.classes[int(np.argmax(s))]))] + [format_float(v) for v in s]
        w.write(",".join(cells) + "\n")


def main(argv=None):
    """The command line (the kpcastream-py entry point, or python3 -m
    kpcastream): project, predict and decode. Returns the exit status."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except (ModelError, OutputError, ValueError, OSError) as e:
        print(f"kpcastream-py: {e}", file=sys.stderr)
        return 1


def _main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="kpcastream-py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, help_ in (("project", "one CSV line per row: [id,]row,z1..zk[,pred,score_<class>...] (as kpcastream project)"),
                        ("predict", "project --classify: [id,]row,z1..zk,pred,score_<class>... (as kpcastream predict)")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--model", required=True, help="model export (JSON)")
        p.add_argument("--in", dest="inp", required=True, help="input CSV (- for stdin)")
        p.add_argument("--out", default="-", help="output CSV file (default stdout)")
        p.add_argument("--drop", default="", help="comma-separated columns to ignore (name or 0-based index)")
        p.add_argument("--id-column", default="", help="column holding each row's id, written first")
        if name == "project":
            p.add_argument("--classify", action="store_true", help="also the classifier's pred and score_<class> columns")
    d = sub.add_parser("decode", help="decode output messages (one per file, JSON or msgpack) and print them as JSON lines")
    d.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    out = sys.stdout
    if a.cmd == "decode":
        for path in a.files:
            with open(path, "rb") as f:
                o = decode_output(f.read())
            for k in ("z", "scores"):
                if k in o:
                    o[k] = [float(v) for v in o[k]]
            out.write(json.dumps(o, ensure_ascii=False, allow_nan=False) + "\n")
        return 0
    m = load_model(a.model)
    drop = [c.strip() for c in a.drop.split(",") if c.strip()]
    f = sys.stdin if a.inp == "-" else open(a.inp, "r", encoding="utf-8", newline="")
    with f:
        X, ids, _ = read_csv(f, drop, a.id_column)
    if X.shape[1] != m.dim:
        raise ValueError(f"{a.inp} has {X.shape[1]} columns after --drop/--id-column, the model {m.dim}")
    w = io.StringIO()
    write_csv(w, m, X, ids if a.id_column else None, classify=a.cmd == "predict" or a.classify)
    if a.out == "-":
        out.write(w.getvalue())
    else:
        with open(a.out, "w", encoding="utf-8", newline="") as f:
            f.write(w.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
