"""Tests of python/kpcastream.py on the repository's golden files
(codec/testdata). Run: python3 -m unittest discover -s python -v
The comparison with the Go implementation is cmd/kpcastream's TestPython*."""
import io
import json
import math
import os
import subprocess
import sys
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# KPCASTREAM_INSTALLED=1 tests the module pip installed (.ci/run: pip
# install ./python), not the file beside this one.
INSTALLED = os.environ.get("KPCASTREAM_INSTALLED") == "1"
if INSTALLED:
    sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]

import kpcastream  # noqa: E402

ROOT = os.path.dirname(HERE)
GOLDEN = os.path.join(ROOT, "codec", "testdata")
KERNELS = ["linear", "rbf", "laplacian", "poly", "sigmoid"]


def load_json(path):
    with open(path) as f:
        return json.load(f)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def kernel_by_hand(kern, p, x):
    """k(p, x) written out, one pair at a time (independent of the module's numpy)."""
    dot = sum(a * b for a, b in zip(p, x))
    name = kern["name"]
    if name == "linear":
        return dot
    if name == "rbf":
        return math.exp(-kern["gamma"] * sum((a - b) ** 2 for a, b in zip(p, x)))
    if name == "laplacian":
        return math.exp(-kern["gamma"] * sum(abs(a - b) for a, b in zip(p, x)))
    if name == "poly":
        return (kern["gamma"] * dot + kern["coef0"]) ** kern["degree"]
    return math.tanh(kern["gamma"] * dot + kern["coef0"])


