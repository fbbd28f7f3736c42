"""The permission table of docs/security.md, rendered from roles.py (`python -m jetcron.auth.table`)."""

from __future__ import annotations

import sys

from jetcron.auth.roles import Grant, Role, grant

START, END = "<!-- generated: python -m jetcron.auth.table -->", "<!-- end generated -->"
_EXAMPLE = {"agent_id": "AGENT", "tenant": "TENANT"}


def _who(role: Role) -> dict[str, str]:
    if role is Role.AGENT:
        return {"agent_id": _EXAMPLE["agent_id"]}
    if role is Role.TENANT:
        return {"tenant": _EXAMPLE["tenant"]}
    return {}


def _cell(items: tuple[str, ...] | list[str]) -> str:
    return "<br>".join(f"`{i}`" for i in items) or "none"


def _row(role: Role, g: Grant) -> str:
    consumes = [f"{stream}/{durable}" for stream, durable in g.consumes]
    return (f"| {role.value} | {_cell([r.removeprefix('KV_') for r in g.reads])} | {_cell(g.writes)} | "
            f"{_cell(consumes)} | {_cell(g.listens)} | {'yes' if g.manages else 'no'} | `{g.inbox}.>` |")


def render() -> str:
    lines = [START,
             "| role | reads (streams; KV buckets by name) | publishes / writes | pulls from | listens on | "
             "makes topology | reply inbox |",
             "|---|---|---|---|---|---|---|"]
    lines += [_row(role, grant(role, **_who(role))) for role in Role]
    lines.append(END)
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """No argument: print the table; a path: replace the table in that file."""
    if not argv:
        sys.stdout.write(render() + "\n")
        return 0
    with open(argv[0]) as f:
        doc = f.read()
    start, end = doc.index(START), doc.index(END) + len(END)
    with open(argv[0], "w") as f:
        f.write(doc[:start] + render() + doc[end:])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
