"""The notifier: webhooks, NATS subjects and emails to job owners about their runs, each delivery logged."""