class ModelTest(unittest.TestCase):
    def test_golden_models_transform(self):
        rng = np.random.default_rng(1)
        for name in KERNELS:
            path = os.path.join(GOLDEN, f"model_v1_{name}.json")
            doc = load_json(path)
            m = kpcastream.load_model(path)
            self.assertEqual(m.kernel["name"], name)
            X = rng.normal(size=(7, m.dim))
            Z = m.transform(X)
            self.assertEqual(Z.shape, (7, m.components))
            for i, x in enumerate(X):
                for c in range(m.components):
                    want = sum(doc["coefficients"][j][c] * kernel_by_hand(doc["kernel"], p, x) for j, p in enumerate(doc["points"])) - doc["offsets"][c]
                    self.assertAlmostEqual(Z[i, c], want, delta=1e-12 * max(1.0, abs(want)), msg=f"{name} row {i} z{c + 1}")
            np.testing.assert_allclose(m.transform(X[0]), Z[:1])  # one row

    def test_blocks_do_not_change_results(self):
        m = kpcastream.load_model(os.path.join(GOLDEN, "model_v1_rbf.json"))
        X = np.random.default_rng(2).normal(size=(50, m.dim))
        old = kpcastream._BLOCK_FLOATS
        try:
            kpcastream._BLOCK_FLOATS = 1  # one row per block
            small = m.transform(X)
        finally:
            kpcastream._BLOCK_FLOATS = old
        np.testing.assert_array_equal(small, m.transform(X))

    def test_classifier(self):
        doc = load_json(os.path.join(GOLDEN, "model_v1_rbf.json"))
        p = len(doc["points"])
        doc["classifier"] = {"classes": ["a", "b", "c"], "alpha": [[1, 0, 0.5]] * p, "bias": [0, 0.1, -5]}
        m = kpcastream.load_model(doc)
        X = np.random.default_rng(3).normal(size=(5, m.dim))
        K = np.array([[kernel_by_hand(doc["kernel"], pt, x) for pt in doc["points"]] for x in X])
        s = m.scores(X)
        np.testing.assert_allclose(s[:, 0], K.sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(s[:, 1], 0.1, rtol=1e-12)
        self.assertEqual(m.predict(X), ["a" if a > 0.1 else "b" for a in s[:, 0]])
        doc["classifier"]["bias"] = [0, 0, 0]
        doc["classifier"]["alpha"] = [[0, 0, 0]] * p
        self.assertEqual(kpcastream.load_model(doc).predict(X), ["a"] * 5)  # ties: the first class

    def test_no_classifier(self):
        m = kpcastream.load_model(os.path.join(GOLDEN, "model_v1_linear.json"))
        with self.assertRaisesRegex(kpcastream.ModelError, "no classifier section"):
            m.predict(np.zeros((1, m.dim)))

    def test_bad_exports(self):
        good = load_json(os.path.join(GOLDEN, "model_v1_poly.json"))
        cases = [
            ({"format": "kpcastream.model/v2"}, "format"),
            ({"kernel": {"name": "rbf"}}, "kernel rbf needs gamma"),
            ({"kernel": {"name": "linear", "gamma": 1}}, "kernel linear has no gamma"),
            ({"kernel": {"name": "cubic"}}, "unknown kernel"),
            ({"offsets": [0.0]}, "coefficients: rows have 2 values, want 1"),
            ({"points": [[1, 2, 3], [1, 2]]}, "points"),
            ({"eigenvalues": [1.0]}, "eigenvalues: length 1, want 2"),
            ({"coefficients": [[1, 2]]}, "coefficients: 1 rows, want one per point"),
            ({"classifier": {"classes": ["a"], "alpha": [[1], [1]], "bias": [0]}}, "2 or more"),
            ({"extra": 1}, "unknown fields"),
        ]
        for change, msg in cases:
            doc = dict(good, **change)
            with self.assertRaisesRegex(kpcastream.ModelError, msg, msg=str(change)):
                kpcastream.load_model(doc)
        with self.assertRaisesRegex(kpcastream.ModelError, "not a model export"):
            kpcastream.load_model(b"{not json")
        m = kpcastream.load_model(good)
        with self.assertRaisesRegex(ValueError, "the model takes 3"):
            m.transform(np.zeros((2, 4)))


class OutputTest(unittest.TestCase):
    def test_golden_outputs_agree(self):
        js = read_bytes(os.path.join(GOLDEN, "output_v1.json"))
        mp = read_bytes(os.path.join(GOLDEN, "output_v1.msgpack"))
        a, b = kpcastream.decode_output(js), kpcastream.decode_output(mp)
        self.assertEqual(kpcastream.decode_output(js, "json")["seq"], 1099511627776)
        self.assertEqual(set(a), set(b))
        for k in a:
            if k == "z":
                np.testing.assert_array_equal(a[k], b[k])
            else:
                self.assertEqual(a[k], b[k], k)
        self.assertEqual(a["key"], "vib.sensor-7")
        self.assertEqual(list(a["z"]), [0.125, -3.5e-09, 2.5e21, 0.0])
        self.assertEqual(b["id"], 'obs-"7"\n\ufffd')  # invalid UTF-8 in msgpack: U+FFFD, as JSON

    def test_bad_outputs(self):
        for data, msg in [(b"[1]", "neither"), (b'{"id":"x"}', "has no key"), (b"\x93\x01\x02\x03", "neither"),
                          (b"{", "not JSON"), (b"\x81\xa1z", "not msgpack")]:
            with self.assertRaisesRegex(kpcastream.OutputError, msg, msg=repr(data)):
                kpcastream.decode_output(data)


class PackageTest(unittest.TestCase):
    def test_installed_where_asked(self):
        where = os.path.dirname(os.path.abspath(kpcastream.__file__))
        if INSTALLED:
            self.assertNotEqual(where, HERE, "KPCASTREAM_INSTALLED=1 but the module beside the tests was imported")
        else:
            self.assertEqual(where, HERE)

    def test_version_is_pyproject(self):
        try:
            import tomllib
        except ImportError:
            self.skipTest("tomllib needs Python 3.11")
        with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        self.assertEqual(project["version"], kpcastream.__version__)
        self.assertEqual(project["scripts"]["kpcastream-py"], "kpcastream:main")


class FormatTest(unittest.TestCase):
    def test_numbers_as_go_writes_them(self):
        # strconv.FormatFloat(v, 'g', -1, 64) of each, as "kpcastream project" writes them.
        for v, go in [(1234567.5, "1.2345675e+06"), (123456.5, "123456.5"), (1e8, "1e+08"), (0.0001, "0.0001"),
                      (0.00001234, "1.234e-05"), (1.0, "1"), (-0.0, "-0"), (1.5e300, "1.5e+300"), (100000.0, "100000"),
                      (1e21, "1e+21"), (3e-5, "3e-05"), (0.1, "0.1"), (-2.5, "-2.5"), (5e-324, "5e-324"),
                      (0.30000000000000004, "0.30000000000000004"), (999999.9999, "999999.9999")]:
            self.assertEqual(kpcastream.format_float(v), go, v)
            self.assertEqual(float(kpcastream.format_float(v)), v)

    def test_csv_layout_is_gos(self):
        doc = load_json(os.path.join(GOLDEN, "model_v1_rbf.json"))
        doc["classifier"] = {"classes": ["a", "b,c"], "alpha": [[1, 0]] * len(doc["points"]), "bias": [0, 0.1]}
        m = kpcastream.load_model(doc)
        X = np.random.default_rng(4).normal(size=(2, m.dim))
        w = io.StringIO()
        kpcastream.write_csv(w, m, X, ids=["x", "y"], classify=True)
        lines = w.getvalue().splitlines()
        ks = ",".join(f"z{i + 1}" for i in range(m.components))
        self.assertEqual(lines[0], f'id,row,{ks},pred,score_a,"score_b,c"')
        self.assertTrue(lines[1].startswith("x,0,") and lines[2].startswith("y,1,"), lines)
        self.assertEqual(len(lines[1].split(",")), 2 + m.components + 1 + 2, lines[1])


class CommandTest(unittest.TestCase):
    def run_py(self, *args):
        if INSTALLED and args[0] == "kpcastream.py":
            args = ("-m", "kpcastream") + args[1:]  # the installed module, as its entry point runs it
        return subprocess.run([sys.executable, *args], cwd=os.sep if INSTALLED else HERE, capture_output=True, text=True, timeout=60)

    def test_example_runs(self):
        csvf = os.path.join(ROOT, "testdata", "data", "iris.csv")
        # A 4-column model: the golden rbf model's kernel with iris-sized points.
        doc = load_json(os.path.join(GOLDEN, "model_v1_rbf.json"))
        doc["points"] = [[5.0, 3.4, 1.5, 0.2], [6.3, 2.9, 5.6, 1.8]]
        path = os.path.join(self.tmp, "model.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        r = self.run_py(os.path.join(HERE, "example.py"), path, csvf, os.path.join(GOLDEN, "output_v1.json"), os.path.join(GOLDEN, "output_v1.msgpack"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("150 rows of 4 -> 2 components", r.stdout)
        self.assertEqual(r.stdout.count("key vib.sensor-7 seq 1099511627776"), 2, r.stdout)

    def test_project_errors_are_clear(self):
        csvf = os.path.join(ROOT, "testdata", "data", "iris.csv")
        r = self.run_py("kpcastream.py", "project", "--model", os.path.join(GOLDEN, "model_v1_rbf.json"), "--in", csvf)
        self.assertEqual(r.returncode, 1)
        self.assertIn("has 5 columns after --drop/--id-column, the model 3", r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def setUp(self):
        import tempfile
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()


if __name__ == "__main__":
    unittest.main()
