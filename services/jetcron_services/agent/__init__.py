"""The agent service: one per host; takes assigned runs, holds their leases, executes, reports."""
