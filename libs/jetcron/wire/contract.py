"""The published message contract: an AsyncAPI 3 document of every subject, generated from jetcron.wire.subjects,
the verb table (jetcron.wire.verbs) and the message structs. Pure; `python -m jetcron.wire.schema` writes it to
schemas/asyncapi.json beside one JSON Schema per request and reply (schemas/api/)."""

from __future__ import annotations

from typing import Any

import msgspec

from jetcron.core.models import Priority
from jetcron.wire import subjects as s
from jetcron.wire.messages import (
    EVENT_KINDS,
    ActiveRunsQuery,
    AssignRun,
    CancelRun,
    DeadLettered,
    IdempotencyRoom,
    MintRunCredential,
    PlaceRun,
    RunCredential,
)
from jetcron.wire.verbs import VERBS, JobsCreate

VERSION = "1"
REF = "#/components/schemas/{name}"


def _param(description: str) -> dict[str, str]:
    return {"description": description}


# Stored and core subjects that are not API verbs: (id, address, parameters, message types, who sends, summary).
_STREAMS: list[tuple[str, str, dict[str, str], list[Any], str, str]] = [
    ("submit", s.submit_subject("{tenant}"), {"tenant": "the tenant the request is for (its credential's)"},
     [JobsCreate], "send", "A job request a service publishes (JetStream JC_SUBMIT): durable once acked; its outcome "
                           "is read with the submissions.get verb under the request's Nats-Msg-Id"),
    ("place", s.place_subject(Priority.NORMAL).rsplit(".", 1)[0] + ".{priority}",
     {"priority": "critical, high, normal or low"}, [PlaceRun], "send",
     "An attempt waiting for placement (JetStream JC_PLACE, work queue)"),
    ("assign", s.assign_subject("{agent}"), {"agent": "the agent chosen"}, [AssignRun], "send",
     "An attempt assigned to one agent (JetStream JC_ASSIGN, one durable consumer per agent)"),
    ("event", s.event_subject("{kind}", "{source}"),
     {"kind": ", ".join(EVENT_KINDS), "source": "the reporting agent, tracker, placement, or api"},
     list(dict.fromkeys(EVENT_KINDS.values())), "send",
     "What happened to a run (JetStream JC_EVENTS; blocked and missed carry the run record)"),
    ("logs", s.logs_subject("{run_id}", "{agent}"), {"run_id": "the run", "agent": "the agent writing"},
     [], "send", "A run's output, raw bytes in order; an empty message with header Jetcron-End ends it "
                 "(JetStream JC_LOGS)"),
    ("dlq", s.dlq_subject("{job}"), {"job": "the job's key"}, [DeadLettered], "send",
     "A run that failed for good, with its history (JetStream JC_DLQ)"),
    ("control", s.control_subject("{agent}"), {"agent": "the agent running it"}, [CancelRun], "send",
     "Stop a run now (core NATS; the lease revoke is the durable path)"),
    ("tracker_runs", s.TRACKER_RUNS, {}, [ActiveRunsQuery], "send",
     "The api asks the trackers for a page of the non-terminal runs in one state (request/reply; the reply is a "
     "page of runs)"),
    ("mint", s.mint_subject("{agent}"), {"agent": "the agent asking"}, [MintRunCredential], "send",
     "An agent asks for a held run's short-lived credential (request/reply; the reply is RunCredential)"),
    ("room", s.idem_room_subject("{tenant}"), {"tenant": "the tenant of the run asking"}, [], "send",
     "A job's once() asks how full the idempotency bucket is (request/reply, empty body; the reply is "
     "IdempotencyRoom)"),
    ("checkpoint", s.checkpoint_subject("{tenant}", "{run_id}", "{part}").replace(
        s.checkpoint_token("{run_id}"), "{run_token}"),
     {"tenant": "the run's tenant", "run_token": "subjects.checkpoint_token(run_id)",
      "part": "rec (the record) or f.<attempt>.<slot>.<n> (a file's chunk)"},
     [], "send", "A run's checkpoint record (JSON) or a chunk of its file (raw bytes), written by the run's own "
                 "credential (JetStream JC_CKPT, one message per subject)"),
]


def document() -> dict[str, Any]:
    types: list[Any] = [RunCredential, IdempotencyRoom]
    channels: dict[str, Any] = {}
    operations: dict[str, Any] = {}
    messages: dict[str, Any] = {}

    def message(kind: Any) -> dict[str, str]:
        name = _name(kind)
        if name not in messages:
            types.append(kind)
            messages[name] = {"name": name, "contentType": "application/json",
                              "payload": {"$ref": REF.format(name=name)}}
        return {"$ref": f"#/components/messages/{name}"}

    for verb, spec in VERBS.items():
        cid = verb.replace(".", "_")
        request, reply = message(spec.request), message(spec.reply)
        channels[f"{cid}_reply"] = {"address": None, "description": "the requester's inbox",
                                    "messages": {"reply": reply}}
        addresses = {"": (s.api_subject(verb, "{tenant}"), {"tenant": _param("the caller's tenant (its credential "
                                                                            "may use its own only)")}),
                     "admin_": (s.api_subject(verb), {})}
        for prefix, (address, params) in addresses.items():
            if spec.admin and not prefix:
                continue
            channel: dict[str, Any] = {"address": address, "messages": {"request": request}}
            if params:
                channel["parameters"] = params
            channels[f"{prefix}{cid}"] = channel
            operations[f"{prefix}{cid}"] = {
                "action": "receive", "channel": {"$ref": f"#/channels/{prefix}{cid}"},
                "summary": spec.summary + (" (the admin's subject: every tenant)" if prefix else ""),
                "messages": [{"$ref": f"#/channels/{prefix}{cid}/messages/request"}],
                "reply": {"channel": {"$ref": f"#/channels/{cid}_reply"},
                          "messages": [{"$ref": f"#/channels/{cid}_reply/messages/reply"}]}}
    for cid, address, names, kinds, action, summary in _STREAMS:
        refs = {_name(k): message(k) for k in kinds}
        channels[cid] = {"address": address, "messages": refs,
                         "parameters": {k: _param(v) for k, v in names.items()}}
        operations[cid] = {"action": action, "channel": {"$ref": f"#/channels/{cid}"}, "summary": summary,
                           "messages": [{"$ref": f"#/channels/{cid}/messages/{n}"} for n in refs]}
    _, schemas = msgspec.json.schema_components(types, ref_template=REF)
    return {
        "asyncapi": "3.0.0",
        "info": {"title": "jetcron", "version": VERSION,
                 "description": "Every NATS subject jetcron uses. API verbs answer a JSON envelope "
                                "{ok, result | error}; the reply schemas describe `result`."},
        "defaultContentType": "application/json",
        "channels": channels, "operations": operations,
        "components": {"messages": messages, "schemas": schemas},
    }


def _name(kind: Any) -> str:
    """A schema's name as msgspec gives it (a generic's arguments joined: Page[Run] -> Page_Run_)."""
    (schema,), _ = msgspec.json.schema_components([kind], ref_template="{name}")
    return str(schema["$ref"])
