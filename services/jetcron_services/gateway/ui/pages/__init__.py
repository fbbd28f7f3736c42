"""The dashboard's pages and actions, under /ui: server-rendered, each one or a few typed SDK calls as the viewer.

Like the REST routes, no logic of the API lives here: a page asks the API service for what its viewer may see
(a tenant's token sees its tenant, the admin's sees all), and shapes it with present.py. Actions are plain HTML
forms (htmx submits them and asks for confirmation); each answers with a redirect to the page that shows the
result, or back with the API's error as a message.
"""

from __future__ import annotations

from typing import Any

from jetcron_services.gateway.ui.pages._calendars import calendar_page, calendars_page
from jetcron_services.gateway.ui.pages._cluster import agents_page, tenants_page
from jetcron_services.gateway.ui.pages._jobs import create_job, flow_page, job_action, job_page, jobs_page
from jetcron_services.gateway.ui.pages._overview import login, login_page, logout, overview
from jetcron_services.gateway.ui.pages._runs import (
    cancel_run,
    dlq_page,
    replay,
    run_log,
    run_page,
    run_state,
    set_run_priority,
)

ROUTES: list[Any] = [login_page, login, logout, overview, jobs_page, create_job, job_page, job_action, run_page,
                     run_state, run_log, cancel_run, set_run_priority, calendars_page, calendar_page, flow_page,
                     agents_page, dlq_page, replay, tenants_page]

__all__ = ["ROUTES"]
