"""The module's image archives (`nox -s images`, tools/build-images.sh) the real node imports with ctr."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from isvc_testbed._errors import ImagesMissing

IMAGES = Path(os.environ.get("ISVC_CACHE_DIR") or Path.home() / ".cache" / "isvc-testbed") / "images"


def image_archive(name: str) -> Path:
    """The archive `nox -s images` built for this tree (ISVC_IMAGES_MANIFEST), else the newest one cached."""
    manifest = os.environ.get("ISVC_IMAGES_MANIFEST")
    if manifest:
        built = dict(line.split(" ", 1) for line in Path(manifest).read_text().splitlines() if " " in line)
        if name not in built:
            raise ImagesMissing(f"{manifest} names no {name} image")
        return Path(built[name])
    found = sorted(IMAGES.glob(f"{name}-*.oci.tar"), key=lambda p: p.stat().st_mtime)
    if not found:
        raise ImagesMissing(f"no {name} image in {IMAGES}: build the images with `nox -s images`")
    return found[-1]


def image_ref(archive: Path) -> str:
    """The image reference an OCI archive was saved under (its index's ref.name annotation)."""
    index = subprocess.run(
        ["tar", "-xOf", str(archive), "index.json"], capture_output=True, check=True
    ).stdout
    return str(json.loads(index)["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])
