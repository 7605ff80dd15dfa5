"""The controller node and its front ends: `api.service` (the node and its leader's duties, no transport),
`api.http` (the FastAPI front end over it), `api.server.ControllerServer` (both, embeddable), plus what any
front end shares: settings.py, metrics.py, logs.py. A remoting front end would sit beside http/ on the same
service."""
