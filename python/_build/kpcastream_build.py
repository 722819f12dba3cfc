"""A PEP 517 build backend for python/ that needs only the standard
library: ``pip install ./python`` builds the wheel here, without
downloading setuptools or anything else.

It builds a pure-Python wheel of the modules listed in pyproject.toml's
[tool.kpcastream-build] table, with the metadata of its [project] table
(name, version, description, readme, requires-python, dependencies,
scripts), and an sdist of the same files."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project():
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli as tomllib
        except ImportError:
            raise RuntimeError("building kpcastream needs Python >= 3.11 (tomllib) or the tomli package") from None
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        doc = tomllib.load(f)
    return doc["project"], doc.get("tool", {}).get("kpcastream-build", {})


def _dist_name(project):
    return project["name"].replace("-", "_")


def _metadata(project):
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}"]
    if "description" in project:
        lines.append(f"Summary: {project['description']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    for d in project.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, project["readme"]), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _entry_points(project):
    scripts = project.get("scripts", {})
    if not scripts:
        return ""
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())


def _files(tool):
    return [m + ".py" for m in tool.get("modules", [])]


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def _dist_info(project):
    dist = f"{_dist_name(project)}-{project['version']}.dist-info"
    return dist, {
        "METADATA": _metadata(project).encode(),
        "WHEEL": b"Wheel-Version: 1.0\nGenerator: kpcastream_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "entry_points.txt": _entry_points(project).encode(),
    }


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project, _ = _project()
    dist, files = _dist_info(project)
    os.makedirs(os.path.join(metadata_directory, dist), exist_ok=True)
    for name, data in files.items():
        with open(os.path.join(metadata_directory, dist, name), "wb") as f:
            f.write(data)
    return dist


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, tool = _project()
    name = f"{_dist_name(project)}-{project['version']}-py3-none-any.whl"
    dist, meta = _dist_info(project)
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path in _files(tool):
            with open(os.path.join(HERE, path), "rb") as f:
                data = f.read()
            z.writestr(path, data)
            record.append(_record_line(path, data))
        for fname, data in meta.items():
            z.writestr(f"{dist}/{fname}", data)
            record.append(_record_line(f"{dist}/{fname}", data))
        record.append(f"{dist}/RECORD,,")
        z.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    project, tool = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    name = base + ".tar.gz"
    paths = ["pyproject.toml", project.get("readme", ""), "_build/kpcastream_build.py", "test_kpcastream.py"] + _files(tool)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for p in paths:
            if p:
                t.add(os.path.join(HERE, p), arcname=f"{base}/{p}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(project).encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return name
