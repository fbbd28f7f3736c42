"""Pure decisions, no I/O: models, run state, schedules, placement, retry, ids."""
