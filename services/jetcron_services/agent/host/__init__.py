"""The agent's host side: what this machine offers and how a child runs on it (process groups, limits, spares,
scratch and uid, containers, the reaper). Nothing here knows leases, fencing or reports: the protocol side
(services/jetcron_services/agent: attempt, gang, waiting, reports, service) decides, and drives these."""
