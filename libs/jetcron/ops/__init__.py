"""Application operations: what a service, the api or the CLI does through the bus in one step of the protocol (cancel
or preempt a run, hand a run to placement, read or replay dead letters, the cluster's overview, tenants' secrets, a
`latest` join's marks, the retention new runs are stamped with). They sit between the services and the bus: they
decide with the core and write through the bus, and the bus below them carries bytes only. The layer order is
checked by tests/unit/test_layers.py."""
