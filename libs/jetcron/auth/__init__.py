"""Identities and transport security: NATS JWTs and credentials, role permissions, certificates."""
