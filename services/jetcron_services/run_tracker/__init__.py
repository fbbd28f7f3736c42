"""The run_tracker service: the run state machine applied by CAS, retries, dead letter, reconciliation."""
