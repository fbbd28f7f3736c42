"""The HTTP gateway: the design's REST API over the API service's NATS verbs, for bearer-token holders."""
