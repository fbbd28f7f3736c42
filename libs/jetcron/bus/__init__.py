"""The only package that imports nats: connect, topology, publish, consume, KV stores, leases, server."""
