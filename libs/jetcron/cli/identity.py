"""Where the CLI finds its server and credentials: flags, then JETCRON_* variables, then the context
`jetcron up` wrote (like kubectl's config), then a local `.jetcron/` data directory."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jetcron.bus.connect import Identity

DEFAULT_URL = "nats://127.0.0.1:4222"


def context_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "jetcron" / "context.json"


@dataclass(frozen=True)
class Target:
    url: str
    identity: Identity


def write_context(url: str, creds: Path | None, tls_ca: Path | None, auth: Path | None = None) -> Path:
    """Remember the local system for the CLI: its URL, the admin's credentials and the keys' folder (paths,
    never contents)."""
    path = context_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps({"nats_url": url, "creds": str(creds) if creds else None,
                                "tls_ca": str(tls_ca) if tls_ca else None,
                                "auth_dir": str(auth) if auth else None}, indent=1) + "\n")
    return path


def auth_dir() -> Path | None:
    """The keys of the local system: the context's, else ./.jetcron/auth."""
    found = _context().get("auth_dir")
    if found:
        return Path(found)
    local = Path(os.environ.get("JETCRON_DATA_DIR", ".jetcron")) / "auth"
    return local if local.exists() else None


def _context() -> dict[str, str | None]:
    try:
        found = json.loads(context_path().read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def resolve(url: str | None, creds: str | None, tls_ca: str | None) -> Target:
    """Flags and JETCRON_* variables win; the context fills what they leave out (when it is for the same URL)."""
    context = _context()
    same = url is None or url == context.get("nats_url")
    if same:
        url = url or context.get("nats_url")
        creds = creds or context.get("creds")
        tls_ca = tls_ca or context.get("tls_ca")
    if creds is None:
        local = Path(os.environ.get("JETCRON_DATA_DIR", ".jetcron")) / "auth" / "admin.creds"
        if local.exists():
            creds = str(local)
    if tls_ca is None and creds is not None:
        beside = Path(creds).parent.parent / "tls" / "ca.pem"
        tls_ca = str(beside) if beside.exists() else None
    return Target(url=url or DEFAULT_URL, identity=Identity(creds=creds, tls_ca=tls_ca))
