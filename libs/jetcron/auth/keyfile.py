"""The secrets key: a random Fernet key in a file only the api and the agents read (jetcron.ops.secrets uses it)."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet


def ensure_key_file(path: Path) -> Path:
    """A new random key in `path` (mode 0600) unless one is there already."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(Fernet.generate_key())
    return path
