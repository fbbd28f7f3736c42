"""The trigger service: turns schedules into runs at the right time, sharded by job."""
