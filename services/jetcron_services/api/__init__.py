"""The api service: validates and stores jobs, answers queries, cancels and triggers runs."""
