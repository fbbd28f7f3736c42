"""docs/rest-api.md's table of operations, made from the same rows as the document."""

from __future__ import annotations

from jetcron_services.gateway.contract._operations import OPS
from jetcron_services.gateway.contract._rules import SEMANTIC

START = "<!-- generated: python -m jetcron_services.gateway.contract docs/rest-api.md -->"
END = "<!-- end generated -->"


def reference() -> str:
    """docs/rest-api.md's operations table, made from the same rows as the document."""
    lines = [START, "", "| operation | id | answers | reads | writes |", "|---|---|---|---|---|"]
    for op in OPS:
        statuses = ", ".join(str(s) for s in sorted({op.status, *op.problems, 401, 503}))
        reads = ", ".join(f"`{p.name}`" for p in op.params if p.where == "header") or ""
        writes = ", ".join(f"`{h}`" for h in op.reply_headers)
        admin = " (admin)" if op.admin else ""
        lines.append(f"| `{op.method.upper()} {op.path}`{admin} | `{op.operation_id}` | {statuses} | {reads} | "
                     f"{writes} |")
    lines += ["", "Checked beyond the schemas, answered 422 naming the field:", ""]
    lines += [f"- `{op_id}`: {'; '.join(rules)}." for op_id, rules in SEMANTIC.items()]
    return "\n".join([*lines, "", END])


def write_reference(path: str) -> None:
    from pathlib import Path

    doc = Path(path)
    text = doc.read_text()
    start, end = text.index(START), text.index(END) + len(END)
    doc.write_text(text[:start] + reference() + text[end:])
