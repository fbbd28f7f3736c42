"""Settings: how the notifier delivers, to webhooks and through SMTP."""

from __future__ import annotations

from pydantic import Field

from jetcron.config.group import SettingsGroup


class NotifySettings(SettingsGroup):
    """Which webhook addresses may be reached, how a delivery is tried and paced, and the SMTP server emails go
    through."""

    notify_allow_private: bool = False
    """Let webhooks reach loopback, private and link-local addresses (off: those are server-side request forgery
    targets such as cloud metadata). The api checks it when a job is stored, the notifier at each delivery."""
    notify_max_attempts: int = Field(default=8, ge=1, le=100)
    """Tries of one delivery before it is parked (listed by `jetcron notifications list --parked`)."""
    notify_backoff: float = Field(default=1.0, gt=0)
    """Seconds before a delivery's second try; doubled per try (jitter 50 %), at most 5 minutes."""
    notify_timeout: float = Field(default=10.0, gt=0)
    """Seconds one webhook or SMTP exchange may take in all (resolving, connecting, TLS, sending, the answer): a
    receiver that answers a byte at a time is cut there, and the try counts as failed."""
    notify_per_target: int = Field(default=4, ge=1)
    """Webhook deliveries in flight to one host at once, per notifier replica: a slow receiver holds these; one more
    to that host is put off (not tried, not counted) until one of them ends, and holds nothing meanwhile."""
    notify_per_tenant: int = Field(default=16, ge=1)
    """Webhook deliveries in flight for one tenant at once, per notifier replica (whatever their hosts): below
    notify_concurrency, so that one tenant's slow receivers never hold every place; one more is put off as above."""
    notify_concurrency: int = Field(default=64, ge=1)
    """Run records one notifier replica works on at once, and webhook deliveries it has in flight at once."""
    smtp_host: str | None = None
    """The SMTP server email notifications go through; unset, rules with `email` are refused."""
    smtp_port: int = Field(default=587, ge=1, le=65535)
    """The SMTP server's port (587: submission with STARTTLS)."""
    smtp_from: str = "jetcron@localhost"
    """The From: address of notification emails."""
    smtp_starttls: bool = True
    """Upgrade the SMTP connection with STARTTLS before logging in (off only for a local relay)."""
    smtp_username: str | None = None
    """Log in as this user (with the password in smtp_password_file); unset, send without logging in."""
    smtp_password_file: str | None = None
    """A file holding the SMTP password (a mounted secret): it never sits in the environment or a log."""
