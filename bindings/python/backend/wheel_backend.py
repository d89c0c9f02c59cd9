"""A PEP 517 build backend for this pure-Python package, using only the standard library.

It builds a wheel of src/extension_runtime (every file, py.typed included) with the metadata of
pyproject.toml's [project] table, and an sdist of the source tree. It exists so that
`pip install ./bindings/python` needs nothing from the network.
"""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "extension_runtime"


def _project():
    path = os.path.join(ROOT, "pyproject.toml")
    if tomllib is not None:
        with open(path, "rb") as f:
            return tomllib.load(f)["project"]
    project, section = {}, None
    with open(path) as f:  # the few plain `key = "value"` lines this backend needs
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[project]" and " = \"" in line:
                key, value = line.split(" = ", 1)
                project[key] = value.strip('"')
    return project


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}", f"Requires-Python: {p.get('requires-python', '>=3')}"]
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    readme = os.path.join(ROOT, "README.md")
    text = open(readme).read() if os.path.exists(readme) else ""
    lines.append("Description-Content-Type: text/markdown")
    return "\n".join(lines) + "\n\n" + text


def _dist_info():
    p = _project()
    return f"{p['name'].replace('-', '_')}-{p['version']}"


def get_requires_for_build_wheel(config_settings=None):
    """Nothing beyond the standard library."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """Nothing beyond the standard library."""
    return []


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Writes the wheel into `wheel_directory` and returns its file name."""
    base = _dist_info()
    name = f"{base}-py3-none-any.whl"
    files = []
    source = os.path.join(ROOT, "src", PACKAGE)
    for directory, _, names in os.walk(source):
        for n in sorted(names):
            if n.endswith(".pyc"):
                continue
            full = os.path.join(directory, n)
            files.append((os.path.relpath(full, os.path.join(ROOT, "src")), open(full, "rb").read()))
    files.append((f"{base}.dist-info/METADATA", _metadata().encode()))
    files.append((f"{base}.dist-info/WHEEL",
                  b"Wheel-Version: 1.0\nGenerator: wheel_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    files.append((f"{base}.dist-info/top_level.txt", f"{PACKAGE}\n".encode()))
    record = [_record_line(n, d) for n, d in files] + [f"{base}.dist-info/RECORD,,"]
    files.append((f"{base}.dist-info/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for n, d in files:
            wheel.writestr(n, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    """Writes a source archive of this directory into `sdist_directory`."""
    base = _dist_info()
    name = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as archive:
        for entry in ["pyproject.toml", "README.md", "backend", "src"]:
            archive.add(os.path.join(ROOT, entry), arcname=f"{base}/{entry}",
                        filter=lambda t: None if "__pycache__" in t.name else t)
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return name
