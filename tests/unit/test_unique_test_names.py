"""Every test module's file name is unique across tests/: pytest imports them by basename (rootdir-relative
packages are not used), so a second tests/<suite>/test_x.py fails the whole run's collection with 'import file
mismatch' in whichever worker meets it second."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_file_name() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        seen[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
