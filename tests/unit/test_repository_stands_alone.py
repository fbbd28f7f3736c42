"""The repository stands on its own: nothing names a machine path or a file outside it, and nothing counts work
periods or tickets. A fact the code relies on is restated in docs/decisions-*.md with its evidence; a figure
carries its date and commit; history lives in git log (CONTRIBUTING.md, "Comments and docs")."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()  # it spells out what it looks for
SKIPPED = ("docs/chaos-report.json", "bench/results/")  # machine-written records, not prose

RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a file outside the repository", re.compile(r"FIELD_" r"NOTES|\.\./shared\b")),
    # The shared machine's own directories; /tmp stays allowed (gate files, container mounts, test data).
    ("a machine path", re.compile(r"(?<![\w.~-])/(?:work|farm)/")),
    ("a work-period word", re.compile(r"\bsessions? ?\d+", re.IGNORECASE)),
    ("a ticket word", re.compile(r"\bissues? #?\d+|\(issue\b|\btickets? #?\d+", re.IGNORECASE)),
)


def offences(line: str) -> list[str]:
    """The rules one line breaks, by name."""
    return [what for what, pattern in RULES if pattern.search(line)]


def violations(root: Path, paths: Iterable[str]) -> list[str]:
    """`path:line: rule: text` for every offending line of the text files among `paths` (relative to root)."""
    found = []
    for path in paths:
        if path == SELF or path.startswith(SKIPPED):
            continue
        try:
            data = (root / path).read_bytes()
        except (FileNotFoundError, IsADirectoryError):  # deleted in the working tree, or a submodule
            continue
        if b"\0" in data:
            continue  # binary
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
            found += [f"{path}:{number}: {what}: {line.strip()[:160]}" for what in offences(line)]
    return found


def tracked_files() -> list[str]:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    return [p for p in listed.stdout.decode().split("\0") if p]


@pytest.mark.parametrize(("line", "expected"), [
    ("# memory, cpu and pids are v1 controllers here (FIELD_" "NOTES)", ["a file outside the repository"]),
    ("see ../sha" "red/DESIGN.md for the targets", ["a file outside the repository"]),
    ("written to /wo" "rk/main/build/out.json", ["a machine path"]),
    ('ROOT = Path("/farm/in")', ["a machine path"]),
    ("| 1a. sim runs, `always` (sess" "ion 13) | 383 runs/s |", ["a work-period word"]),
    ("**Sess" "ion 8: what made a herd run twice.**", ["a work-period word"]),
    ("the late assignments of sess" "ions 4 to 7", ["a work-period word"]),
    ('"""Iss' 'ue 21: where an idle run\'s latency goes."""', ["a ticket word"]),
    ("make test in parallel (iss" "ue 22, point 5)", ["a ticket word"]),
    ("(iss" "ue 21, `docs/benchmarks.md`)", ["a ticket word"]),
    ("All sizes are the full sizes of issues #3 and #7.", ["a ticket word"]),
    ("numbers from sess" "ion 10 (iss" "ue 21)", ["a work-period word", "a ticket word"]),
    # and what may stay
    ("the gate, the session's token record and the CSRF token its forms must carry", []),
    ("kept in a session cookie; no sticky sessions", []),
    ("issued = authority.write_creds(path, Role.TENANT)", []),
    ("assert [(i.public, i.role) for i in authority.issued()] == [(issued.public, 'tenant')]", []),
    ("The admin issues tokens: `jetcron tokens create`", []),
    ('secret = Path("/tmp") / f"jetcron-agent-only-{os.getpid()}"', []),
    ("def test_it(tmp_path: Path) -> None: (tmp_path / 'work' / 'x').mkdir(parents=True)", []),
    ("the JSON is kept in `bench/results/herd-2026-12-02-c/`", []),
    ("the JSON is kept in `bench/results/session9/`", ["a work-period word"]),
    ("measured 2026-12-04, commit a1d2520", []),
])
def test_the_rules_flag_what_they_name_and_nothing_else(line: str, expected: list[str]) -> None:
    assert offences(line) == expected


def test_an_offending_line_is_named_by_file_and_line_and_records_and_binaries_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "libs").mkdir()
    (tmp_path / "libs" / "clock.py").write_text('"""Clocks."""\n\n# 5 ms late on a 5 s sleep (FIELD_' 'NOTES)\n')
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "run.json").write_text('{"note": "sess' 'ion 9"}\n')
    (tmp_path / "logo.png").write_bytes(b"\x89PNG\0sess" b"ion 9\n")
    paths = ["libs/clock.py", "bench/results/run.json", "logo.png", "gone.md"]
    assert violations(tmp_path, paths) == [
        "libs/clock.py:3: a file outside the repository: # 5 ms late on a 5 s sleep (FIELD_" "NOTES)"]


def test_no_tracked_file_names_a_path_outside_the_repository_or_counts_work_periods() -> None:
    found = violations(ROOT, tracked_files())
    assert not found, "restate the fact in docs/decisions-*.md, or date the figure by its commit:\n" + "\n".join(found)


def test_no_tracked_path_counts_work_periods_or_tickets() -> None:
    # (a record's directory is named by its date, not by the work period that measured it)
    named = [path for path in tracked_files() if path != SELF and offences(path.replace("/", " "))]
    assert not named, "\n".join(named)
