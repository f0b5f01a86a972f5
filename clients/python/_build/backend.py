# backend.py - the in-tree PEP 517 build backend of slotd-client: builds the wheel (and sdist) with
# the standard library alone, so `pip install ./clients/python` needs no download.
"""A minimal PEP 517 backend for slotd-client.

pip builds in an isolated environment that would have to download setuptools; this backend
needs nothing beyond the standard library (pyproject.toml: ``requires = []``,
``backend-path = ["_build"]``). The wheel holds ``slotd_client/`` with its generated stubs
(``_gen/``): when they are missing or older than api/, ``gen.sh`` makes them first with Debian's
``/usr/bin/python3`` (python3-grpc-tools), outside pip's isolated environment.
"""

import base64
import hashlib
import io
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent  # clients/python
NAME, DIST = "slotd-client", "slotd_client"
VERSION = "0.2.0"
SUMMARY = "Route-aware Python client for slotd.v1.Metadata, with typed metadata helpers"
REQUIRES = ("grpcio>=1.51", "protobuf>=3.20")
GEN_TIMEOUT_S = 120


def _metadata():
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + VERSION,
             "Summary: " + SUMMARY, "Requires-Python: >=3.9"]
    lines += ["Requires-Dist: " + r for r in REQUIRES]
    return "\n".join(lines) + "\n"


def _ensure_stubs():
    """Generates slotd_client/_gen/ when it is missing or older than the repo's api/."""
    stamp = HERE / DIST / "_gen" / ".stamp"
    api = Path(os.environ.get("SLOTD_API_DIR") or HERE.parent.parent / "api")
    protos = [api / "slotd/v1/metadata.proto", api / "slotd/v1/admin.proto"]
    if stamp.exists() and not all(p.exists() for p in protos):
        return  # an unpacked sdist: the stubs it carries
    if stamp.exists() and all(p.stat().st_mtime <= stamp.stat().st_mtime for p in protos):
        return
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE",
                                                             "PYTHONHOME")}
    subprocess.run(["/bin/sh", str(HERE / "gen.sh")] + ([str(api)] if api.exists() else []),
                   check=True, env=env, timeout=GEN_TIMEOUT_S, stdout=subprocess.DEVNULL)


def _package_files():
    root = HERE / DIST
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(HERE)
        if path.is_file() and "__pycache__" not in rel.parts and path.name != ".lock":
            yield path, rel.as_posix()


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = Path(metadata_directory) / ("%s-%s.dist-info" % (DIST, VERSION))
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata())
    return info.name


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _ensure_stubs()
    name = "%s-%s-py3-none-any.whl" % (DIST, VERSION)
    info = "%s-%s.dist-info" % (DIST, VERSION)
    records = []
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", zipfile.ZIP_DEFLATED) as whl:
        def add(arcname, data):
            whl.writestr(arcname, data)
            records.append(_record_line(arcname, data))
        for path, rel in _package_files():
            add(rel, path.read_bytes())
        add(info + "/METADATA", _metadata().encode())
        add(info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: slotd-client _build\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n")
        add(info + "/top_level.txt", (DIST + "\n").encode())
        records.append(info + "/RECORD,,")
        whl.writestr(info + "/RECORD", "\n".join(records) + "\n")
    return name


def build_sdist(sdist_directory, config_settings=None):
    _ensure_stubs()
    base = "%s-%s" % (DIST, VERSION)
    name = base + ".tar.gz"
    with tarfile.open(Path(sdist_directory) / name, "w:gz") as tar:
        for rel in ("pyproject.toml", "README.md", "gen.sh", "_build/backend.py"):
            tar.add(HERE / rel, arcname="%s/%s" % (base, rel))
        for path, rel in _package_files():
            tar.add(path, arcname="%s/%s" % (base, rel))
        data = _metadata().encode()
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name
