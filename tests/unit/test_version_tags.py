"""The release has one home, jetcron.__version__: the package metadata reads it, and every image tag the deploy
files, the Containerfile and the deploy guide name is it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jetcron

ROOT = Path(__file__).resolve().parents[2]
TAG = re.compile(r"\bjetcron:(\d[\w.+]*?)(?:-docker)?(?=[\s}`]|$)", re.MULTILINE)
"""jetcron:<version> as an image reference; `-docker` is the variant with the docker CLI (Containerfile)."""


def _files() -> list[Path]:
    deploy = [p for p in sorted((ROOT / "deploy").rglob("*")) if p.is_file()]
    return [*deploy, ROOT / "Containerfile", ROOT / "docs" / "deploy.md"]


def test_the_package_metadata_reads_the_version_from_jetcron() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "jetcron.__version__"}


def test_every_image_tag_in_the_deploy_files_is_the_release() -> None:
    tags = {f"{path.relative_to(ROOT)}:{text[:m.start()].count(chr(10)) + 1}": m[1]
            for path in _files() for text in [path.read_text()] for m in TAG.finditer(text)}
    # compose (5), kubernetes (8), the Containerfile's build line and the guide's three: a pattern that stopped
    # matching would pass with nothing to compare
    assert len(tags) >= 17, tags
    assert {where: tag for where, tag in tags.items() if tag != jetcron.__version__} == {}
    build_arg = re.search(r"^ARG VERSION=(\S+)$", (ROOT / "Containerfile").read_text(), re.MULTILINE)
    assert build_arg is not None and build_arg[1] == jetcron.__version__
