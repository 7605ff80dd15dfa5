"""The controller node and its front ends: `api.service` (the node and its leader's duties, and everything the
front ends share: typed requests, errors, outcomes, settings, metrics, the config requests' rules, the
properties parser), `api.http` (the FastAPI front end), `api.remoting` (the RocketMQ remoting front end),
`api.server.ControllerServer` (all of them, embeddable) and `api.logs` (the daemon's log setup). The two front
ends import, of `api`, only `api.service` (tests/test_layers.py)."""
