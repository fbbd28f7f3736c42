"""The repository's commit-msg hook (.githooks/commit-msg) holds a commit's subject to one line of at most 72
characters, the detail in the body."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HOOK = Path(__file__).resolve().parents[2] / ".githooks" / "commit-msg"


def run(tmp_path: Path, message: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "COMMIT_EDITMSG"
    path.write_text(message)
    return subprocess.run([sys.executable, str(HOOK), str(path)], capture_output=True, text=True, check=False)


@pytest.mark.parametrize("message", [
    pytest.param("Fix the tracker's lease\n\nThe body may be as long as it needs to be, line after line.\n", id="body"),
    pytest.param("x" * 72 + "\n", id="subject_at_the_limit"),
    pytest.param("# git's own comments come first\n\nShort subject\n", id="comments_skipped"),
])
def test_a_short_subject_passes(tmp_path: Path, message: str) -> None:
    done = run(tmp_path, message)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("message", "why"), [
    pytest.param("x" * 73 + "\n", "the subject is 73 characters, more than 72", id="long_subject"),
    pytest.param("Subject\nsecond line of a subject\n", "leave the second line blank", id="two_line_subject"),
    pytest.param("# only comments\n\n", "the message is empty", id="empty"),
])
def test_a_long_or_split_subject_is_refused_naming_why(tmp_path: Path, message: str, why: str) -> None:
    done = run(tmp_path, message)
    assert done.returncode == 1
    assert why in done.stderr
