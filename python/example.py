"""The README's Python example: apply a model export to a CSV file and
decode output messages of both encodings. CI runs it (python/test_kpcastream.py).

    python3 python/example.py MODEL.json DATA.csv [OUTPUT_MESSAGE_FILE...]
"""
import sys

import numpy as np

import kpcastream


def main(model_path, csv_path, *outputs):
    m = kpcastream.load_model(model_path)
    with open(csv_path, newline="") as f:
        header = f.readline()
        f.seek(0)
        X, _, _ = kpcastream.read_csv(f, drop=[c for c in ("label", "phase") if c in header.strip().split(",")])
    Z = m.transform(X)  # n x k, as `kpcastream project`
    print(f"{m.learner} model, kernel {m.kernel['name']}: {X.shape[0]} rows of {m.dim} -> {m.components} components")
    print("first row:", np.array2string(Z[0], precision=4))
    if m.classes is not None:
        print("predicted classes of the first 5 rows:", m.predict(X[:5]))
    for path in outputs:
        with open(path, "rb") as f:
            out = kpcastream.decode_output(f.read())  # JSON or msgpack, told apart by the first byte
        print(f"{path}: key {out['key']} seq {out['seq']} z {np.array2string(out['z'], precision=4)} spe {out['spe']:.4g}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    try:
        sys.exit(main(*sys.argv[1:]))
    except (ValueError, OSError) as e:  # kpcastream.ModelError and OutputError are ValueErrors
        print(f"example.py: {e}", file=sys.stderr)
        sys.exit(1)
