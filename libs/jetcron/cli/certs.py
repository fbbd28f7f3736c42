"""`jetcron certs`: a CA and certificates for NATS TLS, for those who have none."""

from __future__ import annotations

import datetime
from pathlib import Path

import typer

from jetcron.auth.certs import DEFAULT_HOSTS, issue, make_ca

app = typer.Typer(no_args_is_help=True)
Dir = typer.Option(..., "--dir", help="where the CA and certificates are (keys are written mode 0600)")


@app.command("init")
def init(directory: Path = Dir,
         host: list[str] = typer.Option(list(DEFAULT_HOSTS), "--host",
                                        help="a name or address clients reach the servers by (repeat)")) -> None:
    """Make a CA (kept if there) and a server certificate for HOSTs, used by clients and cluster routes."""
    now = datetime.datetime.now(datetime.UTC)
    ca = make_ca(directory, now)
    files = issue(directory, "server", host, now)
    typer.echo(f"CA {ca}\nserver certificate {files.cert}\nserver key {files.key}")
    typer.echo(f"servers: tls {{ cert_file: {files.cert}, key_file: {files.key}, ca_file: {ca} }}; "
               f"clients: --tls-ca {ca} (JETCRON_NATS_TLS_CA)")


@app.command("client")
def client(name: str, directory: Path = Dir) -> None:
    """A client certificate NAME signed by the CA in --dir (for servers that verify clients)."""
    if not (directory / "ca.pem").exists():
        typer.echo(f"usage error: no CA in {directory}: run `jetcron certs init --dir {directory}` first", err=True)
        raise typer.Exit(2)
    files = issue(directory, name, [], datetime.datetime.now(datetime.UTC))
    typer.echo(f"client certificate {files.cert}\nclient key {files.key}")
