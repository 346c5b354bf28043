"""A PEP 517 build backend in the standard library alone, so that `pip install ./sdks/python` needs
no download: with build isolation pip would otherwise fetch setuptools and wheel from PyPI first.

It packs `dbaas/` (Python files only) into a pure-Python wheel; `build_editable` (PEP 660, for
`pip install -e`) makes a wheel whose .pth file puts this directory on sys.path instead.
"""

from __future__ import annotations

import base64
import hashlib
import io
import tarfile
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "dbaas"


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _metadata() -> str:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"Requires-Python: {project['requires-python']}",
        "Description-Content-Type: text/markdown",
    ]
    return "\n".join(lines) + "\n\n" + (ROOT / project["readme"]).read_text()


def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / PACKAGE).rglob("*.py") if "__pycache__" not in p.parts)


def _wheel(directory: str, files: dict[str, bytes]) -> str:
    project = _project()
    dist_info = f"{project['name']}-{project['version']}.dist-info"
    files = {
        **files,
        f"{dist_info}/METADATA": _metadata().encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: dbaas_build\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = io.StringIO()
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.write(f"{name},sha256={digest},{len(data)}\n")
    record.write(f"{dist_info}/RECORD,,\n")
    files[f"{dist_info}/RECORD"] = record.getvalue().encode()
    name = f"{project['name']}-{project['version']}-py3-none-any.whl"
    with zipfile.ZipFile(Path(directory) / name, "w", zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            wheel.writestr(path, data)
    return name


def build_wheel(wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None) -> str:
    return _wheel(wheel_directory, {p.relative_to(ROOT).as_posix(): p.read_bytes() for p in _sources()})


def build_editable(wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None) -> str:
    return _wheel(wheel_directory, {f"_{PACKAGE}_editable.pth": f"{ROOT}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: dict | None = None) -> str:
    project = _project()
    base = f"{project['name']}-{project['version']}"
    with tarfile.open(Path(sdist_directory) / f"{base}.tar.gz", "w:gz") as sdist:
        for path in [ROOT / "pyproject.toml", ROOT / project["readme"], Path(__file__), *_sources()]:
            sdist.add(path, arcname=f"{base}/{path.relative_to(ROOT).as_posix()}")
        info = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(info)
        sdist.addfile(entry, io.BytesIO(info))
    return f"{base}.tar.gz"
